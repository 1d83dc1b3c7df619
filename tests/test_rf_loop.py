"""``rf.while_loop`` and ``rf.scan`` against hand-written step loops: values
and gradients (the unrolled computation on the same tape, and numpy), each
batch entry alone against the batch with lengths {0, 1, T-1, T}, finished
entries keeping their state, and an ``rf.scan`` of ``rf.LSTM`` single steps
against ``rf.LSTM`` over the sequence."""

from __future__ import annotations

import numpy as np
import pytest

from verjus import rf

TOL = {"rtol": 1e-5, "atol": 1e-6}
B, T, F = 4, 5, 3
LENS = [T, 0, 1, T - 1]


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def leaf(value: np.ndarray, dims: list[rf.Dim]) -> rf.Tensor:
    return rf.convert_to_tensor(value, dims=dims, requires_grad=True)


def total(y: rf.Tensor) -> rf.Tensor:
    return rf.reduce_sum(y, axis=y.dims)


def test_while_loop_values_and_gradient_match_the_unrolled_loop() -> None:
    f = rf.Dim(F, name="f")
    xv = rng(0).standard_normal(F).astype(np.float32)
    w = leaf(rng(1).standard_normal(F).astype(np.float32), [f])
    x = leaf(xv, [f])

    def body(v: tuple[int, rf.Tensor]) -> tuple[int, rf.Tensor]:
        i, h = v
        return i + 1, rf.tanh(h * w + 0.5)

    steps, h = rf.while_loop(lambda v: v[0] < 3, body, (0, x))
    assert steps == 3
    ref = x
    for _ in range(3):
        ref = rf.tanh(ref * w + 0.5)
    np.testing.assert_allclose(h.numpy(), ref.numpy(), **TOL)
    wv = w.numpy()
    expected = xv
    for _ in range(3):
        expected = np.tanh(expected * wv + 0.5)
    np.testing.assert_allclose(h.numpy(), expected, **TOL)
    for var in (x, w):
        np.testing.assert_allclose(
            rf.gradient(total(h), var).numpy(), rf.gradient(total(ref), var).numpy(), **TOL
        )


def test_while_loop_with_a_tensor_cond_and_nested_state() -> None:
    f = rf.Dim(2, name="f")
    x = rf.convert_to_tensor(np.ones(2, np.float32), dims=[f])
    init = {"s": rf.State(a=x, b=None), "n": [x * 0.0]}

    def body(v: dict) -> dict:
        return {"s": rf.State(a=v["s"].a * 2.0, b=None), "n": [v["n"][0] + 1.0]}

    out = rf.while_loop(lambda v: rf.reduce_sum(v["n"][0], axis=f) < 5.0, body, init)
    assert isinstance(out["s"], rf.State)
    assert out["s"].b is None
    np.testing.assert_allclose(out["n"][0].numpy(), [3.0, 3.0])
    np.testing.assert_allclose(out["s"].a.numpy(), [8.0, 8.0])


def test_while_loop_rejects_a_body_changing_the_structure() -> None:
    with pytest.raises(ValueError, match="while_loop: body"):
        rf.while_loop(lambda v: v[0] < 1, lambda v: (v[0] + 1,), (0, None))


