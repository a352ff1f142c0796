"""Write docs/zoo.md's table of every rotary class in transformers, from the catalogue's harness.

Runs ``tests/interop/rope_catalogue_compare.run`` over every pair of ``tests/interop/rope_catalogue``
and replaces the ``<!-- generated:rope-catalogue -->`` block of docs/zoo.md (the test
``tests/interop/test_rope_catalogue.py`` fails when the page differs from a fresh run).

Usage (from the repository root)::

    PYTHONPATH=src python tools/zoo_table.py --print      # the counts, nothing written
    PYTHONPATH=src python tools/zoo_table.py              # rewrites docs/zoo.md's block in place
    PYTHONPATH=src python tools/zoo_table.py --expected   # also rewrites the expected-failures list
    PYTHONPATH=src python tools/zoo_table.py --refresh    # re-enumerate transformers first (new pin), then rewrite

``--refresh`` also rewrites the reader's rotation table (``tools/rope_table.py``) before the catalogue runs.

Every form runs the whole catalogue first; only ``--print`` leaves the files as they are.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refresh", action="store_true", help="enumerate transformers again and rewrite the cache")
    parser.add_argument("--expected", action="store_true", help="rewrite tests/interop/rope_catalogue_expected.json")
    parser.add_argument("--print", action="store_true", help="print the counts per variant; write nothing")
    args = parser.parse_args(argv)

    import transformers

    from tests.interop import rope_catalogue as catalogue
    from tests.interop import rope_catalogue_compare as compare
    from tests.interop import rope_catalogue_table as table

    if args.refresh:
        from posembed.interop.rope.table import rotation_table
        from tools import rope_table

        rope_table.main([])  # the reader's rotation table, from this transformers
        rotation_table.cache_clear()
        catalogue.write_cache(catalogue.enumerate_pairs())
        catalogue.catalogue.cache_clear()
    rows = compare.run(catalogue.catalogue())
    if args.print:
        print(json.dumps(table.summary(rows), indent=1))
        return 0
    table.write_page(table.markdown(rows, transformers.__version__))
    if args.expected:
        table.write_expected(rows, transformers.__version__)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
