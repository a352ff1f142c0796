"""The lab's declared questions and seeds, recorded before a run: which seeds explored, which decide.

The questions of ``quick`` and ``full`` (:data:`posembed.lab.presets.PRIMARY`) were named after
looking at ``quick``'s results on seeds 0-6 (:data:`EXPLORED`): on those seeds a verdict is a
preview, not a confirmation. ``full`` decides them on fresh seeds, read from its preset. Each
preset's :class:`Registration` is declared here, in the package, with the commit the questions
were declared at (``declared_at``); the runner writes :func:`record` (the questions, the seeds,
the commit that runs) into the store's meta under :data:`META_KEY` when it claims the out dir, so
a report can show the questions were fixed before its numbers existed.

>>> registration("full").confirms((1000, 1001, 1002))
True
>>> registration("quick").confirms(get_preset("quick").seeds)
False
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from posembed.lab.presets import PRIMARY, Interaction, Primary, get_preset

__all__ = [
    "Registration",
    "REGISTERED",
    "EXPLORED",
    "DECIDES",
    "META_KEY",
    "registration",
    "record",
    "describe",
    "source_commit",
]

#: the seeds whose results chose the questions (the quick runs of 2026-11-26/27)
EXPLORED = tuple(range(7))
#: the preset whose run decides the questions (the study), and its command
DECIDES = "full"
#: the store meta key the runner writes :func:`record` under
META_KEY = "registration"


@dataclass(frozen=True)
class Registration:
    """One preset's declared questions: the commit they were declared at, the seeds that explored."""

    preset: str
    declared_at: str
    explored: tuple[int, ...] = EXPLORED

    def confirms(self, seeds: tuple[int, ...]) -> bool:
        """Whether a run on ``seeds`` confirms (no seed explored) rather than previews."""
        return not set(seeds) & set(self.explored)


#: each preset's registration (questions: :data:`posembed.lab.presets.PRIMARY`), declared at the
#: commit that wrote them down before the study's run (``results/lab/full/PREREGISTRATION.md``)
REGISTERED: dict[str, Registration] = {name: Registration(name, "2c031c6") for name in PRIMARY}


def registration(name: str) -> Registration | None:
    """The registration of preset ``name`` (None for a preset with no declared questions)."""
    return REGISTERED.get(name)


def describe(asked: Primary | Interaction) -> str:
    """One asked comparison in words, as the record stores it.

    >>> describe(PRIMARY["full"][0])
    'Q1 charlm: learned/base vs sinusoidal/base, at L'
    """
    if isinstance(asked, Interaction):
        return f"{asked.question} {asked.task}: interaction ({describe(asked.first)}) vs ({describe(asked.second)})"
    return (
        f"{asked.question} {asked.task}: {asked.a.scheme}/{asked.a.variant} vs {asked.b.scheme}/{asked.b.variant}, "
        f"{asked.measure.value}"
    )


def source_commit() -> str:
    """The git commit of the posembed source that runs (``"unknown"`` outside a git checkout)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def record(name: str, seeds: tuple[int, ...]) -> str | None:
    """The JSON the runner stores for a run of preset ``name`` on ``seeds`` (None: no registration)."""
    entry = registration(name)
    if entry is None:
        return None
    return json.dumps(
        {
            "preset": name,
            "questions": [describe(a) for a in PRIMARY[name]],
            "declared_at": entry.declared_at,
            "explored_seeds": list(entry.explored),
            "deciding_seeds": list(seeds),
            "confirms": entry.confirms(seeds),
            "run_commit": source_commit(),
            "decides": DECIDES,
            "decides_command": f"posembed lab run --preset {DECIDES} --out lab-{DECIDES}",
            "full_seeds": list(get_preset(DECIDES).seeds),
        },
        sort_keys=True,
    )
