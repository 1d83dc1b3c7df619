"""``python -m verjus.returnn CONFIG [++key value ...]``."""

import sys

from verjus.returnn import main

sys.exit(main())
