"""The measured run times, stated once: README's ``<!-- times:NAME -->`` blocks and the commands'
``--help`` texts quote these phrases word for word (tests/test_readme_commands.py checks both).

A re-measurement changes the phrase here and README's block together. Each phrase is a wall
time on 2 CPU cores with the default settings; where it was taken and at what load is said
beside it (the notes are for maintainers; ``--help`` quotes the phrase alone).

>>> TIMES["smoke"]
'8–13 s on 2 CPU cores'
"""

from __future__ import annotations

__all__ = ["TIMES", "BLOCKS", "quote"]

TIMES: dict[str, str] = {
    # pip install -c constraints.txt -e '.[all]': 43 s with pip's cache warm and idle cores, 2 min 24 s busy
    "install": "1–3 minutes",
    # posembed lab run --preset smoke (15 trials): 8-13 s at load 1-8 (issue 35's walk-through); at load 19-22
    # (2026-11-27) 33, 55 and 47 s with 6.7-7.2 s of CPU time; its report 35 s (4.3 s of CPU time)
    "smoke": "8–13 s on 2 CPU cores",
    # posembed lab run --preset quick, the 84-trial preset of 2026-11-28 with no biases and fused AdamW (evaluated at
    # 10/30/100 % with matched text): README's command, run then report, 4 min 54 s + 8 s on 2 idle cores (load 1.9 at
    # the end; results/lab/quick/meta.json); the same trials under load 2-19: 655 CPU s (user + sys), 22 min 19 s wall.
    # Before (biases, for-loop AdamW, the 8x lengths scored twice): 991 CPU s, 38 min 10 s at load 9-16
    "quick": "about 655 CPU seconds: about 5 minutes on 2 idle CPU cores, 20–40 on a busy machine",
    # python -m pytest -n 2 -q: 13 min 47 s at load 2-4 for 4,041 tests with a study paused beside it (2026-11-28 11:55;
    # the figures, the exact McNemar and scipy's t tests added ~4 CPU minutes); 5 min 44 s at load 1.5-2.2
    # (3,662 tests, CI rehearsal 2026-11-27 11:12; 5 min 20 s
    # for 3,626 at load 1-3 at 09:12; 11 min 07 s for
    # 3,599 at load 4 the same day; 4 min 47 s for 3,475 at load 3-4 earlier; 3 min 10 s for
    # 2,999 tests on 2026-11-26); 8-15 min at load 5-7 (2,999 tests)
    # 2026-11-28 15:15 and 15:28: 8 min 52 s and 9 min 21 s for 4,220 tests with CI's Ray tests, 2 idle cores;
    # 17:40 (after the folder move, the lint and its mypy run in tests/test_lint.py): bash .ci/run in a fresh clone,
    # 4,316 passed in 12 min 0 s (12 min 35 s with the install) at load 2-3 (the suite's own two workers);
    # 25 min 27 s for 4,313 at load 3-6 beside three other jobs;
    # 2026-11-29 02:14: bash .ci/run in a fresh clone, 4,350 passed in 13 min 57 s (about 15 min with the install) at
    # load about 2.3 (the suite's own two workers); five runs in the checkout that night: 14 min 2 s to 14 min 57 s
    # 2026-11-29 03:22: the quick tier README runs (python -m pytest -n 2 -q -m "not slow", the tests over about 3 s
    # moved behind pyproject's `slow` marker): 4,172 tests in 3 min 28 s (3 min 36 s with the start) at load about 2
    # (the suite's own two workers); the slow tier .ci/run runs after it (-m slow --dist loadgroup): 180 tests in
    # 11 min 35 s at load about 2 (10 min 44 s for 177 of them under --dist load, where each worker builds the shared
    # module fixtures itself)
    "tests": "about 4 minutes with nothing else running",
    "tests-slow": "about 12 minutes more",
    # posembed extend-eval --quick (256 and 1024 tokens, 10 queries): 2 min 25 s at load 1-8 (issue 35's walk-through);
    # 17 min 37 s at load 20-25 with 153 s of CPU time (2026-11-27); 12 min 25 s busy (2026-11-26); 7 min 40 s at
    # load 7-9 with 141 s of CPU time (2026-11-28, niced)
    "extend-eval-quick": (
        "about 150 s of CPU time: 2 min 25 s on 2 lightly loaded CPU cores, 12–18 min on a busy machine"
    ),
    # posembed extend --to 2048 --finetune 60 (the bundled MiniLM): 2 min 3 s of CPU time for the whole command
    # (122.9 s user, 1.9 s system), the 60 steps 5 min 17 s of wall time, the command 5 min 55 s, at load 3.7-9.3
    # (2026-11-28 10:19-10:25, niced); docs/checkpoints.md's old "6-9 s a step" was wall time on a busier machine
    "extend-finetune": "about 2 s of CPU time a step (60 steps: 5 min 17 s on 2 CPU cores at load 4–9)",
    # posembed extend-eval (full): its 4096 column alone took 15 min on 2 idle cores
    "extend-eval-full": "hours: the one-seed 4096 column alone took 15 min on 2 idle CPU cores",
    # posembed lab context --preset context: one seed about 15 min; seeds 0-2 side by side 33 min, busy
    "context": "about 15 min a seed on 2 CPU cores; 33 min for three run side by side on a busy machine",
    "context-smoke": "under a minute",
    # posembed bench --quick: 72 s of CPU time for the four suites (2026-11-26)
    "bench-quick": "about 70 s of CPU time, so about a minute on an idle 2-core machine",
    # posembed lab run --preset full (96 trials of 1500 steps): a trial's 1500 steps at 86.6 ms (one thread, two trials
    # side by side at load ~2, 2026-11-28 probe of the recipe) plus its three evaluations, about 160 CPU s; on a GPU
    # not measured (the 96-trial quick took 77.5 s on an H200: results/gpu/2026-11-27-h200); Ray spreads the CPU hours.
    # The stored run (results/lab/full/meta.json): 4 h 11 min wall in two sittings on 2 cores shared at load 2-19
    "full": "about 160 CPU seconds a trial, 96 trials: about 4.3 CPU hours, so about 2 h 10 min on 2 idle CPU "
    "cores (the stored run: 4 h 11 min on 2 cores shared with other jobs, load 2-19), about 16 min on a "
    "16-core Ray cluster (--ray); on a GPU not yet measured",
    "calibration": "about 4 min on 1 CPU thread (BENCHMARKS.md)",
    "lengthgen": "about 13 min on 2 CPU cores (755 s, docs/results.md)",
}

#: README / docs block name -> the phrases of :data:`TIMES` that block must state word for word
BLOCKS: dict[str, tuple[str, ...]] = {
    "main": ("install", "quick"),
    "smoke": ("smoke",),
    "tests": ("tests", "tests-slow"),
    "quick": ("quick",),
    "full": ("full",),
    "extend-eval": ("extend-eval-quick",),
    "extend-finetune": ("extend-finetune",),
    "bench-quick": ("bench-quick",),
}


def quote(name: str) -> str:
    """``TIMES[name]``, for a help text (a ``KeyError`` naming the known ones for a wrong name)."""
    try:
        return TIMES[name]
    except KeyError:
        raise KeyError(f"no measured time {name!r}; known: {', '.join(TIMES)}") from None
