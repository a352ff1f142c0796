import sys

from posembed.cli import main

sys.exit(main())
