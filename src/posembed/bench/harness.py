"""Timing, memory and report helpers shared by every benchmark.

The machine these run on is shared and noisy, so:

- every case of one comparison runs in the same process, interleaved round by round
  (``A B C A B C ...``), so a burst of load hits all of them alike;
- each case is warmed up first, then reported as the median of its rounds;
- results are reported as ratios against the reference implementation of the same run.

Every timed call goes through :func:`time_ms`, the one place that waits for the device: CUDA
runs asynchronously, so it synchronizes before the clock starts and before it stops (nothing
to wait for on the CPU).

Peak memory is measured in a fresh subprocess per case: on the CPU ``VmHWM``, the high-water
mark of the resident set (tracemalloc does not see torch's allocations); on CUDA the peak of
torch's allocator (:func:`start_memory`, :func:`peak_memory_mb`).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from posembed._utils.hints import extra_hint
from posembed._utils.io import atomic_write_text
from posembed._utils.memory import transparent_huge_pages

__all__ = [
    "Row", "as_device", "compare", "copy_bandwidth", "device_name", "failure_note", "machine_info", "notes_text",
    "peak_memory_mb", "peak_rss_mb", "run_worker", "start_memory", "synchronize", "time_ms", "write_report",
    "skipped_note", "oversubscribed", "missed_explanations",
]  # fmt: skip


def skipped_note(library: str) -> str:
    """The note of a row whose comparison ``library`` is not installed (a skipped row, never a failed
    one): the ``[bench]`` extra that installs the comparison libraries, the installed torch kept.

    >>> skipped_note("x_transformers")  # doctest: +ELLIPSIS
    "skipped: pip install 'posembed[bench]' 'torch==...' (x_transformers is not installed)"
    """
    return f"skipped: {extra_hint('bench', explain=False)} ({library} is not installed)"


def failure_note(error: BaseException) -> str:
    """The note of a case that could not run: ``skipped: pip install ...`` when a comparison library
    is not installed, else ``failed: <error>``.

    >>> failure_note(ModuleNotFoundError("No module named 'x_transformers'",
    ...                                  name="x_transformers"))  # doctest: +ELLIPSIS
    "skipped: pip install 'posembed[bench]' 'torch==...' (x_transformers is not installed)"
    >>> failure_note(RuntimeError("boom"))
    'failed: RuntimeError: boom'
    """
    if isinstance(error, ModuleNotFoundError) and error.name and error.name.split(".")[0] != "posembed":
        return skipped_note(error.name.split(".")[0])
    return f"failed: {type(error).__name__}: {error}"[:200]


@dataclass
class Row:
    """One measured case of one benchmark section."""

    section: str
    case: str
    impl: str
    median_ms: float | None = None
    #: reference median / this median (> 1: faster than the reference)
    speedup: float | None = None
    extra: dict = field(default_factory=dict)
    note: str = ""


def as_device(device: str | torch.device | None) -> torch.device:
    """``device`` as a ``torch.device``; ``None`` is the CPU (every suite's default)."""
    return torch.device("cpu" if device is None else device)


def synchronize(device: str | torch.device | None = None) -> None:
    """Wait until ``device`` has run the work queued on it: CUDA kernels run asynchronously, the CPU's do not."""
    device = as_device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_ms(fn: Callable[[], object], device: str | torch.device | None = None) -> float:
    """Wall time of one call of ``fn`` on ``device`` in milliseconds, its queued device work included."""
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return (time.perf_counter() - start) * 1e3


def compare(
    cases: dict[str, Callable[[], object]],
    *,
    warmup: int = 1,
    repeats: int = 5,
    device: str | torch.device | None = None,
) -> dict[str, list[float]]:
    """Time each callable ``repeats`` times, interleaved round by round, after ``warmup`` calls.

    ``device`` is where the cases run (default: the CPU); each call is timed by :func:`time_ms`.
    A case that raises is dropped (its :func:`failure_note` is returned under ``"<name>!error"``).
    Returns the times in milliseconds per case.
    """
    times: dict[str, list[float]] = {name: [] for name in cases}
    live = dict(cases)
    for name, fn in cases.items():
        try:
            for _ in range(warmup):
                fn()
        except Exception as error:  # a reference that cannot run is reported, not fatal
            live.pop(name)
            times[f"{name}!error"] = [failure_note(error)]  # type: ignore[list-item]
            times.pop(name)
    for _ in range(repeats):
        for name, fn in live.items():
            times[name].append(time_ms(fn, device))
    return times


def median(values: list[float]) -> float:
    return float(statistics.median(values))


def rows_from_times(
    section: str, case: str, times: dict[str, list], reference: str, extra: dict | None = None
) -> list[Row]:
    """Turn :func:`compare` output into rows with speedups against ``reference``."""
    ref = median(times[reference]) if reference in times else None
    rows = []
    for name, values in times.items():
        if name.endswith("!error"):
            rows.append(Row(section, case, name[: -len("!error")], note=values[0]))
            continue
        value = median(values)
        rows.append(
            Row(section, case, name, round(value, 3), None if ref is None else round(ref / value, 2), dict(extra or {}))
        )
    return rows


def copy_bandwidth(num_bytes: int = 1 << 27, repeats: int = 5, device: str | torch.device | None = None) -> float:
    """The copy bandwidth of ``device``'s memory in GB/s (read + write counted), into a preallocated buffer."""
    src = torch.ones(num_bytes // 4, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    times = compare({"copy": lambda: dst.copy_(src)}, warmup=1, repeats=repeats, device=device)["copy"]
    return 2 * num_bytes / (median(times) * 1e-3) / 1e9


def peak_rss_mb() -> float:
    """High-water mark of this process's resident set, in MiB.

    Linux: ``VmHWM`` from ``/proc/self/status``. Not ``ru_maxrss``: Linux carries it across
    ``exec``, so a worker started by a large parent would report the parent's peak.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux, a fallback


def start_memory(device: str | torch.device | None = None) -> float:
    """Begin a memory measurement on ``device``; the memory in use now, in MiB.

    CPU: the resident set's high-water mark so far (:func:`peak_rss_mb`). CUDA: the bytes torch's
    allocator holds, after resetting its peak counter (so :func:`peak_memory_mb` sees only what follows).
    """
    device = as_device(device)
    if device.type == "cuda":
        synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        return torch.cuda.memory_allocated(device) / 2**20
    return peak_rss_mb()


def peak_memory_mb(device: str | torch.device | None = None) -> float:
    """The peak since :func:`start_memory`, in MiB: resident set on the CPU, torch's allocator on CUDA."""
    device = as_device(device)
    if device.type == "cuda":
        synchronize(device)
        return torch.cuda.max_memory_allocated(device) / 2**20
    return peak_rss_mb()


def run_worker(module: str, spec: dict, timeout: float = 900) -> dict:
    """Run ``python -m <module> --worker '<json spec>'`` in a fresh process; parse its JSON line."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    command = [sys.executable, "-m", module, "--worker", json.dumps(spec)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        missing = _missing_module(tail)
        if missing:
            return {"skipped": skipped_note(missing)}
        return {"error": f"exit {done.returncode}: {tail[:200]}"}
    return json.loads(lines[-1])


def _missing_module(line: str) -> str | None:
    """The library named by a worker's last line ``ModuleNotFoundError: No module named 'x'``, else ``None``."""
    prefix = "ModuleNotFoundError: No module named '"
    if not line.startswith(prefix):
        return None
    name = line[len(prefix) :].split("'")[0].split(".")[0]
    return None if name == "posembed" else name


def device_name(device: str | torch.device | None = None) -> str:
    """``"cpu"``, or the GPU's name for a CUDA device (``torch.cuda.get_device_name``)."""
    device = as_device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return device.type


def machine_info(device: str | torch.device | None = None) -> dict:
    """CPU model, cores, torch version and threads, allocator, the device timed (``device``, default
    the CPU), date: the context of every number."""
    device = as_device(device)
    model = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    preload = os.environ.get("LD_PRELOAD", "")
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "allocator": "jemalloc" if "jemalloc" in preload else "glibc malloc (default)",
        "transparent_huge_pages": transparent_huge_pages(),
        "device": str(device),
        "device_name": device_name(device),
        "cuda": torch.version.cuda if device.type == "cuda" else None,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def oversubscribed(load_average: list[float], cores: int | None) -> bool:
    """Whether the 1-minute load average exceeds the core count: more runnable threads than cores,
    so a parallel op's threads wait for one another's time slices.

    >>> oversubscribed([3.4, 1.8, 0.8], 2), oversubscribed([1.2, 1.0, 0.9], 2)
    (True, False)
    """
    return bool(cores) and load_average[0] > cores


def missed_explanations(targets: list[dict], machine: dict, load_now: list[float] | None = None) -> list[str]:
    """One line per missed target: the load at the start (and now), and whether the row is known to
    lose under contention (the target's ``contention`` note, set by its suite) or is not.

    >>> missed_explanations([{"target": "T", "measured": "0.6x", "met": False, "contention": "it does"}],
    ...                     {"load_average": [3.4, 1.8, 0.8], "cores": 2},
    ...                     [5.0, 2.0, 1.0])[0]  # doctest: +NORMALIZE_WHITESPACE
    'target not met: T (0.6x) at load average 3.4 (start) / 5 (end) on 2 cores: busy;
    known to lose under contention: it does'
    """
    lines = []
    start, cores = machine["load_average"], machine.get("cores")
    end = f" / {load_now[0]:g} (end)" if load_now else ""
    busy = oversubscribed(start, cores) or (load_now is not None and oversubscribed(load_now, cores))
    for target in (t for t in targets if not t["met"]):
        note = target.get("contention")
        why = (
            f"known to lose under contention: {note}"
            if note
            else "not known to lose under contention"
            + ("; rerun on a quiet machine before reading it as a regression" if busy else "")
        )
        lines.append(
            f"target not met: {target['target']} ({target['measured']}) at load average {start[0]:g} (start)"
            f"{end} on {cores} cores: {'busy' if busy else 'quiet'}; {why}"
        )
    return lines


def write_report(rows: list[Row], targets: list[dict], machine: dict, out_dir: Path, quick: bool) -> tuple[Path, Path]:
    """Write ``results.json`` and ``results.md`` into ``out_dir``, each atomically; return both paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    payload = {"machine": machine, "quick": quick, "rows": [asdict(r) for r in rows], "targets": targets}
    return (
        atomic_write_text(out_dir / "results.json", json.dumps(payload, indent=2)),
        atomic_write_text(out_dir / "results.md", markdown(rows, targets, machine, quick)),
    )


def _device_words(machine: dict) -> str:
    """``cpu``, or ``cuda:0 (NVIDIA H100 80GB HBM3, CUDA 12.8)``; results written before devices: ``cpu``."""
    device = machine.get("device", "cpu")
    if device == "cpu":
        return "cpu"
    cuda = f", CUDA {machine['cuda']}" if machine.get("cuda") else ""
    return f"{device} ({machine.get('device_name', '?')}{cuda})"


def format_ms(ms: float) -> str:
    """Milliseconds to three significant digits at least (a GPU's sub-millisecond times keep theirs).

    >>> format_ms(128.04), format_ms(3.256), format_ms(0.0423)
    ('128.0', '3.26', '0.0423')
    """
    if ms >= 10:
        return f"{ms:.1f}"
    return f"{ms:.3g}" if ms < 1 else f"{ms:.2f}"


def notes_text(extra: dict) -> str:
    """A row's extra numbers for the notes column: ``name: value`` each, ``; `` between them.

    >>> notes_text({"step MB": 118.4, "peak RSS MB": 344.5, "memory vs baseline": 1.915})
    'step MB: 118.4; peak RSS MB: 344.5; memory vs baseline: 1.915'
    """
    return "; ".join(f"{key}: {value}" for key, value in extra.items())


def markdown(rows: list[Row], targets: list[dict], machine: dict, quick: bool) -> str:
    lines = [
        f"Machine: {machine['cpu']}, {machine['cores']} cores, torch {machine['torch']} "
        f"({machine['threads']} threads), Python {machine['python']}, {machine['allocator']}, "
        f"transparent huge pages: {machine['transparent_huge_pages']}; device: {_device_words(machine)}; "
        f"{machine['date']}; load average at start {machine['load_average']}"
        + (" — **quick run (small shapes)**" if quick else ""),
        "",
    ]
    if machine.get("device", "cpu") != "cpu":
        lines += [f"Targets: the CPU's are not checked on {machine['device']}; those set for CUDA are.", ""]
    if targets:
        lines += ["| target | measured | met |", "|---|---|---|"]
        lines += [f"| {t['target']} | {t['measured']} | {'yes' if t['met'] else 'NO'} |" for t in targets]
        lines.append("")
        lines += [f"- {line}" for line in missed_explanations(targets, machine)]
        lines += [""] if any(not t["met"] for t in targets) else []
    for section in dict.fromkeys(r.section for r in rows):
        lines += [
            f"### {section}",
            "",
            "| case | implementation | median ms | vs reference | notes |",
            "|---|---|---|---|---|",
        ]
        for r in (r for r in rows if r.section == section):
            notes = "; ".join(x for x in (notes_text(r.extra), r.note) if x)
            ms = "—" if r.median_ms is None else format_ms(r.median_ms)
            speed = "—" if r.speedup is None else f"{r.speedup:.2f}x"
            lines.append(f"| {r.case} | {r.impl} | {ms} | {speed} | {notes} |")
        lines.append("")
    return "\n".join(lines)
