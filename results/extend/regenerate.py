"""Write docs/checkpoints.md's extend-eval blocks from the stored run in this folder.

    python results/extend/regenerate.py        # from the repository root

``tests/interop/test_retrieval_page.py`` fails when the page differs from what this writes.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from posembed.interop.extend.retrieval_report import PAGE_BLOCKS, page_blocks, read_stored  # noqa: E402
from tools.pages import write_block  # noqa: E402


def main() -> int:
    blocks = page_blocks(*read_stored(ROOT / "results" / "extend"))
    for name in PAGE_BLOCKS:
        changed = write_block(ROOT / "docs" / "checkpoints.md", name, blocks[name])
        print(f"{name}: {'rewritten' if changed else 'unchanged'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
