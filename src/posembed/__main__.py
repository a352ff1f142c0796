"""``python -m posembed``: the same as the ``posembed`` command."""

import sys

from posembed.cli import main

if __name__ == "__main__":
    sys.exit(main())
