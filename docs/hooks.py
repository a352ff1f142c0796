"""MkDocs hook: the benchmarks page is the repository's BENCHMARKS.md, read at build time.

BENCHMARKS.md stays where the benchmark scripts write it (the repository root); the site shows
it as ``benchmarks.md`` without a second copy to keep in step.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]


def on_files(files, config):
    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    files.append(File.generated(config, "benchmarks.md", content=text))
    return files
