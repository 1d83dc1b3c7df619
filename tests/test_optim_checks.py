"""Optimizer and schedule settings are checked when the object is made (as in
PyTorch), with the core's rules, and the error names the field."""

import numpy as np
import pytest
from conftest import NETS

import verjus
from verjus import optim

BAD_VALUES = [
    (lambda: optim.Adam(lr=float("nan")), r"Adam: lr must be a finite number, got nan"),
    (lambda: optim.Adam(lr=-1), r"lr must be finite and >= 0, got -1"),
    (lambda: optim.AdamW(lr=1e-3, weight_decay=-0.1), r"weight_decay"),
    (lambda: optim.Adam(betas=(0.9, 1.0)), r"beta2 must be in \[0, 1\)"),
    (lambda: optim.Adam(eps=-1e-8), r"eps"),
    (lambda: optim.Adam(clip_norm=0.0), r"clip_norm must be finite and > 0"),
    (lambda: optim.SGD(lr=0.1, momentum=1.5), r"momentum must be in \[0, 1\)"),
    (lambda: optim.SGD(lr=0.1, dampening=2.0), r"dampening"),
    (lambda: optim.SGD(lr=0.1, nesterov=True), r"nesterov needs momentum > 0"),
    (lambda: optim.StepLR(step_size=0), r"step_size must be > 0"),
    (lambda: optim.StepLR(step_size=-1), r"StepLR: step_size must be >= 0, got -1"),
    (lambda: optim.StepLR(10, gamma=float("inf")), r"StepLR: gamma must be a finite number"),
    (lambda: optim.StepLR(10, gamma=-0.5), r"gamma must be finite and >= 0"),
    (lambda: optim.CosineWarmup(warmup_steps=5, total_steps=5), r"total_steps \(5\)"),
    (lambda: optim.CosineWarmup(1, 10, min_lr=-1.0), r"min_lr"),
]


@pytest.mark.parametrize(("make", "message"), BAD_VALUES, ids=[m for _, m in BAD_VALUES])
def test_a_bad_value_fails_where_it_is_written(make, message):
    with pytest.raises(ValueError, match=message):
        make()


BAD_TYPES = [
    (lambda: optim.Adam(lr="0.1"), r"Adam: lr must be a number, got '0.1'"),
    (lambda: optim.SGD(lr=0.1, momentum=0.9, nesterov=1), r"SGD: nesterov must be True or False"),
    (lambda: optim.Adam(clip_norm=True), r"Adam: clip_norm must be a number, got True"),
    (lambda: optim.StepLR(step_size=2.5), r"StepLR: step_size must be an int, got 2.5"),
    (lambda: optim.CosineWarmup(1, "10"), r"CosineWarmup: total_steps must be an int"),
]


@pytest.mark.parametrize(("make", "message"), BAD_TYPES, ids=[m for _, m in BAD_TYPES])
def test_a_setting_of_the_wrong_type_is_a_type_error_naming_it(make, message):
    with pytest.raises(TypeError, match=message):
        make()


def test_good_settings_are_accepted_including_numpy_scalars():
    optim.Adam(lr=np.float32(1e-3), schedule=optim.StepLR(np.int64(100), gamma=0.5))
    optim.SGD(lr=0.1, momentum=0.9, nesterov=True, clip_norm=1.0)
    optim.AdamW(schedule=optim.CosineWarmup(warmup_steps=0, total_steps=10))
    optim.SGD(lr=0)  # a zero learning rate is allowed, as in PyTorch


def test_a_setting_changed_afterwards_is_still_checked_by_the_trainer():
    adam = optim.Adam()
    adam.lr = -1.0
    with pytest.raises(ValueError, match=r"lr must be finite and >= 0"):
        verjus.Trainer(verjus.Network.from_def(NETS / "fashion_mlp.json"), adam)
