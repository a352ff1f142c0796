"""Progress by default: a line per finished trial (or bench suite) on stderr when it is not a
terminal, a bar when it is, nothing with ``--quiet``."""

from __future__ import annotations

import logging
import re
import sys
import types

import pytest

from posembed.cli import main
from posembed.lab.sweep.progress import LAB_LOGGER, Progress, log_to_stderr, progress_mode

TINY = [
    "--threads",
    "1",
    "--workers",
    "1",
    "--set",
    "tasks=copy",
    "--set",
    "schemes=learned,nope",
    "--set",
    "steps=2",
    "--set",
    "dim=16",
    "--set",
    "depth=1",
    "--set",
    "batch=4",
    "--set",
    "eval_batches=1",
    "--set",
    "copy.context=3",
]

_LINE = re.compile(
    r"^lab trials: (\d)/2 done \(copy/(learned|nope)/base/s0, \d+\.\d s\); elapsed \d\d:\d\d, "
    r"ETA (after 2 trials|\d\d:\d\d)$"
)


@pytest.fixture()
def clock(monkeypatch):
    """tqdm's clock, set by the test: ``clock.now = seconds``."""
    import tqdm.std

    fake = types.SimpleNamespace(now=0.0)
    monkeypatch.setattr(tqdm.std, "time", lambda: fake.now)
    return fake


def _run(out, *extra) -> list[str]:
    return ["lab", "run", "--preset", "smoke", "--out", str(out), *TINY, *extra]


def test_a_line_per_finished_trial_when_stderr_is_not_a_terminal(tmp_path, capsys):
    assert main(_run(tmp_path)) == 0
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 2 and all(_LINE.match(line) for line in lines), lines
    assert [_LINE.match(line).group(1) for line in lines] == ["1", "2"]
    assert [_LINE.match(line).group(3) == "after 2 trials" for line in lines] == [True, False]
    assert "lab trials" not in captured.out and "2 trials trained" in captured.out


@pytest.mark.parametrize("flag", ["--quiet", "-q", "--no-progress"])
def test_quiet_turns_it_off(tmp_path, capsys, flag):
    assert main(_run(tmp_path, flag)) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and "2 trials trained" in captured.out


def test_the_old_progress_flag_is_accepted(tmp_path, capsys):
    assert main(_run(tmp_path, "--progress")) == 0
    assert len(capsys.readouterr().err.splitlines()) == 2


def test_the_lines_are_log_records_not_prints(caplog, clock, capsys):
    """The library logs: without the CLI's handler nothing reaches stderr, a caller's handler sees the lines
    (one per finished item: none at the start, none at close), braces in a label kept as they are."""
    with caplog.at_level(logging.INFO, logger=LAB_LOGGER):
        with Progress(3, 0, mode="lines", desc="sweep") as progress:
            clock.now = 30.0
            progress.advance("a", 30.0)
            progress.working_on("c")  # lines report finished items only
            clock.now = 60.0
            progress.advance("{b}", 30.0)
    assert caplog.messages == [
        "sweep: 1/3 done (a, 30.0 s); elapsed 00:30, ETA after 3 trials",
        "sweep: 2/3 done ({b}, 30.0 s); elapsed 01:00, ETA after 3 trials",
    ]
    assert capsys.readouterr().err == ""


def test_modes(monkeypatch):
    class Tty:
        def isatty(self):
            return True

    assert progress_mode(None, Tty()) == "bar" and progress_mode(True, Tty()) == "bar"
    assert progress_mode(None, object()) == "lines" and progress_mode(False, Tty()) == "off"
    with pytest.raises(ValueError, match="progress must be one of bar, lines, off, got 'loud'"):
        progress_mode("loud")


def test_a_bar_on_a_terminal(capsys):
    with Progress(2, 0, mode="bar", desc="bar test") as progress:
        progress.advance("x")
    assert "bar test" in capsys.readouterr().err


