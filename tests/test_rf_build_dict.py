"""``rf.build_dict``: the dict that ``rf.build_from_dict`` turns back into the
class or function, with RETURNN's ``"rf.Name"`` class names."""

from __future__ import annotations

import pytest

import verjus.rf as rf
from verjus.rf import Dim
from verjus.rf.feed_forward import FeedForwardGated


def test_build_dict_names_rf_classes_and_functions() -> None:
    assert rf.build_dict(rf.BatchNorm, use_mask=True) == {"class": "rf.BatchNorm", "use_mask": True}
    assert rf.build_dict(rf.relu) == {"class": "rf.relu"}  # a native op bound as rf.relu
    assert rf.build_dict(rf.gating) == {"class": "rf.gating"}


def test_build_dict_round_trips_through_build_from_dict() -> None:
    d = rf.build_dict(FeedForwardGated, dropout=0.0)
    assert d["class"] == "verjus.rf.feed_forward.FeedForwardGated"
    model = Dim(4, name="model")
    mod = rf.build_from_dict(d, out_dim=model)
    assert isinstance(mod, FeedForwardGated)
    assert rf.build_from_dict(rf.build_dict(rf.relu)) is rf.relu


def test_build_dict_rejects_other_objects() -> None:
    with pytest.raises(TypeError, match=r"build_dict: expected a class or function"):
        rf.build_dict(3)
