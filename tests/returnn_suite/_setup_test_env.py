"""Stands in for RETURNN's ``tests/_setup_test_env.py`` when RETURNN's rf tests run on verjus.

RETURNN's version sets up its logging and exception hooks; on verjus the one
thing a test needs is that ``returnn.frontend`` and ``returnn.tensor`` resolve
to verjus, which this does on import.
"""

from verjus.rf import returnn_compat

returnn_compat.install()
