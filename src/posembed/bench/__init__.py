"""Side-by-side benchmarks of posembed against the reference implementations.

The suites ship with the package: run them with ``posembed bench`` (``--quick`` uses small
shapes, about 70 s of CPU time; ``--only NAME`` runs one suite; ``--device`` picks where they time:
``auto``, CUDA when present, else the CPU). In the source checkout,
``python -m benchmarks`` does the same and ``benchmarks/`` keeps the scripts that write
BENCHMARKS.md. Results go to
``<out>/results.json`` and ``<out>/results.md``; BENCHMARKS.md holds the latest full table.
The comparison libraries come with ``pip install 'posembed[bench]'``; without one, its rows
say ``skipped: pip install 'posembed[bench]'``.

Files:

=============== ================================================================================
file            what
=============== ================================================================================
``suites``      the suites by name, where their progress goes
``run``         :func:`run_suites`: the chosen suites run, their report written
``harness``     timing, memory and report helpers shared by every suite
``embeddings``  the embedding block at BERT-base shape against ``BertEmbeddings``
``rope``        RoPE on q and k against transformers, rotary-embedding-torch, x-transformers
``attention``   causal self-attention with a bias scheme: time and peak memory per length
``training``    training throughput of ``Decoder`` against a nanoGPT-style model
``nanogpt_ref`` the nanoGPT-style reference model and loop timed against
``gpu_section`` BENCHMARKS.md's GPU section, written between two markers
=============== ================================================================================
"""

from posembed._utils.names import submodules
from posembed.bench.run import run_suites
from posembed.bench.suites import PROGRESS_LOGGER, SUITES

__all__ = ["SUITES", "run_suites", "PROGRESS_LOGGER"]

__getattr__ = submodules(__name__)  # posembed.bench.<file>: imported on first use
