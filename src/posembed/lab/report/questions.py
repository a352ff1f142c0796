"""The lab report's answers: one :class:`Section` per seed question, computed from the stored trials.

Every verdict word comes from :mod:`posembed.lab.report.decisions`: the preset's primary
comparisons (named before the run) and the paper checks form one family, tested with the seed as
the unit (seed-paired t where two groups ran on the same seeds, else Welch's t) under Holm at a
family-wise 5 %; "alike" only from an equivalence test within a stated margin; "cannot tell" with
the smallest difference the comparison could have detected. Every other comparison a section
shows is *exploratory*: its numbers and unadjusted p, no winner word. When the store lacks the
trials a question needs, the section says so and names the presets that have them.

>>> from posembed.stats.verdict import Comparison, decide
>>> (d,) = decide([Comparison("Q2 charlm: concat vs add", "add", "concat", (2.30, 2.31, 2.32), (2.40, 2.42, 2.41),
...                           False, 0.02, test="paired")])
>>> decision_row(d)[3:]
['+0.1 [+0.0752, +0.125]', 'seed-paired t', '0.0033 (0.0033)', 'add better', '0.0326']
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from posembed.lab.report.decisions import LabDecisions, group_comparison, group_labels, judged_metric
from posembed.lab.report.rows import (
    DECISION_HEADER,
    TRAINING_HEADER,
    changes,
    decision_row,
    group_text,
    mdd_text,
    rule_note,
    short_label,
    shown_name,
    training_table,
    verdict_text,
)
from posembed.lab.report.tables import LabData, Stat, metric_lengths, metric_stat, ordered, scheme_family, train_length
from posembed.lab.task_registry import METRICS, metric_label
from posembed.stats.verdict import Comparison, Decision, Outcome, seeds_clause

__all__ = [
    "Section",
    "judged_metric",
    "presets_with",
    "learned_vs_sinusoidal",
    "variant_question",
    "extrapolation",
    "ranking_scores",
    "ScoreRow",
    "frozen_vs_trained",
    "lacking",
    "decision_row",
    "DECISION_HEADER",
    "exploratory",
    "group_text",
    "rule_note",
    "verdict_text",
    "training_table",
    "TRAINING_HEADER",
    "changes",
    "untested_elsewhere",
    "short_label",
    "untestable",
]

Table = tuple[list[str], list[list[Any]]]


@dataclass
class Section:
    """A question's title, its one-line answer, supporting text and tables.

    ``verdict`` is the short finding the report's summary lists (empty: the section states none,
    e.g. the store lacks its trials); ``decided`` whether any of its verdicts is more than
    "cannot tell"; ``anchor`` the id the summary links to.
    """

    title: str
    answer: str
    paragraphs: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    verdict: str = ""
    anchor: str = ""
    decided: bool = False


def presets_with(
    schemes: tuple[str, ...] = (), variants: tuple[str, ...] = (), tasks: tuple[str, ...] = ()
) -> list[str]:
    """Names of the presets whose sweep includes all the given schemes, variants and any of ``tasks``.

    >>> presets_with(schemes=("nope", "t5_bias"), tasks=("copy", "reverse"))
    ['lengthgen', 'survey']
    """
    from posembed.lab.presets import PRESETS, get_preset

    names = []
    for name in sorted(PRESETS):
        exp = get_preset(name)
        if (
            set(schemes) <= set(exp.schemes)
            and set(variants) <= set(exp.variants)
            and (not tasks or set(tasks) & set(exp.tasks))
        ):
            names.append(name)
    return names


def lacking(need: str, **preset_filter: tuple[str, ...]) -> str:
    """The plain statement that the store cannot answer, naming the presets that can."""
    names = presets_with(**preset_filter)
    if not names:
        return f"The store lacks the trials to answer this: it needs {need}; no preset has them; add them with --set."
    commands = " or ".join(f"`posembed lab run --preset {n}`" for n in names)
    return (
        f"The store lacks the trials to answer this: it needs {need}; "
        f"{commands} train{'s' if len(names) == 1 else ''} them."
    )


def exploratory(data: LabData) -> list[Comparison]:
    """Every comparison the sections show (Q1-Q3, Q5) at the end of training, named as the
    primaries are, and the unmatched ratio of Q4's contest."""
    found = []
    for task in data.tasks():
        c = group_comparison(
            data,
            f"Q1 {task}: sinusoidal vs learned, {judged_metric(task)} at L",
            task,
            ("learned", "base"),
            ("sinusoidal", "base"),
            ("learned", "sinusoidal"),
            primary=False,
            topic="Q1",
        )
        found.append(c) if c is not None else None
        for question, variant in (("Q2", "concat"), ("Q3", "every_layer"), ("Q5", "frozen")):
            for scheme in ordered(s for (_, s, v) in data.groups(task) if v == variant):
                names = group_labels((scheme, "base"), (scheme, variant))
                c = group_comparison(
                    data,
                    f"{question} {task}: {names[1]} vs {names[0]}, {judged_metric(task)} at L",
                    task,
                    (scheme, "base"),
                    (scheme, variant),
                    names,
                    primary=False,
                    topic=question,
                )
                found.append(c) if c is not None else None
    if "charlm" in data.tasks():
        c = group_comparison(
            data,
            "Q4 charlm: nope vs alibi, unmatched 8x/1x perplexity ratio (different text at each length)",
            "charlm",
            ("alibi", "base"),
            ("nope", "base"),
            ("alibi", "nope"),
            "ratio",
            primary=False,
            topic="Q4",
        )
        found.append(c) if c is not None else None
    return found


