"""``python -m verjus``: the same as the ``verjus`` command."""

import sys

from verjus.cli import main

sys.exit(main())
