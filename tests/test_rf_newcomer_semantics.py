"""What a PyTorch or RETURNN user gets from ``verjus.rf`` where the result used to
be silently wrong or surprising (issue 39, items 3, 4 and 12), each decided after
what RETURNN (and PyTorch) do, compared with them where installed:

- ``rf.LSTM(x_over_time, spatial_dim=rf.single_step_dim)`` with a state without
  the time dim is a ValueError saying how to call it (RETURNN refuses it too);
- ``rf.Loop`` / ``rf.scan`` refuse a negative or non-integer ``max_seq_len``;
- ``loss.backward()`` runs once per tensor unless ``retain_graph=True`` (PyTorch);
- ``rf.ctc_loss`` gives RETURNN's 0 for an impossible target, ``inf`` with
  ``zero_infinity=False`` (PyTorch's option), a zero gradient either way;
- ``rf.LSTM`` over time returns RETURNN's dim order ``[time, batch..., out]``.
"""

from __future__ import annotations

import numpy as np
import pytest

from verjus import rf

B, T, F, H = 2, 4, 3, 5
LENS = [T, 2]


def lstm_setup(seed: int = 0):
    """An LSTM, a source over ``[batch, time, in]`` (dynamic time) and a zero
    state over ``[batch, out]``."""
    batch = rf.Dim(B, name="batch")
    time = rf.Dim(rf.convert_to_tensor(np.array(LENS, np.int32), dims=[batch]), name="time")
    in_dim, out_dim = rf.Dim(F, name="in"), rf.Dim(H, name="out")
    rf.set_random_seed(seed)
    lstm = rf.LSTM(in_dim, out_dim)
    xv = np.random.default_rng(seed).standard_normal((B, T, F)).astype(np.float32)
    x = rf.convert_to_tensor(xv, dims=[batch, time, in_dim])
    return lstm, x, xv, batch, time, in_dim, out_dim


# -- item 3: rf.LSTM with single_step_dim -------------------------------------------


def test_single_step_over_a_sequence_is_an_error_saying_how_to_call_it() -> None:
    lstm, x, _, batch, time, _, _ = lstm_setup()
    state = lstm.default_initial_state(batch_dims=[batch])
    with pytest.raises(ValueError, match="single_step_dim runs one step") as info:
        lstm(x, state=state, spatial_dim=rf.single_step_dim)
    message = str(info.value)
    assert "source [batch, time, in] has the sequence dim time" in message
    assert "state [batch, out] lacks" in message
    assert "pass the Dim time as spatial_dim" in message
    assert "loop.unstack(x)" in message
    # Over the whole sequence, and one frame at a time, it runs.
    out, _ = lstm(x, state=state, spatial_dim=time)
    assert set(out.dims) == {time, batch, lstm.out_dim}
    frame = rf.gather(x, indices=0, axis=time)
    y, new = lstm(frame, state=state, spatial_dim=rf.single_step_dim)
    assert set(y.dims) == set(new.h.dims) == {batch, lstm.out_dim}


def test_single_step_with_a_state_over_the_frames_steps_each_frame() -> None:
    # RETURNN's way to step every frame from its own state: the state has the dim.
    lstm, x, _, batch, time, _, out_dim = lstm_setup()
    zeros = np.zeros((B, T, H), np.float32)
    state = rf.LstmState(
        h=rf.convert_to_tensor(zeros, dims=[batch, time, out_dim]),
        c=rf.convert_to_tensor(zeros, dims=[batch, time, out_dim]),
    )
    y, new = lstm(x, state=state, spatial_dim=rf.single_step_dim)
    assert set(new.h.dims) == {batch, time, out_dim}
    first = lstm.default_initial_state(batch_dims=[batch])
    for t in range(T):
        one, _ = lstm(
            rf.gather(x, indices=t, axis=time), state=first, spatial_dim=rf.single_step_dim
        )
        np.testing.assert_allclose(
            rf.gather(y, indices=t, axis=time).copy_transpose([batch, out_dim]).numpy(),
            one.copy_transpose([batch, out_dim]).numpy(),
            rtol=1e-6,
            atol=1e-7,
        )


