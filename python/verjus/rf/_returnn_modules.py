"""RETURNN's submodule names of ``returnn.frontend`` that model code reaches as
``rf.<module>.<name>`` (``rf.dims.range_over_dim``, ``rf.loss.cross_entropy``,
``rf.types.RawTensorTypes``, ...) or imports (``from returnn.frontend.rand import
random_normal``, through ``verjus.rf.returnn_compat``).

verjus keeps these functions in files of its own concepts (``verjus.rf.shape_ops``,
``verjus.rf.search``, ...), under RETURNN's names in ``verjus.rf`` itself; RETURNN
also groups them by its file names. Those groupings are made here as modules
``verjus.rf.<module>`` holding the same objects as ``verjus.rf`` (nothing is
wrapped or copied), each with the names of RETURNN's module's ``__all__`` that
verjus has. (``rf.hooks`` and ``rf.tensor_layout`` are modules of their own.)
"""

from __future__ import annotations

import sys
import types
from typing import Any

__all__ = ["MODULES", "install"]

# RETURNN's module -> (what it is about, its names).
MODULES: dict[str, tuple[str, tuple[str, ...]]] = {
    "const": (
        "tensors of one value",
        ("full", "fill", "constant", "zeros", "ones", "zeros_like", "ones_like"),
    ),
    "dims": (
        "dims and ranges over them (RETURNN's dim_match_priority_when_needed needs Dim"
        " match priorities, which verjus does not have)",
        (
            "range_over_dim",
            "range_over_dim_strided",
            "range_over_merged_dims",
            "linspace_over_dim",
            "replace_dim",
            "replace_dim_v2",
            "set_sparse_dim",
            "num_elements_of_shape",
            "masked_fraction_of_shape",
            "last_frame_position_of_dim",
            "use_mask_default",
        ),
    ),
    "dtype": (
        "the default dtypes",
        (
            "get_default_float_dtype",
            "set_default_float_dtype",
            "set_default_float_dtype_ctx",
            "get_default_int_dtype",
            "get_default_array_index_dtype",
            "is_float_dtype",
        ),
    ),
    "linear": ("the linear modules", ("Linear", "Embedding")),
    "loss": (
        "losses, CTC paths and the edit distance",
        (
            "cross_entropy",
            "ctc_loss",
            "ctc_best_path",
            "ctc_greedy_decode",
            "ctc_durations_from_path",
            "ctc_no_label_loop_blank_durations_from_path",
            "edit_distance",
        ),
    ),
    "rand": (
        "random numbers and the random state",
        (
            "set_random_seed",
            "get_random_state",
            "set_random_state",
            "reset_step_random_state",
            "get_static_step_based_seed",
            "random",
            "random_uniform",
            "random_normal",
            "random_truncated_normal",
            "random_choice_without_replacement",
            "random_choice_with_replacement",
        ),
    ),
    "signal": ("signal processing", ("stft",)),
    "stepwise_scheduler": (
        "schedules over the global train step",
        ("PiecewiseLinearStepwiseScheduler",),
    ),
    "types": (
        "type aliases and protocols",
        (
            "RawTensorTypes",
            "ItemKeyType",
            "Tensor",
            "Dim",
            "get_raw_tensor_type",
            "GetModelFunc",
            "StepFunc",
        ),
    ),
}


def install(package: types.ModuleType) -> dict[str, Any]:
    """Makes each module of ``MODULES`` from ``package``'s (``verjus.rf``'s) names,
    registered as ``<package>.<module>`` so that it imports; returns them by name."""
    made = {}
    for name, (about, names) in MODULES.items():
        full_name = f"{package.__name__}.{name}"
        module = types.ModuleType(
            full_name,
            f"RETURNN's ``returnn.frontend.{name}`` ({about}): the same objects as"
            f" ``{package.__name__}``'s (see ``verjus.rf._returnn_modules``).",
        )
        for key in names:
            setattr(module, key, getattr(package, key))
        module.__all__ = list(names)
        sys.modules[full_name] = module
        made[name] = module
    return made
