"""Progress of a long loop (a sweep's trials, a benchmark's suites, an inspection's sections, an
extension's evaluations): a tqdm bar, tqdm lines in the log, or nothing; and transformers' own
bars kept out.

Every long command reports in this one style, from every layer (hence a helper module here rather
than in ``lab/``, which :mod:`posembed.lab.sweep.progress` re-exports).

Three modes, all one tqdm counter:

- ``"bar"``: tqdm's bar with its ETA on stderr, for a terminal;
- ``"lines"``: the same counter written as one INFO record per finished item on the logger it is
  given (default :data:`LAB_LOGGER`, ``posembed.lab.sweep.progress``), e.g. ``lab trials: 3/8 done
  (copy/learned/s0, 2.1 s); elapsed 00:07, ETA 00:12`` (tqdm's clock and mean-rate ETA); what
  shows them is the caller's logging set-up (the CLI's :func:`log_to_stderr`), so the library
  itself never prints;
- ``"off"``.

:func:`progress_mode` picks one: ``None`` (the default) or ``True`` means a bar on a terminal
and lines otherwise, ``False`` means off.

>>> import logging
>>> records = []
>>> class Keep(logging.Handler):
...     def emit(self, record): records.append(record.getMessage())
>>> log = logging.getLogger("posembed.doctest.progress")
>>> log.addHandler(Keep()); log.setLevel(logging.INFO)
>>> with Progress(4, 1, mode="lines", desc="demo", unit="item", logger=log, settle=2) as progress:
...     progress.advance("first", seconds=9.5)
...     progress.advance("second")
>>> records[0]
'demo: 2/4 done (first, 9.5 s); elapsed 00:00, ETA after 2 items'
>>> records[1].split(", ")[0], records[1].split(", ")[-1].startswith("ETA ")
('demo: 3/4 done (second); elapsed 00:00', True)
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator

__all__ = ["Progress", "progress_mode", "log_to_stderr", "quiet_transformers", "MODES", "LAB_LOGGER"]

MODES = ("bar", "lines", "off")

#: the logger the lab's per-trial progress lines go to
LAB_LOGGER = "posembed.lab.sweep.progress"


def progress_mode(progress: bool | str | None, stream=None) -> str:
    """``"bar"``, ``"lines"`` or ``"off"`` for a ``progress`` argument (``stream``: stderr by default).

    >>> progress_mode(False), progress_mode("lines")
    ('off', 'lines')
    """
    if progress is False:
        return "off"
    if isinstance(progress, str):
        if progress not in MODES:
            raise ValueError(f"progress must be one of {', '.join(MODES)}, got {progress!r}")
        return progress
    stream = sys.stderr if stream is None else stream
    try:
        return "bar" if stream.isatty() else "lines"
    except (AttributeError, ValueError):  # a closed or a fake stream
        return "lines"


class _LogLines:
    """tqdm's ``file`` in ``"lines"`` mode: each refresh (``"\\r" + line``) becomes one INFO record."""

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger

    def write(self, text: str) -> None:
        if text.strip():
            self.logger.info("%s", text.strip())

    def flush(self) -> None:
        pass


class Progress:
    """``total`` items of which ``done`` were finished before; :meth:`advance` after each one.

    A tqdm counter. Its ETA is tqdm's: the rate of items finished in this run (mean rate in
    ``"lines"``, tqdm's smoothed one on a bar) times the items left. It is held back until
    ``settle`` items of this run have finished (``ETA after 3 trials``): the first item carries
    the start-up (imports, data, the workers' first batch) and side-by-side workers finish their
    first items together, so a guess from one item is often many times too long.

    Args:
        mode: ``"bar"``, ``"lines"`` or ``"off"`` (see :func:`progress_mode`).
        desc: what is counted, at the start of every line and on the bar.
        unit: the bar's unit.
        logger: where ``"lines"`` go (INFO records); default :data:`LAB_LOGGER`.
        settle: how many items of this run finish before an ETA is given (at least 1).
    """

    def __init__(
        self,
        total: int,
        done: int = 0,
        *,
        mode: str = "off",
        desc: str = "lab trials",
        unit: str = "trial",
        logger: logging.Logger | None = None,
        settle: int = 3,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if settle < 1:
            raise ValueError(f"settle must be at least 1, got {settle}")
        self.total, self.done, self.mode, self._first = total, done, mode, done
        self._settle = max(1, min(settle, total - done))  # never wait for more items than this run has
        self._waiting = f"ETA after {self._settle} {unit}{'s' if self._settle > 1 else ''}"
        self._bar = None
        if mode == "bar":
            from tqdm.auto import tqdm

            self._bar = tqdm(
                total=total,
                initial=done,
                desc=desc,
                unit=unit,
                dynamic_ncols=True,
                file=sys.stderr,
                bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}, " + self._waiting + "{postfix}]",
            )
        elif mode == "lines":  # plain tqdm (not a notebook widget); a record per finished item (miniters=1,
            from tqdm import tqdm  # mininterval=0), none before the first (delay) nor at close (leave=False)

            self._bar = tqdm(
                total=total,
                initial=done,
                desc=desc,
                unit=unit,
                miniters=1,
                mininterval=0,
                smoothing=0,
                delay=1e-9,
                leave=False,
                file=_LogLines(logger or logging.getLogger(LAB_LOGGER)),
            )

    @property
    def settled(self) -> bool:
        """Whether enough items of this run have finished for an ETA."""
        return self.done - self._first >= self._settle

    def working_on(self, label: str) -> None:
        """Show what runs now (on the bar; lines only report finished items)."""
        if self.mode == "bar":
            self._bar.set_postfix_str(label)

    def advance(self, label: str = "", seconds: float | None = None) -> None:
        """One more item finished (``label`` names it, ``seconds`` its own time)."""
        self.done += 1
        if self._bar is None:
            return
        if self.mode == "lines":
            what = f" ({label}{f', {seconds:.1f} s' if seconds is not None else ''})" if label else ""
            what = what.replace("{", "{{").replace("}", "}}")
            eta = "ETA {remaining}" if self.settled else self._waiting
            self._bar.bar_format = "{desc}: {n_fmt}/{total_fmt} done" + what + "; elapsed {elapsed}, " + eta
        elif self.settled:
            self._bar.bar_format = None  # tqdm's own layout, with its ETA
        self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@contextlib.contextmanager
def log_to_stderr(name: str, enabled: bool = True) -> Iterator[None]:
    """While inside, INFO records of logger ``name`` are written to stderr as bare lines (the
    CLI's way to show progress lines; off when ``enabled`` is false)."""
    if not enabled:
        yield
        return
    logger = logging.getLogger(name)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    before = (logger.level, logger.propagate)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(before[0])
        logger.propagate = before[1]


@contextlib.contextmanager
def quiet_transformers(enabled: bool | None = None) -> Iterator[None]:
    """While inside, transformers draws no progress bars (``Loading weights: 0%|...``) and logs
    errors only; both are restored after. A no-op without transformers, or when ``enabled`` is
    false; ``None`` (the default) quiets it unless posembed's own INFO records are shown (the
    CLI's ``-v``: whoever asks for posembed's details gets transformers' words too).

    Wrap each transformers load (``from_pretrained``) of a command that reports its own progress.
    """
    if enabled is None:
        enabled = not logging.getLogger("posembed").isEnabledFor(logging.INFO)
    try:
        from transformers.utils import logging as hf_logging
    except ModuleNotFoundError:
        hf_logging = None
    if not enabled or hf_logging is None:
        yield
        return
    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