def test_single_step_still_broadcasts_a_state_over_static_dims() -> None:
    # A beam (static) dim the initial state lacks is broadcast, as before.
    lstm, x, _, batch, time, _, out_dim = lstm_setup()
    beam = rf.Dim(3, name="beam")
    frame = rf.expand_dim(rf.gather(x, indices=1, axis=time), dim=beam)
    y, new = lstm(
        frame, state=lstm.default_initial_state(batch_dims=[batch]), spatial_dim=rf.single_step_dim
    )
    assert set(y.dims) == set(new.c.dims) == {batch, beam, out_dim}


def test_returnn_refuses_a_state_without_the_sources_dims_too() -> None:
    torch = pytest.importorskip("torch", reason="RETURNN's rf.LSTM runs on its torch backend")
    pytest.importorskip("returnn", reason="RETURNN's own rf.LSTM is the reference here")
    import returnn.frontend as rrf
    from returnn.tensor import Dim, Tensor, single_step_dim

    rrf.select_backend_torch()
    batch = Dim(B, name="batch")
    lengths = torch.tensor(LENS, dtype=torch.int32)
    time = Dim(Tensor("lengths", [batch], dtype="int32", raw_tensor=lengths), name="time")
    in_dim, out_dim = Dim(F, name="in"), Dim(H, name="out")
    lstm = rrf.LSTM(in_dim, out_dim)
    x = Tensor("x", [batch, time, in_dim], dtype="float32", raw_tensor=torch.zeros(B, T, F))
    with pytest.raises(Exception):  # noqa: B017, PT011 (an assertion in its torch backend)
        lstm(x, state=lstm.default_initial_state(batch_dims=[batch]), spatial_dim=single_step_dim)
    state = lstm.default_initial_state(batch_dims=[batch, time])
    _, new = lstm(x, state=state, spatial_dim=single_step_dim)
    assert {d.name for d in new.h.dims} == {"batch", "time", "out"}


# -- item 3: max_seq_len --------------------------------------------------------------


@pytest.mark.parametrize("bad", [-3, np.int64(-1)])
def test_a_negative_max_seq_len_is_an_error_naming_it(bad) -> None:
    with pytest.raises(ValueError, match=rf"Loop loop: max_seq_len must be >= 0, got {int(bad)}"):
        rf.Loop(max_seq_len=bad)
    b = rf.Dim(2, name="b")
    with pytest.raises(ValueError, match=rf"rf.scan: max_seq_len must be >= 0, got {int(bad)}"):
        rf.scan(
            cond=lambda _x, s: s < 2,
            initial=rf.zeros([b], dtype="int32"),
            ys=None,
            body=lambda _x, s: (None, s + 1),
            max_seq_len=bad,
        )


@pytest.mark.parametrize("bad", [2.5, True, "3"])
def test_a_max_seq_len_that_is_no_count_is_a_type_error(bad) -> None:
    with pytest.raises(TypeError, match="max_seq_len must be an int >= 0 or a scalar int Tensor"):
        rf.Loop(max_seq_len=bad)


def test_a_negative_max_seq_len_tensor_is_an_error_when_the_loop_runs() -> None:
    limit = rf.convert_to_tensor(np.array(-2, np.int32), dims=[])
    loop = rf.Loop(max_seq_len=limit)
    match = r"max_seq_len must be >= 0, got -2 \(a Tensor\)"
    with pytest.raises(ValueError, match=match), loop:
        for _ in loop:
            pass


def test_max_seq_len_zero_and_positive_run_that_many_steps() -> None:
    for limit in (0, 3, rf.convert_to_tensor(np.array(2, np.int32), dims=[])):
        steps = 0
        with rf.Loop(max_seq_len=limit) as loop:
            for _ in loop:
                steps += 1
        assert steps == (limit if isinstance(limit, int) else 2)


# -- item 3: backward twice --------------------------------------------------------------


def quadratic():
    f = rf.Dim(3, name="f")
    p = rf.convert_to_tensor(np.array([1.0, 2.0, 3.0], np.float32), dims=[f], requires_grad=True)
    return p, rf.reduce_sum(p * p, axis=f)


