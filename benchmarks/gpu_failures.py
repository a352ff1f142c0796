"""A pytest plugin for a device run: each failure (its traceback) and each test over 8 s is written
to ``$OUT`` the moment it happens, so a run stopped at its time limit still says what failed.

``python -m pytest -p benchmarks.gpu_failures ...`` (from the repository root) appends to
``$OUT/failures.txt`` and ``$OUT/slow.txt`` (``/tmp`` without ``OUT``). Under ``pytest-xdist``
the controller writes both files (a worker process does not).
"""

from __future__ import annotations

import os

SLOW_SECONDS = 8.0


def _worker() -> bool:
    return "PYTEST_XDIST_WORKER" in os.environ


def pytest_runtest_logreport(report) -> None:
    if _worker():
        return
    out = os.environ.get("OUT", "/tmp")
    if report.failed:
        with open(os.path.join(out, "failures.txt"), "a", encoding="utf-8") as file:
            file.write(f"===== {report.nodeid} [{report.when}]\n{str(report.longrepr)[-3000:]}\n")
    if report.when == "call" and report.duration > SLOW_SECONDS:
        with open(os.path.join(out, "slow.txt"), "a", encoding="utf-8") as file:
            file.write(f"{report.duration:7.1f} s {report.outcome} {report.nodeid}\n")