class ScanSetup:
    """A recurrence ``s' = tanh(s * w + x_t)``, ``y_t = 2 * s' + x_t`` over a
    dynamic time dim with ``lens``, all inputs leaves."""

    def __init__(self, lens: list[int]) -> None:
        self.lens = lens
        self.f = rf.Dim(F, name="f")
        lengths = rf.convert_to_tensor(np.array(lens, np.int32), dims=[rf.batch_dim])
        self.time = rf.Dim(lengths, name="time")
        t_max = max(lens)
        self.xv = rng(2).standard_normal((len(lens), t_max, F)).astype(np.float32)
        self.s0v = rng(3).standard_normal((len(lens), F)).astype(np.float32)
        self.wv = rng(4).standard_normal(F).astype(np.float32)
        self.x = leaf(self.xv, [rf.batch_dim, self.time, self.f])
        self.s0 = leaf(self.s0v, [rf.batch_dim, self.f])
        self.w = leaf(self.wv, [self.f])

    def step(self, x: rf.Tensor, s: rf.State) -> tuple[rf.Tensor, rf.State]:
        new = rf.tanh(s.s * self.w + x)
        return new * 2.0 + x, rf.State(s=new)

    def scan(self) -> tuple[rf.Tensor, rf.Tensor]:
        ys, state, dim = rf.scan(
            spatial_dim=self.time,
            initial=rf.State(s=self.s0),
            xs=self.x,
            ys=self.s0,
            body=self.step,
        )
        assert dim is self.time
        return ys.copy_transpose([rf.batch_dim, self.time, self.f]), state.s

    def numpy_reference(self) -> tuple[np.ndarray, np.ndarray]:
        ys = np.zeros_like(self.xv)
        final = self.s0v.copy()
        for b, n in enumerate(self.lens):
            s = self.s0v[b]
            for t in range(n):
                s = np.tanh(s * self.wv + self.xv[b, t])
                ys[b, t] = 2 * s + self.xv[b, t]
            final[b] = s
        return ys, final


@pytest.mark.parametrize("lens", [LENS, [1], [T, T]])
def test_scan_matches_numpy_step_loop(lens: list[int]) -> None:
    setup = ScanSetup(lens)
    ys, s = setup.scan()
    ref_ys, ref_s = setup.numpy_reference()
    np.testing.assert_allclose(ys.numpy(), ref_ys, **TOL)
    np.testing.assert_allclose(s.copy_transpose([rf.batch_dim, setup.f]).numpy(), ref_s, **TOL)


def test_scan_finished_entries_keep_their_state() -> None:
    setup = ScanSetup(LENS)
    _, s = setup.scan()
    s_v = s.copy_transpose([rf.batch_dim, setup.f]).numpy()
    np.testing.assert_array_equal(s_v[1], setup.s0v[1])  # length 0: untouched


def test_scan_batched_equals_each_entry_alone_values_and_gradients() -> None:
    batched = ScanSetup(LENS)
    ys, s = batched.scan()
    r_ys = rng(7).standard_normal(ys.shape).astype(np.float32)
    r_s = rng(8).standard_normal((B, F)).astype(np.float32)
    loss = total(ys * rf.convert_to_tensor(r_ys, dims=ys.dims)) + total(
        s * rf.convert_to_tensor(r_s, dims=[rf.batch_dim, batched.f])
    )
    grads = [rf.gradient(loss, v).numpy() for v in (batched.x, batched.s0, batched.w)]
    grad_w = np.zeros(F, np.float32)
    for b, n in enumerate(LENS):
        alone = ScanSetup([n])
        alone.x = leaf(batched.xv[b : b + 1, :n], [rf.batch_dim, alone.time, alone.f])
        alone.s0 = leaf(batched.s0v[b : b + 1], [rf.batch_dim, alone.f])
        ys_b, s_b = alone.scan()
        np.testing.assert_allclose(ys_b.numpy()[0], ys.numpy()[b, :n], **TOL)
        np.testing.assert_allclose(s_b.numpy()[0], s.numpy()[b], **TOL)
        loss_b = total(ys_b * rf.convert_to_tensor(r_ys[b : b + 1, :n], dims=ys_b.dims)) + total(
            s_b * rf.convert_to_tensor(r_s[b : b + 1], dims=[rf.batch_dim, alone.f])
        )
        if n:
            gx = rf.gradient(loss_b, alone.x).numpy()[0]
            np.testing.assert_allclose(gx, grads[0][b, :n], **TOL)
        np.testing.assert_array_equal(grads[0][b, n:], 0.0)
        np.testing.assert_allclose(rf.gradient(loss_b, alone.s0).numpy()[0], grads[1][b], **TOL)
        grad_w += rf.gradient(loss_b, alone.w).numpy()
    np.testing.assert_allclose(grads[2], grad_w, rtol=1e-4, atol=1e-5)


