"""The README's "What the lab measured here" section says what ``posembed lab report`` would say.

Each ``<!-- verdict:NAME -->...<!-- /verdict -->`` block quotes numbers and one ``verdict
**word**``. The numbers are parsed back out, the verdict recomputed with the report's own rule
(:mod:`posembed.lab.verdicts`), and the README's word must match. A quoted number stands for
every value that rounds to it (``15.86`` for 15.855..15.865): the verdict must be the same at
every corner of those intervals, else the README quotes too few digits to support its word.
Press and Kazemnejad are also rerun end to end through the report's Q6 section.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from posembed.lab import verdicts as rules
from posembed.lab.calibration import TARGET_VAL_LOSS, TOLERANCE
from posembed.lab.report.calibration import calibration_section
from posembed.lab.report.tables import LabData
from tests.lab.test_report_questions import record

README = Path(__file__).resolve().parents[1] / "docs" / "results.md"  # the results page of the docs site
SECTION = "## What the lab measured here"
#: names in the README's prose -> scheme names
NAMES = {"learned": "learned", "sinusoidal": "sinusoidal", "RoPE": "rope", "T5 bias": "t5_bias", "NoPE": "nope",
         "ALiBi": "alibi"}
_NAME = "|".join(NAMES)
_NUMBER = r"[+−-]?\d+\.\d+"


def section_text() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    return text[start:] if end < 0 else text[start:end]


def blocks() -> dict[str, str]:
    found = re.findall(r"<!-- verdict:(\w+) -->(.*?)<!-- /verdict -->", section_text(), flags=re.S)
    names = [name for name, _ in found]
    assert len(names) == len(set(names)), f"verdict blocks repeated: {names}"
    return {name: " ".join(text.split()) for name, text in found}  # one line: prose wraps anywhere


def word(block: str) -> str:
    (found,) = re.findall(r"verdict \*\*([A-Za-z ]+)\*\*", block)
    return found


class Quoted(float):
    """A number as printed: its value and half a unit of its last printed digit."""

    half: float

    @classmethod
    def parse(cls, text: str) -> "Quoted":
        text = text.replace("−", "-")
        number = cls(float(text))
        number.half = 0.5 * 10.0 ** -len(text.partition(".")[2])
        return number


def numbers(pattern: str, block: str) -> list[tuple[str, ...]]:
    found = re.findall(pattern, block)
    assert found, f"no numbers matching {pattern!r} in {block!r}"
    return found


def verdicts_over_roundings(values: Sequence[Quoted], rule: Callable[[Sequence[float]], str]) -> set[str]:
    """The rule's verdict at every corner of the quoted numbers' rounding intervals."""
    return {rule(corner) for corner in itertools.product(*[(v - v.half, v + v.half) for v in values])}


def _nanogpt(block: str) -> tuple[list[Quoted], Callable]:
    pattern = rf"validation loss \*\*({_NUMBER})\*\* \(published: ({_NUMBER}) ± ({_NUMBER})"
    ((loss, target, tolerance),) = numbers(pattern, block)
    assert (float(target), float(tolerance)) == (TARGET_VAL_LOSS, TOLERANCE)
    return [Quoted.parse(loss)], lambda v: rules.nanogpt(v[0], TARGET_VAL_LOSS, TOLERANCE)


def _vaswani(block: str) -> tuple[list[Quoted], Callable]:
    found = numbers(rf"(order|copy|reverse|charlm) Δ ({_NUMBER}) \(noise ({_NUMBER})\)", block)
    ((alike, total),) = numbers(r"alike on (\d+) of (\d+) tasks", block)
    values = [Quoted.parse(x) for _, delta, noise in found for x in (delta, noise)]
    assert int(total) == len(found), "every task's Δ and noise must be quoted"
    assert int(alike) == sum(abs(d) <= n for d, n in zip(values[::2], values[1::2]))
    return values, lambda v: rules.vaswani(
        rules.pair_verdict(d, n, True, "learned", "sinusoidal") == "alike" for d, n in zip(v[::2], v[1::2]))


def _press(block: str) -> tuple[list[Quoted], Callable]:
    found = numbers(rf"({_NAME}) ({_NUMBER}) → ({_NUMBER})", block)
    schemes = [NAMES[name] for name, _, _ in found]
    values = [Quoted.parse(x) for _, at_l, at_8l in found for x in (at_l, at_8l)]
    return values, lambda v: rules.press({s: rules.perplexity_ratio(a, b) for s, a, b in zip(schemes, v[::2], v[1::2])})


def _kazemnejad_scores(block: str) -> dict[str, dict[str, Quoted]]:
    per_task = {}
    for task, text in re.findall(r"(copy|reverse): ([^;)]*)", block):
        per_task[task] = {NAMES[name]: Quoted.parse(x) for name, x in numbers(rf"({_NAME}) ({_NUMBER})", text)}
    assert set(per_task) == {"copy", "reverse"}, per_task
    return per_task


def _kazemnejad(block: str) -> tuple[list[Quoted], Callable]:
    per_task = _kazemnejad_scores(block)
    keys = [(task, scheme) for task, scores in per_task.items() for scheme in scores]

    def rule(v: Sequence[float]) -> str:
        regrouped: dict[str, dict[str, float]] = {}
        for (task, scheme), value in zip(keys, v):
            regrouped.setdefault(task, {})[scheme] = value
        return rules.kazemnejad(regrouped)

    return [per_task[t][s] for t, s in keys], rule


RULES = {"nanogpt": _nanogpt, "vaswani": _vaswani, "press": _press, "kazemnejad": _kazemnejad}


def test_the_section_has_one_block_per_verdict_rule():
    assert set(blocks()) == set(RULES)


@pytest.mark.parametrize("name", sorted(RULES))
def test_readme_verdict_is_the_reports_rule_on_the_quoted_numbers(name):
    block = blocks()[name]
    values, rule = RULES[name](block)
    computed = verdicts_over_roundings(values, rule)
    assert len(computed) == 1, f"{name}: the quoted digits allow {sorted(computed)}; quote more digits"
    assert word(block) == computed.pop(), f"{name}: the README says {word(block)!r}, the report's rule says otherwise"


def _lab(*records) -> LabData:
    return LabData(Path("unused"), {"name": "readme"}, list(records))


def test_press_and_kazemnejad_words_are_what_the_report_writes():
    """The quoted numbers as stored trials of two seeds with no spread between them, through the
    report's own Q6 section: with zero-width intervals its interval rules reduce to the point rules
    the README's words are checked against above."""
    press = numbers(rf"({_NAME}) ({_NUMBER}) → ({_NUMBER})", blocks()["press"])
    charlm = [record("charlm", NAMES[name], {8: float(a), 64: float(b)}, seed=seed) for name, a, b in press
              for seed in (0, 1)]
    algo = [record(task, scheme, {8: 1.0, 16: float(value)}, seed=seed)
            for task, scores in _kazemnejad_scores(blocks()["kazemnejad"]).items() for scheme, value in scores.items()
            for seed in (0, 1)]
    answer = calibration_section(_lab(*charlm, *algo)).answer
    assert f"ALiBi flattest): {word(blocks()['press'])}." in answer
    assert f"best on copy/reverse): {word(blocks()['kazemnejad'])}." in answer


def test_rounding_intervals_catch_a_word_the_digits_cannot_support():
    """The 2026-11-22 README quoted learned 10.6 -> 15.9: a ratio of 1.488..1.512, astride the 1.5 threshold."""
    values, rule = _press("learned 10.6 → 15.9, ALiBi 10.3 → 9.5")
    assert [v.half for v in values] == pytest.approx([0.05] * 4)
    assert verdicts_over_roundings(values, rule) == {"agree", "partly"}
    values, rule = _press("learned 10.6 → 15.9, sinusoidal 10.7 → 15.2, ALiBi 10.3 → 9.5")
    assert verdicts_over_roundings(values, rule) == {"partly"}  # what the README should have said (it said agree)
