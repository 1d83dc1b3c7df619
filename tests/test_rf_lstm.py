"""``rf.LSTM`` against ``torch.nn.LSTM`` and RETURNN's own ``rf.LSTM`` on the
same weights (values and gradients of every parameter, the input and the
initial state, over a dynamic time dim with lengths {0, 1, T-1, T}), each batch
entry alone against its slice, one ``single_step_dim`` step against the first
frame, ``rf.State`` / ``LstmState``, and bad input.

PyTorch's reference runs each sequence alone (its own length, from its own
initial state; a sequence of length 0 keeps the initial state), which is what
the fused op's per-sequence lengths must give. Tolerances as in
``test_rf_torch.py`` (float32 on both sides, different summation orders).
"""

from __future__ import annotations

import numpy as np
import pytest

from verjus import rf

VALUE_TOL = {"rtol": 1e-5, "atol": 1e-6}
GRAD_TOL = {"rtol": 1e-4, "atol": 1e-5}

B, T, F, H = 4, 5, 3, 6
LENS = [T, 0, T - 1, 1]


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


class Setup:
    """An ``rf.LSTM`` with non-zero bias, a source over ``[batch, time, in]``
    with ``LENS``, and non-zero initial states, all leaves."""

    def __init__(self, lens: list[int] = LENS) -> None:
        self.lens = lens
        self.in_dim, self.out_dim = rf.Dim(F, name="in"), rf.Dim(H, name="out")
        lengths = rf.convert_to_tensor(np.array(lens, np.int32), dims=[rf.batch_dim])
        self.time = rf.Dim(lengths, name="time")
        rf.set_random_seed(5)
        self.lstm = rf.LSTM(self.in_dim, self.out_dim)
        self.lstm.bias.assign(rng(1).uniform(-0.5, 0.5, 4 * H).astype(np.float32))
        t_max = max(lens)
        self.xv = rng(2).standard_normal((len(lens), t_max, F)).astype(np.float32)
        self.h0v = rng(3).uniform(-1, 1, (len(lens), H)).astype(np.float32)
        self.c0v = rng(4).uniform(-1, 1, (len(lens), H)).astype(np.float32)
        self.x = self.leaf(self.xv, [rf.batch_dim, self.time, self.in_dim])
        self.h0 = self.leaf(self.h0v, [rf.batch_dim, self.out_dim])
        self.c0 = self.leaf(self.c0v, [rf.batch_dim, self.out_dim])

    @staticmethod
    def leaf(value: np.ndarray, dims: list[rf.Dim]) -> rf.Tensor:
        return rf.convert_to_tensor(value, dims=dims, requires_grad=True)

    def run(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(out [B, T, H], h [B, H], c [B, H])`` as numpy, after backward of
        ``sum(out * r1) + sum(h * r2) + sum(c * r3)``."""
        out, state = self.lstm(
            self.x, state=rf.LstmState(h=self.h0, c=self.c0), spatial_dim=self.time
        )
        out_v = out.copy_transpose([rf.batch_dim, self.time, self.out_dim]).numpy()
        h_v = state.h.copy_transpose([rf.batch_dim, self.out_dim]).numpy()
        c_v = state.c.copy_transpose([rf.batch_dim, self.out_dim]).numpy()
        n, t_max = len(self.lens), max(self.lens)
        self.seeds = [
            rng(10 + k).standard_normal(shape).astype(np.float32)
            for k, shape in enumerate(((t_max, n, H), (n, H), (n, H)))
        ]
        layouts = (
            [self.time, rf.batch_dim, self.out_dim],
            [rf.batch_dim, self.out_dim],
            [rf.batch_dim, self.out_dim],
        )
        loss = None
        for y, seed, dims in zip((out, state.h, state.c), self.seeds, layouts, strict=True):
            term = rf.reduce_sum(y * rf.convert_to_tensor(seed, dims=dims), axis=dims)
            loss = term if loss is None else loss + term
        loss.backward()
        return out_v, h_v, c_v


def test_against_torch_nn_lstm_values_and_gradients() -> None:
    torch = pytest.importorskip(
        "torch", reason="PyTorch's nn.LSTM is the reference this test compares rf.LSTM with"
    )
    s = Setup()
    out_v, h_v, c_v = s.run()
    ref = torch.nn.LSTM(F, H)
    with torch.no_grad():
        ref.weight_ih_l0.copy_(torch.from_numpy(s.lstm.ff_weight.numpy()))
        ref.weight_hh_l0.copy_(torch.from_numpy(s.lstm.rec_weight.numpy()))
        ref.bias_ih_l0.copy_(torch.from_numpy(s.lstm.bias.numpy()))
        ref.bias_hh_l0.zero_()
    x = torch.tensor(s.xv, requires_grad=True)
    h0 = torch.tensor(s.h0v, requires_grad=True)
    c0 = torch.tensor(s.c0v, requires_grad=True)
    outs, hs, cs = [], [], []
    for b, n in enumerate(LENS):
        if n == 0:
            outs.append(torch.zeros(T, H))
            hs.append(h0[b])
            cs.append(c0[b])
            continue
        y, (h, c) = ref(
            x[b, :n, None].transpose(0, 1).reshape(n, 1, F),
            (h0[None, b : b + 1], c0[None, b : b + 1]),
        )
        outs.append(torch.cat([y[:, 0], torch.zeros(T - n, H)]))
        hs.append(h[0, 0])
        cs.append(c[0, 0])
    out, h, c = torch.stack(outs, 1), torch.stack(hs), torch.stack(cs)
    r1, r2, r3 = (torch.from_numpy(v) for v in s.seeds)
    ((out * r1).sum() + (h * r2).sum() + (c * r3).sum()).backward()

    np.testing.assert_allclose(out_v, out.detach().numpy().transpose(1, 0, 2), **VALUE_TOL)
    np.testing.assert_allclose(h_v, h.detach().numpy(), **VALUE_TOL)
    np.testing.assert_allclose(c_v, c.detach().numpy(), **VALUE_TOL)
    grads = {
        "ff_weight": ref.weight_ih_l0.grad,
        "rec_weight": ref.weight_hh_l0.grad,
        "bias": ref.bias_ih_l0.grad,
    }
    for name, p in s.lstm.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), grads[name].numpy(), **GRAD_TOL, err_msg=name)
    np.testing.assert_allclose(s.x.grad.numpy(), x.grad.numpy(), **GRAD_TOL)
    np.testing.assert_allclose(s.h0.grad.numpy(), h0.grad.numpy(), **GRAD_TOL)
    np.testing.assert_allclose(s.c0.grad.numpy(), c0.grad.numpy(), **GRAD_TOL)


def test_each_entry_alone_gives_its_slice() -> None:
    s = Setup()
    out_v, h_v, c_v = s.run()
    for b, n in enumerate(LENS):
        alone = Setup(lens=[n])
        for name, p in s.lstm.named_parameters():
            getattr(alone.lstm, name).assign(p.numpy())
        alone.x = alone.leaf(s.xv[b : b + 1, :n], [rf.batch_dim, alone.time, alone.in_dim])
        alone.h0 = alone.leaf(s.h0v[b : b + 1], [rf.batch_dim, alone.out_dim])
        alone.c0 = alone.leaf(s.c0v[b : b + 1], [rf.batch_dim, alone.out_dim])
        a_out, a_h, a_c = alone.run()
        np.testing.assert_allclose(a_out[0], out_v[b, :n], **VALUE_TOL, err_msg=f"out {b}")
        np.testing.assert_allclose(a_h[0], h_v[b], **VALUE_TOL, err_msg=f"h {b}")
        np.testing.assert_allclose(a_c[0], c_v[b], **VALUE_TOL, err_msg=f"c {b}")


def test_single_step_is_the_first_frame() -> None:
    s = Setup()
    out_v, _, _ = s.run()
    frame = rf.convert_to_tensor(s.xv[:, 0], dims=[rf.batch_dim, s.in_dim])
    state = rf.LstmState(h=s.h0, c=s.c0)
    y, new = s.lstm(frame, state=state, spatial_dim=rf.single_step_dim)
    assert set(y.dims) == {rf.batch_dim, s.out_dim}
    assert y.feature_dim == s.out_dim
    y_v = y.copy_transpose([rf.batch_dim, s.out_dim]).numpy()
    np.testing.assert_allclose(new.h.copy_transpose([rf.batch_dim, s.out_dim]).numpy(), y_v)
    started = [b for b, n in enumerate(LENS) if n > 0]
    np.testing.assert_allclose(y_v[started], out_v[started, 0], **VALUE_TOL)


def test_default_initial_state_broadcasts_over_the_batch() -> None:
    s = Setup()
    state = s.lstm.default_initial_state(batch_dims=[rf.batch_dim])
    assert isinstance(state, rf.LstmState)
    assert list(state.h.dims) == [s.out_dim]
    assert state.h.feature_dim == s.out_dim
    out, new = s.lstm(s.x, state=state, spatial_dim=s.time)
    zero = s.leaf(np.zeros((B, H), np.float32), [rf.batch_dim, s.out_dim])
    out2, _ = s.lstm(s.x, state=rf.LstmState(h=zero, c=zero), spatial_dim=s.time)
    order = [rf.batch_dim, s.time, s.out_dim]
    np.testing.assert_array_equal(
        out.copy_transpose(order).numpy(), out2.copy_transpose(order).numpy()
    )
    assert set(new.h.dims) == {rf.batch_dim, s.out_dim}


def test_parameters_are_returnns() -> None:
    s = Setup()
    shapes = {n: list(p.shape) for n, p in s.lstm.named_parameters()}
    assert shapes == {"ff_weight": [4 * H, F], "rec_weight": [4 * H, H], "bias": [4 * H]}
    assert s.lstm.ff_weight.dims[1] == s.in_dim
    assert s.lstm.rec_weight.dims[1] == s.out_dim
    assert s.lstm.ff_weight.dims[0] == s.lstm.rec_weight.dims[0] == s.lstm.bias.dims[0]
    assert not np.any(rf.LSTM(s.in_dim, s.out_dim).bias.numpy())
    assert [n for n, _ in rf.LSTM(s.in_dim, s.out_dim, with_bias=False).named_parameters()] == [
        "ff_weight",
        "rec_weight",
    ]


def test_against_returnn_rf_lstm_on_its_torch_backend() -> None:
    torch = pytest.importorskip("torch", reason="RETURNN's rf.LSTM runs on its torch backend")
    pytest.importorskip("returnn", reason="RETURNN's own rf.LSTM is the reference here")
    import returnn.frontend as rrf
    from returnn.tensor import Dim, Tensor

    rrf.select_backend_torch()
    lens = [T, 1, T - 1, 2]  # RETURNN packs the sequences, which needs lengths > 0
    s = Setup(lens=lens)
    batch = Dim(B, name="batch")
    time = Dim(
        Tensor("lengths", [batch], dtype="int32", raw_tensor=torch.tensor(lens, dtype=torch.int32)),
        name="time",
    )
    in_dim, out_dim = Dim(F, name="in"), Dim(H, name="out")
    theirs = rrf.LSTM(in_dim, out_dim)
    with torch.no_grad():
        theirs.bias.raw_tensor.uniform_(-0.5, 0.5)
    for name, p in theirs.named_parameters():  # their parameters, by name, into ours
        getattr(s.lstm, name).assign(p.raw_tensor.detach().numpy())
    out_v, h_v, c_v = s.run()

    def leaf(value: np.ndarray, dims: list) -> Tensor:
        return Tensor(
            "v", dims, dtype="float32", raw_tensor=torch.tensor(value, requires_grad=True)
        )

    x = leaf(s.xv, [batch, time, in_dim])
    h0, c0 = leaf(s.h0v, [batch, out_dim]), leaf(s.c0v, [batch, out_dim])
    out, state = theirs(x, state=rrf.LstmState(h=h0, c=c0), spatial_dim=time)
    out_t = out.copy_transpose([time, batch, out_dim]).raw_tensor
    h_t = state.h.copy_transpose([batch, out_dim]).raw_tensor
    c_t = state.c.copy_transpose([batch, out_dim]).raw_tensor
    r1, r2, r3 = (torch.from_numpy(v) for v in s.seeds)
    ((out_t * r1).sum() + (h_t * r2).sum() + (c_t * r3).sum()).backward()

    np.testing.assert_allclose(out_v, out_t.detach().numpy().transpose(1, 0, 2), **VALUE_TOL)
    np.testing.assert_allclose(h_v, h_t.detach().numpy(), **VALUE_TOL)
    np.testing.assert_allclose(c_v, c_t.detach().numpy(), **VALUE_TOL)
    for name, p in theirs.named_parameters():
        mine = getattr(s.lstm, name).grad.numpy()
        np.testing.assert_allclose(mine, p.raw_tensor.grad.numpy(), **GRAD_TOL, err_msg=name)
    np.testing.assert_allclose(s.x.grad.numpy(), x.raw_tensor.grad.numpy(), **GRAD_TOL)
    np.testing.assert_allclose(s.h0.grad.numpy(), h0.raw_tensor.grad.numpy(), **GRAD_TOL)
    np.testing.assert_allclose(s.c0.grad.numpy(), c0.raw_tensor.grad.numpy(), **GRAD_TOL)


def test_state_is_returnns_container() -> None:
    a, b = rf.zeros([rf.Dim(2, name="d")]), rf.ones([rf.Dim(3, name="e")])
    s = rf.State(h=a, inner=rf.State(b))
    assert s.h is a
    assert s["h"] is a
    assert s.inner.state is b
    s.c = b
    assert s["c"] is b
    with pytest.raises(AttributeError):
        _ = s.missing
    assert rf.State({"h": a}) == rf.State([("h", a)]) == {"h": a}
    flat = s.flatten_tensors()
    assert len(flat) == 2
    assert any(t is a for t in flat)
    assert any(t is b for t in flat)
    # Tree utilities rebuild a state as type(s)(pairs).
    rebuilt = rf.LstmState((k, v) for k, v in rf.LstmState(h=a, c=b).items())
    assert type(rebuilt) is rf.LstmState
    assert rebuilt.h is a
    assert rebuilt.c is b
    assert repr(rf.LstmState(h=None, c=None)) == "LstmState(h=None, c=None)"


def test_bad_input_is_a_clear_error() -> None:
    s = Setup()
    state = rf.LstmState(h=s.h0, c=s.c0)
    other = rf.Dim(F, name="other")
    x = rf.convert_to_tensor(s.xv, dims=[rf.batch_dim, s.time, other])
    with pytest.raises(ValueError, match="does not have in_dim in"):
        s.lstm(x, state=state, spatial_dim=s.time)
    for bad in (rf.LstmState(h=s.h0), rf.State(h=s.h0), rf.State(c=s.c0)):
        with pytest.raises(ValueError, match="needs the entries h"):
            s.lstm(s.x, state=bad, spatial_dim=s.time)
    wrong = rf.convert_to_tensor(np.zeros((H, F), np.float32), dims=[s.out_dim, other])
    with pytest.raises(ValueError, match="state h"):
        s.lstm(s.x, state=rf.LstmState(h=wrong, c=s.c0), spatial_dim=s.time)
    with pytest.raises(ValueError, match="must be static"):
        rf.LSTM(s.in_dim, s.time)