def test_scan_gradient_matches_finite_differences() -> None:
    setup = ScanSetup([3, 2])
    ys, s = setup.scan()
    loss = total(ys) + total(s)
    grad_w = rf.gradient(loss, setup.w).numpy().astype(np.float64)

    def loss_at(wv: np.ndarray) -> float:
        setup.wv = wv.astype(np.float32)
        ref_ys, ref_s = setup.numpy_reference()
        return float(ref_ys.astype(np.float64).sum() + ref_s.astype(np.float64).sum())

    w0, eps = setup.wv.copy(), 1e-2
    for k in range(F):
        plus, minus = w0.copy(), w0.copy()
        plus[k] += eps
        minus[k] -= eps
        fd = (loss_at(plus) - loss_at(minus)) / (2 * eps)
        np.testing.assert_allclose(grad_w[k], fd, rtol=2e-2, atol=2e-3)


def test_scan_over_a_static_dim_without_xs() -> None:
    f, steps = rf.Dim(2, name="f"), rf.Dim(3, name="steps")
    s0 = rf.convert_to_tensor(np.array([1.0, -1.0], np.float32), dims=[f])
    ys, s, _ = rf.scan(
        spatial_dim=steps, initial=s0, ys=(s0, None), body=lambda _x, s: ((s, None), s * 2.0)
    )
    assert ys[1] is None
    np.testing.assert_allclose(
        ys[0].copy_transpose([steps, f]).numpy(), [[1, -1], [2, -2], [4, -4]]
    )
    np.testing.assert_allclose(s.numpy(), [8.0, -8.0])


def test_scan_of_lstm_single_steps_equals_lstm_over_the_sequence() -> None:
    in_dim, out_dim = rf.Dim(F, name="in"), rf.Dim(6, name="out")
    lengths = rf.convert_to_tensor(np.array(LENS, np.int32), dims=[rf.batch_dim])
    time = rf.Dim(lengths, name="time")
    rf.set_random_seed(3)
    lstm = rf.LSTM(in_dim, out_dim)
    lstm.bias.assign(rng(1).uniform(-0.5, 0.5, 24).astype(np.float32))
    x = leaf(rng(2).standard_normal((B, T, F)).astype(np.float32), [rf.batch_dim, time, in_dim])
    h0 = leaf(rng(3).uniform(-1, 1, (B, 6)).astype(np.float32), [rf.batch_dim, out_dim])
    c0 = leaf(rng(4).uniform(-1, 1, (B, 6)).astype(np.float32), [rf.batch_dim, out_dim])
    state0 = rf.LstmState(h=h0, c=c0)
    fused, fused_state = lstm(x, state=state0, spatial_dim=time)
    stepped, stepped_state, _ = rf.scan(
        spatial_dim=time,
        initial=state0,
        xs=x,
        ys=h0,
        body=lambda x_t, s: lstm(x_t, state=s, spatial_dim=rf.single_step_dim),
    )
    assert isinstance(stepped_state, rf.LstmState)
    out_dims = [rf.batch_dim, time, out_dim]
    np.testing.assert_allclose(
        stepped.copy_transpose(out_dims).numpy(), fused.copy_transpose(out_dims).numpy(), **TOL
    )
    for name in ("h", "c"):
        np.testing.assert_allclose(
            stepped_state[name].copy_transpose([rf.batch_dim, out_dim]).numpy(),
            fused_state[name].copy_transpose([rf.batch_dim, out_dim]).numpy(),
            **TOL,
        )
    seed = rf.convert_to_tensor(rng(5).standard_normal((B, T, 6)).astype(np.float32), dims=out_dims)
    loss_fused = total(fused * seed) + total(fused_state.c)
    loss_stepped = total(stepped * seed) + total(stepped_state.c)
    for var in (x, h0, c0, lstm.ff_weight, lstm.rec_weight, lstm.bias):
        np.testing.assert_allclose(
            rf.gradient(loss_stepped, var).numpy(),
            rf.gradient(loss_fused, var).numpy(),
            rtol=1e-4,
            atol=1e-5,
        )


