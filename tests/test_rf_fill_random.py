"""``TensorDict.fill_random_`` (RETURNN's test data): the batch size follows
``dyn_dim_max_sizes`` when it names the batch dim."""

from __future__ import annotations

from verjus.rf import Dim, Tensor, TensorDict


def test_batch_size_from_max_sizes() -> None:
    batch = Dim(None, name="batch")
    time = Dim(Tensor("time", [batch], "int32"), name="time")
    data = TensorDict({"x": Tensor("x", [batch, time], "float32")})
    data.fill_random_(dyn_dim_max_sizes={batch: 10, time: 6}, dyn_dim_min_sizes={time: 6})
    assert data.data["x"].raw_tensor.shape == (10, 6)
    data.reset_content()
    data.fill_random_()
    assert data.data["x"].raw_tensor.shape[0] == 3  # the default batch size
