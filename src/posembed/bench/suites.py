"""The benchmark suites by name (``posembed bench --only`` offers them), and where their progress goes."""

__all__ = ["SUITES", "PROGRESS_LOGGER"]

#: one INFO line per finished suite goes here (``posembed bench`` shows it on stderr)
PROGRESS_LOGGER = "posembed.bench.progress"

#: suite name -> module (each has ``run(quick=..., repeats=..., device=...)``, device defaulting to
#: the CPU, and ``targets(rows)``, the CPU's targets; ``cuda_targets(rows)``, where a suite has
#: targets set for CUDA, is checked off the CPU)
SUITES = {
    "embeddings": "posembed.bench.embeddings",
    "rope": "posembed.bench.rope",
    "attention": "posembed.bench.attention",
    "training": "posembed.bench.training",
}