def test_a_second_backward_from_the_same_loss_is_refused() -> None:
    p, loss = quadratic()
    loss.backward()
    np.testing.assert_array_equal(p.grad.numpy(), [2.0, 4.0, 6.0])
    with pytest.raises(RuntimeError, match=r"already ran backward.*retain_graph=True"):
        loss.backward()
    np.testing.assert_array_equal(p.grad.numpy(), [2.0, 4.0, 6.0])  # not doubled
    # The loss is still a tensor of its class, with its value, usable in ops.
    assert isinstance(loss, rf.Tensor)
    assert float(loss) == 14.0
    assert float(loss * 2) == 28.0


def test_retain_graph_allows_another_backward_whose_gradients_add_up() -> None:
    p, loss = quadratic()
    loss.backward(retain_graph=True)
    loss.backward()
    np.testing.assert_array_equal(p.grad.numpy(), [4.0, 8.0, 12.0])
    with pytest.raises(RuntimeError, match="already ran backward"):
        loss.backward(retain_graph=True)


def test_a_new_loss_each_step_backpropagates_as_before() -> None:
    p, _ = quadratic()
    f = p.dims[0]
    for _ in range(3):
        p.zero_grad()
        rf.reduce_sum(p * p, axis=f).backward()
        np.testing.assert_array_equal(p.grad.numpy(), [2.0, 4.0, 6.0])
    # A tensor computed from an earlier loss still backpropagates (the tape keeps the graph).
    p.zero_grad()
    _, loss = quadratic()
    loss.backward()
    (loss * 3).backward()


def test_pytorch_refuses_a_second_backward_too() -> None:
    torch = pytest.importorskip("torch", reason="compares with PyTorch's backward")
    p = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    loss = (torch.tanh(p) ** 2).sum()  # saved tensors, freed by backward
    loss.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()
    p.grad = None
    loss = (torch.tanh(p) ** 2).sum()
    loss.backward(retain_graph=True)
    loss.backward()
    f = rf.Dim(3, name="f")
    mine = rf.convert_to_tensor(np.array([1.0, 2.0, 3.0], np.float32), dims=[f], requires_grad=True)
    ours = rf.reduce_sum(rf.tanh(mine) ** 2, axis=f)
    ours.backward(retain_graph=True)
    ours.backward()
    np.testing.assert_allclose(mine.grad.numpy(), p.grad.numpy(), rtol=1e-5)


# -- item 4: ctc_loss of an impossible target ----------------------------------------------

C, BLANK = 5, 0
# Entry 0: 6 frames for 2 labels; entry 1: 2 frames for "3 3" (needs 3: a blank
# between the repeats); entry 2: 2 frames for 3 labels.
CTC_IN_LENS = [6, 2, 2]
CTC_TARGETS = [[1, 2], [3, 3], [1, 2, 3]]


class CtcSetup:
    def __init__(self) -> None:
        n = len(CTC_IN_LENS)
        self.batch, self.classes = rf.Dim(n, name="batch"), rf.Dim(C, name="classes")

        def lengths(v: list[int]) -> rf.Tensor:
            return rf.convert_to_tensor(np.array(v, np.int32), dims=[self.batch])

        self.time = rf.Dim(lengths(CTC_IN_LENS), name="time")
        self.labels = rf.Dim(lengths([len(t) for t in CTC_TARGETS]), name="labels")
        rng = np.random.default_rng(3)
        self.xv = rng.standard_normal((n, max(CTC_IN_LENS), C)).astype(np.float32)
        self.rv = rng.uniform(0.5, 1.5, n).astype(np.float32)
        width = max(len(t) for t in CTC_TARGETS)
        self.padded = np.array([t + [0] * (width - len(t)) for t in CTC_TARGETS], np.int32)

    def run(self, **kw) -> tuple[np.ndarray, np.ndarray]:
        """Losses and the logits' gradient of ``sum(finite losses * r)``."""
        logits = rf.convert_to_tensor(
            self.xv,
            dims=[self.batch, self.time, self.classes],
            feature_dim=self.classes,
            requires_grad=True,
        )
        targets = rf.convert_to_tensor(
            self.padded, dims=[self.batch, self.labels], sparse_dim=self.classes
        )
        loss = rf.ctc_loss(
            logits=logits,
            targets=targets,
            input_spatial_dim=self.time,
            targets_spatial_dim=self.labels,
            blank_index=BLANK,
            **kw,
        )
        assert loss.dims == (self.batch,)
        finite = rf.where(rf.is_finite(loss), loss, 0.0)
        r = rf.convert_to_tensor(self.rv, dims=[self.batch])
        rf.reduce_sum(finite * r, axis=[self.batch]).backward()
        return loss.numpy(), logits.grad.numpy()


