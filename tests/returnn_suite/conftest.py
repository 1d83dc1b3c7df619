"""pytest setup for RETURNN's rf tests run on verjus (see ``tests/test_returnn_rf_suite.py``).

The redirection is installed before any test module is imported, so the
tests' own ``import returnn.frontend as rf`` gives ``verjus.rf``.
"""

from verjus.rf import returnn_compat

returnn_compat.install()