def test_scan_rejects_what_it_does_not_support() -> None:
    steps = rf.Dim(2, name="steps")
    with pytest.raises(ValueError, match="give cond"):
        rf.scan(body=lambda x, s: (None, s))
    with pytest.raises(ValueError, match="must not be"):
        rf.scan(spatial_dim=steps, max_seq_len=3, body=lambda x, s: (None, s))
    with pytest.raises(ValueError, match="body's state"):
        rf.scan(spatial_dim=steps, initial=(0.0,), body=lambda x, s: (None, s[0]))


def count_until(limits: list[int], start: list[float], **options: object) -> tuple:
    """A cond-ended scan: state ``s`` (float, starting at ``start``) grows by 1
    a step while ``s < limit``; y is ``s * w`` (``w`` 1.5 per entry) before
    the step."""
    limit = rf.convert_to_tensor(np.array(limits, np.float32), dims=[rf.batch_dim])
    s0 = leaf(np.array(start, np.float32), [rf.batch_dim])
    w = leaf(np.full(len(limits), 1.5, np.float32), [rf.batch_dim])
    ys, s, dim = rf.scan(
        cond_dims=[rf.batch_dim],
        initial=rf.State(s=s0),
        ys=s0 * w,
        cond=lambda _x, st: rf.compare(st.s, "<", limit),
        body=lambda _x, st: (st.s * w, rf.State(s=st.s + 1.0)),
        **options,
    )
    return ys, s.s, dim, s0, w


def test_scan_with_cond_ends_each_entry_on_its_own() -> None:
    ys, s, dim, s0, w = count_until([3, 0, 1, 4], [0.0, 0.0, 0.5, 1.0])
    # cond before body: steps while s < limit
    np.testing.assert_array_equal(dim.dyn_size_ext.numpy(), [3, 0, 1, 3])
    expected = np.zeros((4, 3), np.float32)
    for b, (n, st) in enumerate(zip([3, 0, 1, 3], [0.0, 0.0, 0.5, 1.0], strict=True)):
        expected[b, :n] = 1.5 * (st + np.arange(n))
    np.testing.assert_allclose(ys.copy_transpose([rf.batch_dim, dim]).numpy(), expected)
    # RETURNN keeps the state before the step at which cond turned False
    np.testing.assert_allclose(s.numpy(), [2.0, 0.0, 0.5, 3.0])
    loss = total(ys)
    np.testing.assert_allclose(rf.gradient(loss, w).numpy(), expected.sum(1) / 1.5, rtol=1e-6)
    np.testing.assert_allclose(rf.gradient(loss, s0).numpy(), [4.5, 0.0, 1.5, 4.5], rtol=1e-6)


def test_scan_with_cond_after_body_and_max_seq_len() -> None:
    _, _, dim, _, _ = count_until([3, 0], [0.0, 0.0], cond_before_body=False)
    np.testing.assert_array_equal(dim.dyn_size_ext.numpy(), [3, 1])
    _, s, dim, _, _ = count_until([3, 0, 9], [0.0, 0.0, 0.0], max_seq_len=2)
    np.testing.assert_array_equal(dim.dyn_size_ext.numpy(), [2, 0, 2])
    np.testing.assert_allclose(s.numpy(), [2.0, 0.0, 2.0])


def sigmoid(v: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-v))


