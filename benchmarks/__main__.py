"""``python -m benchmarks [-v] [--quick] [--only NAME] [--out DIR] [--threads N]``: same as ``posembed bench``."""

from __future__ import annotations

import sys

from posembed.cli import main

if __name__ == "__main__":
    args = sys.argv[1:]
    verbose = [a for a in args if a in ("-v", "-vv", "--verbose")]
    sys.exit(main([*verbose, "bench", *(a for a in args if a not in verbose)]))