def _answer(decisions: list[Decision], what: str, looks: LabDecisions | None = None) -> tuple[str, str, bool]:
    """The section's answer, summary verdict and whether anything was decided."""
    primaries = [d for d in decisions if d.claims]
    others = len(decisions) - len(primaries)
    tail = f" {others} further comparison{'s' if others != 1 else ''} exploratory (numbers only)." if others else ""
    if not primaries:
        return (
            f"No primary comparison of this preset: {what} is shown as exploratory numbers only.{tail}",
            "exploratory only",
            False,
        )
    look = (lambda d: looks.look(d)) if looks is not None else (lambda d: None)  # noqa: E731
    said = "; ".join(
        f"{shown_name(d.comparison.name)}: {verdict_text(d, look(d))}"
        + (f" (could detect {mdd_text(d)}{seeds_clause(d)})" if d.outcome is Outcome.CANNOT_TELL else "")
        for d in primaries
    )
    decided = any(d.decides for d in primaries)
    summary = "; ".join(
        (f"{short_label(look(d).asked)}: " if look(d) and look(d).asked else "") + verdict_text(d, look(d))
        for d in primaries
    )
    return f"{said}.{tail}", summary, decided


def untestable(decisions: LabDecisions, question: str) -> str:
    """A sentence naming the primaries of ``question`` the store cannot test ("" when none)."""
    missing = [short_label(a) for a in decisions.missing if a.question == question]
    if not missing:
        return ""
    return (
        f" Not tested, the store lacks their trials or measure (e.g. the matched loss, which stores written "
        f"before it lack): {'; '.join(missing)}."
    )


def _question(
    data: LabData,
    decisions: LabDecisions,
    question: str,
    title: str,
    need: str,
    anchor: str,
    **preset_filter: tuple[str, ...],
) -> Section:
    final = decisions.primaries(question)
    shown = final + [d for d in decisions.about(question) if not d.claims]
    if not shown:
        return Section(title, lacking(need, **preset_filter), anchor=anchor)
    answer, verdict, decided = _answer(shown, need, decisions)
    answer += untestable(decisions, question)
    flips = changes(decisions, question)
    if flips:
        answer += " " + " ".join(flips)
    rows = [decision_row(d, decisions.look(d)) for d in sorted(shown, key=lambda d: not d.claims)]
    section = Section(
        title,
        answer,
        [rule_note(data, decisions), decisions.margin_note() + "."],
        [(list(DECISION_HEADER), rows)],
        verdict=verdict,
        anchor=anchor,
        decided=decided,
    )
    if len(decisions.points) > 1 and final:
        section.paragraphs.append(
            "Over training: each primary comparison at every point the trials were evaluated "
            "at (one family with the rest)."
        )
        section.tables.append(training_table(decisions, question))
    return section