class ZoneoutSetup:
    """A ``ZoneoutLSTM`` with non-zero bias, its weights as numpy, and a
    source over ``[batch, time, in]`` with ``LENS``."""

    def __init__(self, **options: float | str) -> None:
        self.in_dim, self.out_dim = rf.Dim(F, name="in"), rf.Dim(6, name="out")
        lengths = rf.convert_to_tensor(np.array(LENS, np.int32), dims=[rf.batch_dim])
        self.time = rf.Dim(lengths, name="time")
        rf.set_random_seed(3)
        self.lstm = rf.ZoneoutLSTM(self.in_dim, self.out_dim, **options)
        self.lstm.bias.assign(rng(1).uniform(-0.5, 0.5, 24).astype(np.float32))
        self.xv = rng(2).standard_normal((B, T, F)).astype(np.float32)
        self.h0v = rng(3).uniform(-1, 1, (B, 6)).astype(np.float32)
        self.c0v = rng(4).uniform(-1, 1, (B, 6)).astype(np.float32)
        self.x = leaf(self.xv, [rf.batch_dim, self.time, self.in_dim])
        self.state = rf.LstmState(
            h=leaf(self.h0v, [rf.batch_dim, self.out_dim]),
            c=leaf(self.c0v, [rf.batch_dim, self.out_dim]),
        )

    def run(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        out, state = self.lstm(self.x, state=self.state, spatial_dim=self.time)
        bd = [rf.batch_dim, self.out_dim]
        return (
            out.copy_transpose([rf.batch_dim, self.time, self.out_dim]).numpy(),
            state.h.copy_transpose(bd).numpy(),
            state.c.copy_transpose(bd).numpy(),
        )

    def numpy_inference(
        self, zc: float, zh: float, forget_bias: float, order: str
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """RETURNN's inference step written out per sequence."""
        wf, wr = self.lstm.ff_weight.numpy(), self.lstm.rec_weight.numpy()
        bias = self.lstm.bias.numpy()
        out = np.zeros((B, T, 6), np.float32)
        hs, cs = self.h0v.copy(), self.c0v.copy()
        for b, n in enumerate(LENS):
            h, c = self.h0v[b], self.c0v[b]
            for t in range(n):
                z = wf @ self.xv[b, t] + wr @ h + bias
                p = dict(zip(order, np.split(z, 4), strict=True))
                new_c = sigmoid(p["f"] + forget_bias) * c + sigmoid(p["i"]) * np.tanh(p["j"])
                new_h = sigmoid(p["o"]) * np.tanh(new_c)
                c = (1 - zc) * new_c + zc * c
                h = (1 - zh) * new_h + zh * h
                out[b, t] = h
            hs[b], cs[b] = h, c
        return out, hs, cs


def test_zoneout_lstm_without_zoneout_equals_lstm() -> None:
    setup = ZoneoutSetup()
    out, h, c = setup.run()
    ref_out, ref_state = rf.LSTM.__call__(
        setup.lstm, setup.x, state=setup.state, spatial_dim=setup.time
    )
    np.testing.assert_allclose(
        out, ref_out.copy_transpose([rf.batch_dim, setup.time, setup.out_dim]).numpy(), **TOL
    )
    for got, ref in ((h, ref_state.h), (c, ref_state.c)):
        np.testing.assert_allclose(
            got, ref.copy_transpose([rf.batch_dim, setup.out_dim]).numpy(), **TOL
        )


@pytest.mark.parametrize("order", ["ifco", "icfo"])
def test_zoneout_lstm_inference_matches_numpy(order: str) -> None:
    rf.init_forward_step_run_ctx()
    setup = ZoneoutSetup(
        zoneout_factor_cell=0.15, zoneout_factor_output=0.05, forget_bias=1.0, parts_order=order
    )
    got = setup.run()
    expected = setup.numpy_inference(0.15, 0.05, 1.0, order.replace("c", "j"))
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


def test_zoneout_lstm_training_keeps_each_unit_old_or_new() -> None:
    setup = ZoneoutSetup(zoneout_factor_cell=0.5, zoneout_factor_output=0.5)
    step = rf.convert_to_tensor(setup.xv[:, 0], dims=[rf.batch_dim, setup.in_dim])
    rf.init_train_step_run_ctx()
    try:
        out, state = setup.lstm(step, state=setup.state, spatial_dim=rf.single_step_dim)
    finally:
        rf.init_forward_step_run_ctx()
    setup.lstm.zoneout_factor_cell = setup.lstm.zoneout_factor_output = 0.0
    _, new = setup.lstm(step, state=setup.state, spatial_dim=rf.single_step_dim)
    bd = [rf.batch_dim, setup.out_dim]
    for name, prev in (("h", setup.h0v), ("c", setup.c0v)):
        got = state[name].copy_transpose(bd).numpy()
        cur = new[name].copy_transpose(bd).numpy()
        kept_old = np.isclose(got, prev, rtol=1e-5, atol=1e-6)
        took_new = np.isclose(got, cur, rtol=1e-5, atol=1e-6)
        assert np.all(kept_old | took_new)
        assert kept_old.any()
        assert took_new.any()
        # one mask over out_dim, shared by the batch (dropout_broadcast)
        assert np.all(kept_old == kept_old[:1])
    np.testing.assert_array_equal(
        out.copy_transpose(bd).numpy(), state.h.copy_transpose(bd).numpy()
    )


def test_zoneout_lstm_rejects_a_bad_parts_order() -> None:
    with pytest.raises(ValueError, match="parts_order"):
        rf.ZoneoutLSTM(rf.Dim(2, name="in"), rf.Dim(2, name="out"), parts_order="iifo")


def test_zoneout_lstm_against_returnn_on_its_torch_backend() -> None:
    """RETURNN's ZoneoutLSTM runs its step with its own ``rf.scan``: the same
    weights give the same outputs, states and gradients (inference mode)."""
    torch = pytest.importorskip("torch", reason="RETURNN's rf.scan runs on its torch backend")
    pytest.importorskip("returnn", reason="RETURNN's own rf.scan is the reference here")
    import returnn.frontend as rrf
    from returnn.tensor import Dim, Tensor

    rrf.select_backend_torch()
    rrf.init_forward_step_run_ctx()
    options = {"zoneout_factor_cell": 0.15, "zoneout_factor_output": 0.05, "forget_bias": 1.0}
    rf.init_forward_step_run_ctx()
    s = ZoneoutSetup(**options)
    batch = Dim(B, name="batch")
    lens = torch.tensor(LENS, dtype=torch.int32)
    time = Dim(Tensor("lengths", [batch], dtype="int32", raw_tensor=lens), name="time")
    in_dim, out_dim = Dim(F, name="in"), Dim(6, name="out")
    theirs = rrf.ZoneoutLSTM(in_dim, out_dim, **options)
    with torch.no_grad():
        theirs.bias.raw_tensor.uniform_(-0.5, 0.5)
    for name, p in theirs.named_parameters():  # their parameters, by name, into ours
        getattr(s.lstm, name).assign(p.raw_tensor.detach().numpy())

    out, state = s.lstm(s.x, state=s.state, spatial_dim=s.time)
    # RETURNN leaves the padding frames of the stacked ys undefined (ours are
    # 0): compare valid frames only, and give the padding no gradient
    valid = np.arange(T)[None, :, None] < np.array(LENS)[:, None, None]
    seed = rng(9).standard_normal((B, T, 6)).astype(np.float32) * valid
    out_dims = [rf.batch_dim, s.time, s.out_dim]
    (total(out * rf.convert_to_tensor(seed, dims=out_dims)) + total(state.c)).backward()

    def their_leaf(value: np.ndarray, dims: list) -> Tensor:
        raw = torch.tensor(value, requires_grad=True)
        # RETURNN's loop checks the state's feature_dim against the step's
        feature = out_dim if out_dim in dims else None
        return Tensor("v", dims, dtype="float32", raw_tensor=raw, feature_dim=feature)

    x = their_leaf(s.xv, [batch, time, in_dim])
    h0, c0 = their_leaf(s.h0v, [batch, out_dim]), their_leaf(s.c0v, [batch, out_dim])
    t_out, t_state = theirs(x, state=rrf.LstmState(h=h0, c=c0), spatial_dim=time)
    out_t = t_out.copy_transpose([batch, time, out_dim]).raw_tensor
    c_t = t_state.c.copy_transpose([batch, out_dim]).raw_tensor
    ((out_t * torch.from_numpy(seed)).sum() + c_t.sum()).backward()

    mine_out = out.copy_transpose(out_dims).numpy()
    np.testing.assert_array_equal(mine_out[~np.broadcast_to(valid, mine_out.shape)], 0.0)
    np.testing.assert_allclose(
        mine_out * valid, out_t.detach().numpy() * valid, rtol=1e-5, atol=1e-5
    )
    for mine, their in ((state.h, t_state.h), (state.c, t_state.c)):
        np.testing.assert_allclose(
            mine.copy_transpose([rf.batch_dim, s.out_dim]).numpy(),
            their.copy_transpose([batch, out_dim]).raw_tensor.detach().numpy(),
            rtol=1e-5,
            atol=1e-5,
        )
    for name, p in theirs.named_parameters():
        np.testing.assert_allclose(
            getattr(s.lstm, name).grad.numpy(),
            p.raw_tensor.grad.numpy(),
            rtol=1e-4,
            atol=1e-5,
            err_msg=name,
        )
    for mine, their in ((s.x, x), (s.state.h, h0), (s.state.c, c0)):
        np.testing.assert_allclose(
            mine.grad.numpy(), their.raw_tensor.grad.numpy(), rtol=1e-4, atol=1e-5
        )


@pytest.mark.parametrize("options", [{}, {"cond_before_body": False}, {"max_seq_len": 2}])
def test_scan_with_cond_against_returnn_on_its_torch_backend(options: dict) -> None:
    torch = pytest.importorskip("torch", reason="RETURNN's rf.scan runs on its torch backend")
    pytest.importorskip("returnn", reason="RETURNN's own rf.scan is the reference here")
    import returnn.frontend as rrf
    from returnn.tensor import Dim, Tensor

    rrf.select_backend_torch()
    limits, start = [3.0, 0.0, 1.0, 4.0], [0.0, 0.0, 0.5, 1.0]
    batch = Dim(4, name="batch")
    limit = Tensor("l", [batch], dtype="float32", raw_tensor=torch.tensor(limits))
    s0 = Tensor("s", [batch], dtype="float32", raw_tensor=torch.tensor(start))
    their_ys, their_s, their_dim = rrf.scan(
        cond_dims=[batch],
        initial=rrf.State(s=s0),
        ys=s0,
        cond=lambda _x, st: st.s < limit,
        body=lambda _x, st: (st.s * 1.5, rrf.State(s=st.s + 1.0)),
        **options,
    )
    ys, s, dim, _, _ = count_until([3, 0, 1, 4], start, **options)
    lens = their_dim.dyn_size_ext.raw_tensor.numpy()
    np.testing.assert_array_equal(dim.dyn_size_ext.numpy(), lens)
    np.testing.assert_allclose(s.numpy(), their_s.s.raw_tensor.numpy())
    valid = np.arange(lens.max())[None, :] < lens[:, None]
    mine = ys.copy_transpose([rf.batch_dim, dim]).numpy()
    theirs = their_ys.copy_transpose([batch, their_dim]).raw_tensor.numpy()
    np.testing.assert_allclose(mine[valid], theirs[valid])
    np.testing.assert_array_equal(mine[~valid], 0.0)