def test_ctc_impossible_target_is_returnns_zero_or_inf_with_zero_gradient() -> None:
    s = CtcSetup()
    zeroed, zeroed_grad = s.run()
    kept, kept_grad = s.run(zero_infinity=False)
    assert np.isfinite(kept[0])
    assert kept[0] > 0
    assert np.isinf(kept[1:]).all()
    np.testing.assert_array_equal(zeroed, [kept[0], 0.0, 0.0])
    np.testing.assert_array_equal(zeroed_grad, kept_grad)
    assert not zeroed_grad[1:].any()
    assert zeroed_grad[0].any()
    assert "zero_infinity" in (rf.ctc_loss.__doc__ or "")


@pytest.mark.parametrize("zero_infinity", [True, False])
def test_ctc_zero_infinity_against_torch(zero_infinity: bool) -> None:
    torch = pytest.importorskip("torch", reason="compares with torch.nn.functional.ctc_loss")
    s = CtcSetup()
    mine, grad = s.run(zero_infinity=zero_infinity)
    x = torch.tensor(s.xv, requires_grad=True)
    loss = torch.nn.functional.ctc_loss(
        torch.log_softmax(x, dim=-1).transpose(0, 1),
        torch.from_numpy(s.padded).long(),
        torch.tensor(CTC_IN_LENS),
        torch.tensor([len(t) for t in CTC_TARGETS]),
        blank=BLANK,
        reduction="none",
        zero_infinity=zero_infinity,
    )
    (torch.where(torch.isfinite(loss), loss, 0.0) * torch.from_numpy(s.rv)).sum().backward()
    np.testing.assert_allclose(mine, loss.detach().numpy(), rtol=1e-5, atol=1e-5)
    mask = np.arange(max(CTC_IN_LENS))[None, :, None] < np.array(CTC_IN_LENS)[:, None, None]
    theirs = x.grad.numpy() * mask
    if not zero_infinity:
        # PyTorch's gradient of an infinite loss is NaN, even where it is not used
        # (0 * NaN); ours is 0, as with zero_infinity.
        assert np.isnan(theirs[1:]).any()
        theirs[1:] = 0.0
    np.testing.assert_allclose(grad, theirs, rtol=1e-4, atol=1e-5)


def test_ctc_default_is_returnns_value() -> None:
    torch = pytest.importorskip("torch", reason="RETURNN's rf.ctc_loss runs on its torch backend")
    pytest.importorskip("returnn", reason="RETURNN's own rf.ctc_loss is the reference here")
    import returnn.frontend as rrf
    from returnn.tensor import Dim, Tensor

    rrf.select_backend_torch()
    s = CtcSetup()
    mine, _ = s.run()
    batch, classes = Dim(len(CTC_IN_LENS), name="batch"), Dim(C, name="classes")

    def lengths(v: list[int]) -> Tensor:
        return Tensor("len", [batch], dtype="int32", raw_tensor=torch.tensor(v, dtype=torch.int32))

    time = Dim(lengths(CTC_IN_LENS), name="time")
    labels = Dim(lengths([len(t) for t in CTC_TARGETS]), name="labels")
    logits = Tensor("x", [batch, time, classes], dtype="float32", raw_tensor=torch.from_numpy(s.xv))
    logits.feature_dim = classes
    targets = Tensor(
        "t",
        [batch, labels],
        dtype="int32",
        sparse_dim=classes,
        raw_tensor=torch.from_numpy(s.padded),
    )
    for kw in ({}, {"use_native_op": True}):  # both of its PyTorch-backend paths
        theirs = rrf.ctc_loss(
            logits=logits,
            targets=targets,
            input_spatial_dim=time,
            targets_spatial_dim=labels,
            blank_index=BLANK,
            **kw,
        )
        theirs = theirs.copy_transpose([batch]).raw_tensor.detach().numpy()
        np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-5, err_msg=str(kw))