def learned_vs_sinusoidal(data: LabData, decisions: LabDecisions) -> Section:
    """Question 1: learned vs sinusoidal absolute positions at the training length."""
    return _question(
        data,
        decisions,
        "Q1",
        "Q1. Learned or sinusoidal positions, at the training length?",
        "the base variant of both learned and sinusoidal",
        "q1",
        schemes=("learned", "sinusoidal"),
        variants=("base",),
    )


def variant_question(
    data: LabData, decisions: LabDecisions, question: str, title: str, variant: str, need: str, anchor: str = ""
) -> Section:
    """Questions 2, 3 and 5: the ``base`` variant (A) against ``variant`` (B), per task and scheme."""
    return _question(data, decisions, question, title, need, anchor, variants=("base", variant))


def untested_elsewhere() -> list[str]:
    """Where the questions this report does not test are answered (the report says so itself)."""
    return [
        "Is a learned position table just an `nn.Parameter`? `tests/schemes/test_learned.py` shows the lookup "
        "equals a one-hot product with the table, and the two spellings are one scheme; "
        "`posembed inspect` shows a trained model's table.",
        'How does BERT embed a sentence pair (tokens, positions, segment ids)? `posembed encode "text A" "text B"` '
        "prints each part; docs/bert.md walks through it.",
        "Which context extension works (PI, NTK, YaRN, ...)? `posembed lab context --preset context` "
        "(docs/results.md, the context-extension study).",
    ]


@dataclass(frozen=True)
class ScoreRow:
    """One scheme's extrapolation on one task (``base`` variant, means over seeds).

    ``per_length`` holds ``(length, mean)`` for every evaluated length > L (mean ``None``: not
    measurable there, e.g. past a position table); ``beyond`` their mean (``None`` if any is
    ``None``), the score ordered; ``at_train`` the mean at L; ``seeds`` each seed's own mean
    beyond L (empty when ``beyond`` is ``None``).
    """

    scheme: str
    at_train: float | None
    beyond: float | None
    per_length: tuple[tuple[int, float | None], ...]
    rank: int = 0
    seeds: tuple[float, ...] = ()

    @property
    def longest(self) -> int:
        return self.per_length[-1][0]

    @property
    def at_longest(self) -> float | None:
        return self.per_length[-1][1]


def _mean_or_none(stat: Stat) -> float | None:
    return stat.mean if stat.n else None


def _seed_scores(trials: list, metric: str, lengths: list[int]) -> tuple[float, ...]:
    """Each seed's own mean of ``metric`` over ``lengths`` (a seed missing any length has none)."""
    scores = []
    for trial in trials:
        values = [metric_stat([trial], metric, n) for n in lengths]
        if all(v.n for v in values):
            scores.append(sum(v.mean for v in values) / len(values))
    return tuple(scores)


def ranking_scores(data: LabData, task: str, metric: str | None = None) -> list[ScoreRow]:
    """Schemes of ``task`` ordered by ``metric``'s mean beyond the training length (ties share a rank)."""
    metric = metric or judged_metric(task)
    rows = []
    for (_, scheme, variant), trials in data.groups(task).items():
        if variant != "base":
            continue
        context = train_length(trials)
        lengths = [n for n in metric_lengths(trials, metric) if n > context]
        if not lengths:
            continue
        beyond = [_mean_or_none(metric_stat(trials, metric, n)) for n in lengths]
        score = None if None in beyond else sum(beyond) / len(beyond)
        at_train = _mean_or_none(metric_stat(trials, metric, context))
        rows.append(
            ScoreRow(
                scheme,
                at_train,
                score,
                tuple(zip(lengths, beyond, strict=True)),
                seeds=_seed_scores(trials, metric, lengths) if score is not None else (),
            )
        )
    sign = -1.0 if METRICS[metric].higher_is_better else 1.0
    key = [math.inf if r.beyond is None else sign * r.beyond for r in rows]
    return sorted(
        (ScoreRow(**{**r.__dict__, "rank": 1 + sum(k < key[i] for k in key)}) for i, r in enumerate(rows)),
        key=lambda r: r.rank,
    )


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def _ranking_table(task: str, scores: list[ScoreRow], context: int) -> Table:
    metric = metric_label(judged_metric(task))
    lengths = [n for n, _ in scores[0].per_length]
    header = [
        f"{task}: order of the means",
        "scheme",
        "family",
        f"{metric} at L = {context}",
        *[f"at {n} ({n / context:.3g}x)" for n in lengths],
        "mean beyond L [interval]",
    ]
    rows = []
    for r in scores:
        by_length = dict(r.per_length)
        rows.append(
            [
                r.rank,
                r.scheme,
                scheme_family(r.scheme),
                _fmt(r.at_train),
                *[_fmt(by_length.get(n)) for n in lengths],
                group_text(r.seeds) if r.beyond is not None else "n/a",
            ]
        )
    return header, rows


