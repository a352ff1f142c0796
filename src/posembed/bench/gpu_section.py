"""BENCHMARKS.md's GPU section: the latest run on a GPU, written between two markers.

``python -m benchmarks --device cuda`` runs every suite there and calls
:func:`update_gpu_section`, which replaces what stands between :data:`START` and :data:`END`
with :func:`gpu_section` (a heading naming the card, how the run was made, and the run's
tables), leaving the rest of the file as it is. Until a GPU run exists the section says so
(:data:`NO_RUN`).

Example:
    >>> text = f"# Benchmarks\\n\\n{START}\\n{NO_RUN}\\n{END}\\n"
    >>> machine = {"device": "cuda:0", "device_name": "NVIDIA H100 80GB HBM3", "cuda": "12.8",
    ...            "torch": "2.13.0", "date": "2026-11-26 10:00 UTC"}
    >>> new = replace_section(text, gpu_section("| case |", machine))
    >>> new.splitlines()[3]
    '## GPU: NVIDIA H100 80GB HBM3 (2026-11-26 10:00 UTC)'
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["START", "END", "NO_RUN", "gpu_section", "replace_section", "update_gpu_section"]

START = "<!-- gpu-section:start (written by python -m benchmarks --device cuda) -->"
END = "<!-- gpu-section:end -->"
NO_RUN = (
    "## GPU\n\n"
    "No GPU run yet: every number above is the CPU's. `python -m benchmarks --device cuda` times\n"
    "every suite on the GPU (the embedding block in eval and train, bf16 and fp32; training steps at\n"
    "nanoGPT's CPU size and GPT-2 small, eager and compiled; attention with a bias scheme at T = 2048\n"
    "and 8192, every backend; RoPE with Liger-Kernel where installed) and writes this section with\n"
    "the card's name (`posembed bench --device cuda` runs the same rows into its own folder)."
)


def gpu_section(results_markdown: str, machine: dict) -> str:
    """The section for one GPU run: a heading with the card's name and date, then the run's tables."""
    card = machine.get("device_name", "unknown GPU")
    cuda = f", CUDA {machine['cuda']}" if machine.get("cuda") else ""
    return "\n".join([
        f"## GPU: {card} ({machine.get('date', 'undated')})",
        "",
        f"`python -m benchmarks --device {machine.get('device', 'cuda')}` on one {card} (torch "
        f"{machine.get('torch', '?')}{cuda}): every case side by side in one process, medians after "
        "warm-up (compiled cases compile during it); attention cases each in a fresh process, memory "
        "the peak of torch's CUDA allocator.",
        "",
        results_markdown.strip(),
    ])  # fmt: skip


def replace_section(text: str, section: str) -> str:
    """``text`` with the part between :data:`START` and :data:`END` replaced by ``section``
    (the markers appended at the end first if the file has none)."""
    if START not in text or END not in text:
        text = f"{text.rstrip()}\n\n{START}\n{NO_RUN}\n{END}\n"
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{section.strip()}\n{END}{tail}"


def update_gpu_section(benchmarks_md: Path, results_markdown: str, machine: dict) -> None:
    """Write one GPU run's section into ``benchmarks_md`` (BENCHMARKS.md), the rest untouched."""
    path = Path(benchmarks_md)
    path.write_text(replace_section(path.read_text(encoding="utf-8"), gpu_section(results_markdown, machine)),
                    encoding="utf-8")  # fmt: skip