# -- item 12: rf.LSTM's dim order ------------------------------------------------------------


def test_lstm_over_time_returns_returnns_order_and_the_transpose_gives_the_loops() -> None:
    lstm, x, xv, batch, time, in_dim, out_dim = lstm_setup()
    state = lstm.default_initial_state(batch_dims=[batch])
    out, _ = lstm(x, state=state, spatial_dim=time)
    assert out.dims == (time, batch, out_dim)
    time_major = rf.convert_to_tensor(xv.transpose(1, 0, 2), dims=[time, batch, in_dim])
    assert lstm(time_major, state=state, spatial_dim=time)[0].dims == (time, batch, out_dim)
    beam = rf.Dim(2, name="beam")
    assert lstm(rf.expand_dim(x, dim=beam), state=state, spatial_dim=time)[0].dims == (
        time,
        batch,
        beam,
        out_dim,
    )
    # The documented way to a batch-major array is the Loop version's array.
    state_loop = lstm.default_initial_state(batch_dims=[batch])
    with rf.Loop() as loop:
        for _ in loop:
            y, state_loop = lstm(loop.unstack(x), state=state_loop, spatial_dim=rf.single_step_dim)
            ys = loop.stack(y)
    looped = ys.get()
    np.testing.assert_allclose(
        out.copy_transpose([batch, time, out_dim]).numpy(),
        looped.copy_transpose([batch, loop.axis, out_dim]).numpy(),
        rtol=1e-5,
        atol=1e-6,
    )


def test_lstm_dim_order_is_returnns() -> None:
    torch = pytest.importorskip("torch", reason="RETURNN's rf.LSTM runs on its torch backend")
    pytest.importorskip("returnn", reason="RETURNN's own rf.LSTM is the reference here")
    import returnn.frontend as rrf
    from returnn.tensor import Dim, Tensor

    rrf.select_backend_torch()
    batch, beam = Dim(B, name="batch"), Dim(2, name="beam")
    lengths = torch.tensor(LENS, dtype=torch.int32)
    time = Dim(Tensor("lengths", [batch], dtype="int32", raw_tensor=lengths), name="time")
    in_dim, out_dim = Dim(F, name="in"), Dim(H, name="out")
    theirs = rrf.LSTM(in_dim, out_dim)
    mine = rf.LSTM(rf.Dim(F, name="in"), rf.Dim(H, name="out"))
    my_batch, my_beam = rf.Dim(B, name="batch"), rf.Dim(2, name="beam")
    my_time = rf.Dim(rf.convert_to_tensor(np.array(LENS, np.int32), dims=[my_batch]), name="time")
    mine_dims = {"batch": my_batch, "beam": my_beam, "time": my_time, "in": mine.in_dim}
    theirs_dims = {"batch": batch, "beam": beam, "time": time, "in": in_dim}
    for order in (
        ["batch", "time", "in"],
        ["time", "batch", "in"],
        ["beam", "batch", "time", "in"],
    ):
        shape = [{"batch": B, "beam": 2, "time": T, "in": F}[n] for n in order]
        x = Tensor("x", [theirs_dims[n] for n in order], "float32", raw_tensor=torch.zeros(shape))
        names = [n for n in order if n not in ("time", "in")]
        state = theirs.default_initial_state(batch_dims=[theirs_dims[n] for n in names])
        out, _ = theirs(x, state=state, spatial_dim=time)
        my_x = rf.convert_to_tensor(np.zeros(shape, np.float32), dims=[mine_dims[n] for n in order])
        my_state = mine.default_initial_state(batch_dims=[mine_dims[n] for n in names])
        my_out, _ = mine(my_x, state=my_state, spatial_dim=my_time)
        assert [d.name for d in my_out.dims] == [d.name for d in out.dims], order