def extrapolation(data: LabData, decisions: LabDecisions) -> Section:
    """Question 4: the preset's primary extrapolation contest, and every scheme ordered beyond L (exploratory)."""
    title = "Q4. Which scheme extrapolates? (the primary contest, then every scheme beyond the training length)"
    tables, orders = [], []
    for task in data.tasks():
        scores = ranking_scores(data, task)
        if len(scores) < 2:
            continue
        tables.append(_ranking_table(task, scores, train_length(next(iter(data.groups(task).values())))))
        orders.append(f"{task}: " + ", ".join(r.scheme for r in scores))
    shown = decisions.primaries("Q4") + [d for d in decisions.about("Q4") if not d.claims]
    if not tables and not shown:
        return Section(
            title,
            lacking("the base variant of two schemes or more, evaluated beyond L", variants=("base",)),
            anchor="q4",
        )
    answer, verdict, decided = _answer(shown, "the order beyond L", decisions)
    answer += untestable(decisions, "Q4") + "".join(" " + flip for flip in changes(decisions, "Q4"))
    if not decisions.primaries("Q4") and any(a.question == "Q4" for a in decisions.missing):
        verdict = "no verdict (the primary contest is not testable on this store: no matched loss)"
    if orders:
        answer += " Order of the means beyond L (exploratory, not a test): " + "; ".join(orders) + "."
    note = (
        "The contest is judged on the matched ratio: the loss on the same characters (the last L targets of "
        "each window) at the longest context minus at L, so a model that ignores distant context reads 0 "
        "(ratio 1). The unmatched ratio (all positions of each window, different text at each length) is shown "
        "as exploratory only. The ranking tables order each task's schemes by their mean beyond L (higher first "
        "for accuracy and exact match, lower first for validation loss; n/a beyond L, e.g. past a position "
        "table, last): exploratory numbers, no winner."
    )
    section = Section(title, answer, [rule_note(data, decisions), note], anchor="q4", verdict=verdict, decided=decided)
    if shown:
        section.tables.append((list(DECISION_HEADER), [decision_row(d, decisions.look(d)) for d in shown]))
    if len(decisions.points) > 1 and decisions.primaries("Q4"):
        section.tables.append(training_table(decisions, "Q4"))
    section.tables += tables
    return section


def frozen_vs_trained(data: LabData, decisions: LabDecisions, drift: Table) -> Section:
    """Question 5: frozen vs trained position table (exploratory), and how far the trained table drifts."""
    section = variant_question(
        data,
        decisions,
        "Q5",
        "Q5. Frozen or trained position table? How far does it drift in training?",
        "frozen",
        "the frozen and base variants of a scheme with parameters (e.g. learned)",
        anchor="q5",
    )
    header, rows = drift
    trained = [row for row in rows if row[2] != "frozen"]
    if trained:
        section.answer += (
            " Drift of the trained tables (||W - W0|| / ||W0||): "
            + "; ".join(f"{row[0]}/{row[1]}/{row[2]} {row[4]}" for row in trained)
            + "."
        )
        section.tables.append((header, rows))
    else:
        section.paragraphs.append("No stored trial has trainable position parameters, so no drift was measured.")
    return section
