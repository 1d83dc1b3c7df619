"""Runs a RETURNN config file on verjus: ``verjus returnn CONFIG [++key value ...]``,
or ``python -m verjus.returnn CONFIG ...``.

The config is RETURNN's, read by RETURNN's own ``Config`` (with its
``++key value`` command-line overrides); its datasets are RETURNN's
(``init_dataset``: ``train``, ``dev``, ``eval_datasets``, ``forward_data``),
and so is its learning-rate control (``learning_rate_control``, with the
``learning_rate_file`` RETURNN writes). What runs the model is verjus: while
the config loads and runs, ``import returnn.frontend as rf`` and
``returnn.tensor`` give ``verjus.rf`` (``verjus.rf.returnn_compat``), and
``verjus.engine.Engine`` trains it. ``backend = "torch"`` is accepted and
ignored (verjus is the backend); a RETURNN option that changes training and
that verjus does not honour is named in one warning.

RETURNN itself is needed for its config and datasets: ``pip install
verjus[returnn]``. Checkpoints are ``<model>.NNN.safetensors`` (RETURNN's
parameter names); ``preload_from_files``, ``load`` and
``import_model_train_epoch1`` also read RETURNN's PyTorch checkpoints
(``.pt``, with torch), so a model trained with RETURNN continues on verjus.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main", "run"]

MISSING_RETURNN = (
    "verjus returnn: RETURNN is not installed; it reads the config and the datasets. "
    "Install it with: pip install 'verjus[returnn]' (or pip install returnn)"
)


def run(argv: Sequence[str]) -> None:
    """Loads the config ``argv[0]`` with the overrides after it and runs its task."""
    try:
        import returnn  # noqa: F401
    except ImportError:
        raise SystemExit(MISSING_RETURNN) from None
    from verjus.returnn.setup import run_config

    try:
        run_config(list(argv))
    except ModuleNotFoundError as e:
        raise RuntimeError(
            f"{e} (RETURNN's config loading needs dm-tree: pip install 'verjus[returnn]')"
        ) from None


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: ``CONFIG [++key value ...]``; errors as one line."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.split("\n\n")[0].replace("``", ""))
        return 0 if args else 2
    try:
        run(args)
    except (ValueError, TypeError, KeyError, OSError, SyntaxError, RuntimeError) as e:
        print(f"verjus returnn: error: {e}", file=sys.stderr)
        return 1
    return 0
