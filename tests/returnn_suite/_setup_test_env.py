"""Stands in for RETURNN's ``tests/_setup_test_env.py`` when RETURNN's rf tests run on verjus.

RETURNN's version sets up its logging and exception hooks; on verjus a test
needs that ``returnn.frontend`` and ``returnn.tensor`` resolve to verjus, which
this does on import, and, as RETURNN's does, RETURNN's newest behavior version
as the minimum where none is set (verjus follows RETURNN's behavior version
where RETURNN's settings are in effect, see ``verjus.rf.backend``).
"""

from verjus.rf import returnn_compat

returnn_compat.install()

try:
    from returnn.util.basic import BehaviorVersion
except ImportError:  # without RETURNN: its tests that need it fail on their own imports
    pass
else:
    if not BehaviorVersion.is_set():
        BehaviorVersion.set_min_behavior_version(BehaviorVersion._latest_behavior_version)