def test_log_to_stderr_restores_the_logger(capsys):
    logger = logging.getLogger(LAB_LOGGER)
    before = (logger.level, logger.propagate, list(logger.handlers))
    with log_to_stderr(LAB_LOGGER):
        logger.info("shown")
    logger.info("not shown")
    assert capsys.readouterr().err == "shown\n"
    assert (logger.level, logger.propagate, list(logger.handlers)) == before


def _fake_suite(name):
    module = types.ModuleType(name)
    module.run = lambda quick, repeats, device: []
    module.targets = lambda rows: []
    return module


def test_bench_reports_each_suite(tmp_path, capsys, monkeypatch):
    import posembed.bench.run as bench

    for name in ("fake_a", "fake_b"):
        monkeypatch.setitem(sys.modules, f"tests.lab.{name}", _fake_suite(name))
    monkeypatch.setattr(bench, "SUITES", {"fake_a": "tests.lab.fake_a", "fake_b": "tests.lab.fake_b"})
    monkeypatch.setattr(
        bench, "write_report", lambda rows, targets, machine, out, quick: (out / "r.json", out / "r.md")
    )
    with log_to_stderr(bench.PROGRESS_LOGGER):
        bench.run_suites(out=tmp_path)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and lines[0].startswith("bench suites: 1/2 done (fake_a, 0 cases, ")
    assert lines[1].startswith("bench suites: 2/2 done (fake_b, 0 cases, ")


def test_the_eta_waits_for_three_finished_items(caplog, clock):
    """A slow first item (start-up, or workers finishing together) gives no hour-long first guess; then
    tqdm's mean rate over this run's items."""
    with caplog.at_level(logging.INFO, logger=LAB_LOGGER), Progress(100, 0, mode="lines") as progress:
        for now in (600.0, 620.0, 640.0, 660.0):
            clock.now = now
            progress.advance()
    # from the first item alone the guess would have been 600 s x 99 = 16:30:00
    assert [line.split(", ")[-1] for line in caplog.messages] == ["ETA after 3 trials"] * 2 + [
        "ETA 5:44:53",
        "ETA 4:24:00",
    ]
    assert not Progress(10, 8).settled and Progress(10, 8, settle=1).settled is False


def test_a_resumed_run_with_fewer_items_left_than_settle_settles_on_the_last(caplog, clock):
    with caplog.at_level(logging.INFO, logger=LAB_LOGGER), Progress(6, 4, mode="lines", unit="suite") as progress:
        clock.now = 5.0
        progress.advance()
        assert not progress.settled
        clock.now = 10.0
        progress.advance()
    assert progress.settled
    assert caplog.messages == [
        "lab trials: 5/6 done; elapsed 00:05, ETA after 2 suites",
        "lab trials: 6/6 done; elapsed 00:10, ETA 00:00",
    ]


def test_settle_must_be_positive():
    with pytest.raises(ValueError, match="settle must be at least 1, got 0"):
        Progress(3, settle=0)


def test_the_bar_holds_its_eta_back_then_shows_tqdm_s_own(capsys):
    with Progress(5, 0, mode="bar", desc="bar eta", settle=2) as progress:
        progress.advance()
        assert "ETA after 2 trials" in str(progress._bar)
        progress.advance()
        assert progress._bar.bar_format is None and "<" in str(progress._bar)


def test_quiet_transformers_hides_its_bars_and_restores_them():
    hf_logging = pytest.importorskip("transformers.utils.logging")
    from posembed._utils.progress import quiet_transformers

    before = (hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled())
    with quiet_transformers():
        assert hf_logging.get_verbosity() == hf_logging.ERROR and not hf_logging.is_progress_bar_enabled()
    assert (hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()) == before
    logger = logging.getLogger("posembed")
    level = logger.level
    logger.setLevel(logging.INFO)  # the CLI's -v: transformers keeps its words
    try:
        with quiet_transformers():
            assert hf_logging.is_progress_bar_enabled() == before[1]
    finally:
        logger.setLevel(level)
    with quiet_transformers(enabled=False):
        assert hf_logging.get_verbosity() == before[0]
