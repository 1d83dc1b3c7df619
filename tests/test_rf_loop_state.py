"""``verjus.rf.loop.Loop`` / ``State`` (the inline loop design) against
hand-written step loops: values and gradients, finite differences through a
3-step loop with a State, each batch entry alone against the batch with lengths
{0, 1, T}, a Loop-written LSTM (a module keeping its own State) against
``rf.LSTM`` over the sequence, greedy decoding ended by ``loop.end``, nested
loops, and the errors users can hit."""

from __future__ import annotations

import numpy as np
import pytest

from verjus import rf
from verjus.rf.loop import Loop, LoopOutput, State

TOL = {"rtol": 1e-5, "atol": 1e-6}
T, F = 4, 3
LENS = [T, 0, 1]


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def leaf(value: np.ndarray, dims: list[rf.Dim]) -> rf.Tensor:
    return rf.convert_to_tensor(value, dims=dims, requires_grad=True)


def total(y: rf.Tensor) -> rf.Tensor:
    return rf.reduce_sum(y, axis=y.dims)


class Recurrence:
    """``s' = tanh(s * w + x_t)``, ``y_t = 2 * s' + x_t`` over a dynamic time
    dim with ``lens``; all inputs are leaves."""

    def __init__(self, lens: list[int], seed: int = 0) -> None:
        self.lens = lens
        self.batch = rf.Dim(len(lens), name="batch")
        self.f = rf.Dim(F, name="f")
        lengths = rf.convert_to_tensor(np.array(lens, np.int32), dims=[self.batch])
        self.time = rf.Dim(lengths, name="time")
        t_max = max(lens)
        self.xv = rng(seed).standard_normal((len(lens), t_max, F)).astype(np.float32)
        self.s0v = rng(seed + 1).standard_normal((len(lens), F)).astype(np.float32)
        self.wv = rng(seed + 2).standard_normal(F).astype(np.float32)
        self.x = leaf(self.xv, [self.batch, self.time, self.f])
        self.s0 = leaf(self.s0v, [self.batch, self.f])
        self.w = leaf(self.wv, [self.f])
        self.order = [self.batch, self.time, self.f]

    def loop(self) -> tuple[rf.Tensor, rf.Tensor, rf.Tensor]:
        """(ys over time, last y, final state) from a Loop with a State."""
        state = State(initial=self.s0)
        with Loop() as loop:
            for _ in loop:
                x_t = loop.unstack(self.x)
                new = rf.tanh(state.get() * self.w + x_t)
                state.assign(new)
                y = new * 2.0 + x_t
                ys = loop.stack(y)
                last = loop.last(y)
        assert loop.axis == self.time
        return ys.get(), last.get(), state.get()

    def numpy_reference(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ys = np.zeros_like(self.xv)
        last = np.zeros_like(self.s0v)
        final = self.s0v.copy()
        for b, n in enumerate(self.lens):
            s = self.s0v[b]
            for t in range(n):
                s = np.tanh(s * self.wv + self.xv[b, t])
                ys[b, t] = last[b] = 2 * s + self.xv[b, t]
            final[b] = s
        return ys, last, final


@pytest.mark.parametrize("lens", [LENS, [1], [T, T], [0, 0]])
def test_loop_with_state_matches_a_numpy_step_loop(lens: list[int]) -> None:
    r = Recurrence(lens)
    ys, last, final = r.loop()
    ref_ys, ref_last, ref_final = r.numpy_reference()
    np.testing.assert_allclose(ys.copy_transpose(r.order).numpy(), ref_ys, **TOL)
    np.testing.assert_allclose(last.copy_transpose([r.batch, r.f]).numpy(), ref_last, **TOL)
    np.testing.assert_allclose(final.copy_transpose([r.batch, r.f]).numpy(), ref_final, **TOL)


def test_loop_values_and_gradients_match_a_hand_written_rf_loop() -> None:
    r = Recurrence(LENS)
    ys, last, final = r.loop()
    # the same computation written by hand: frames, masks and where on the tape
    s = r.s0
    frames = []
    lengths = r.time.dyn_size_ext
    for t in range(T):
        x_t = rf.gather(r.x, indices=t, axis=r.time)
        new = rf.tanh(s * r.w + x_t)
        frames.append(new * 2.0 + x_t)
        s = rf.where(lengths > t, new, s, allow_broadcast_all_sources=True)
    seed = rng(9).standard_normal((3, T, F)).astype(np.float32)
    seed *= (np.arange(T)[None, :] < np.array(LENS)[:, None])[..., None]  # valid frames only
    seed_t = rf.convert_to_tensor(seed, dims=r.order)
    hand = sum(total(frames[t] * rf.gather(seed_t, indices=t, axis=r.time)) for t in range(T))
    hand_last = sum(
        total(rf.where(lengths - 1 == t, frames[t], 0.0, allow_broadcast_all_sources=True))
        for t in range(T)
    )
    loss_hand = hand + hand_last * 0.5 + total(s) * 3.0
    loss_loop = total(ys * seed_t) + total(last) * 0.5 + total(final) * 3.0
    np.testing.assert_allclose(loss_loop.numpy(), loss_hand.numpy(), rtol=1e-5)
    for var in (r.x, r.s0, r.w):
        np.testing.assert_allclose(
            rf.gradient(loss_loop, var).numpy(), rf.gradient(loss_hand, var).numpy(), **TOL
        )


def test_loop_gradient_through_a_3_step_state_matches_finite_differences() -> None:
    f, t = rf.Dim(2, name="f"), rf.Dim(3, name="t")
    xv = rng(3).standard_normal((3, 2)).astype(np.float64)
    wv = rng(4).standard_normal(2).astype(np.float64)
    s0v = rng(5).standard_normal(2).astype(np.float64)

    def run(w_value: np.ndarray) -> tuple[rf.Tensor, rf.Tensor]:
        w = leaf(w_value.astype(np.float32), [f])
        x = rf.convert_to_tensor(xv.astype(np.float32), dims=[t, f])
        state = State(initial=rf.convert_to_tensor(s0v.astype(np.float32), dims=[f]))
        with Loop(axis=t) as loop:
            for _ in loop:
                state.assign(rf.tanh(state.get() * w + loop.unstack(x)))
        return total(state.get() * state.get()), w

    loss, w = run(wv)
    grad = rf.gradient(loss, w).numpy()
    eps = 1e-2
    numeric = np.zeros(2)
    for k in range(2):
        step = np.zeros(2)
        step[k] = eps
        numeric[k] = (float(run(wv + step)[0].numpy()) - float(run(wv - step)[0].numpy())) / (
            2 * eps
        )
    np.testing.assert_allclose(grad, numeric, rtol=2e-2, atol=2e-3)


def test_batched_loop_equals_each_entry_alone_values_and_gradients() -> None:
    batched = Recurrence(LENS)
    ys, last, final = batched.loop()
    seed = rng(11).standard_normal((3, T, F)).astype(np.float32)
    loss = total(ys * rf.convert_to_tensor(seed, dims=batched.order)) + total(last) + total(final)
    grads = {name: rf.gradient(loss, getattr(batched, name)).numpy() for name in ("x", "s0", "w")}
    got_ys = ys.copy_transpose(batched.order).numpy()
    got_last = last.copy_transpose([batched.batch, batched.f]).numpy()
    for b, n in enumerate(LENS):
        alone = Recurrence([n])
        alone.x = leaf(batched.xv[b : b + 1, : max(n, 0)], alone.order)
        alone.s0 = leaf(batched.s0v[b : b + 1], [alone.batch, alone.f])
        alone.w = leaf(batched.wv, [alone.f])
        a_ys, a_last, a_final = alone.loop()
        np.testing.assert_allclose(
            got_ys[b, :n], a_ys.copy_transpose(alone.order).numpy()[0], **TOL
        )
        np.testing.assert_array_equal(got_ys[b, n:], 0.0)
        np.testing.assert_allclose(
            got_last[b], a_last.copy_transpose([alone.batch, alone.f]).numpy()[0], **TOL
        )
        a_loss = (
            total(a_ys * rf.convert_to_tensor(seed[b : b + 1, :n], dims=alone.order))
            + total(a_last)
            + total(a_final)
        )
        np.testing.assert_allclose(
            grads["x"][b, :n], rf.gradient(a_loss, alone.x).numpy()[0], **TOL
        )
        np.testing.assert_array_equal(grads["x"][b, n:], 0.0)
        np.testing.assert_allclose(grads["s0"][b], rf.gradient(a_loss, alone.s0).numpy()[0], **TOL)


class LstmStep(rf.Module):
    """An LSTM layer that keeps its (h, c) in ``State`` s: called once per
    step in a Loop body, its caller passes only the frame."""

    def __init__(self, lstm: rf.LSTM, h0: rf.Tensor, c0: rf.Tensor) -> None:
        super().__init__()
        self.lstm = lstm
        self.h = State(initial=h0, name="h")
        self.c = State(initial=c0, name="c")

    def __call__(self, x_t: rf.Tensor) -> rf.Tensor:
        state = rf.LstmState(h=self.h.get(), c=self.c.get())
        out, new = self.lstm(x_t, state=state, spatial_dim=rf.single_step_dim)
        self.h.assign(new.h)
        self.c.assign(new.c)
        return out


def test_loop_written_lstm_equals_rf_lstm_over_the_sequence() -> None:
    batch = rf.Dim(3, name="batch")
    in_dim, out_dim = rf.Dim(F, name="in"), rf.Dim(5, name="out")
    lengths = rf.convert_to_tensor(np.array(LENS, np.int32), dims=[batch])
    time = rf.Dim(lengths, name="time")
    rf.set_random_seed(4)
    lstm = rf.LSTM(in_dim, out_dim)
    lstm.bias.assign(rng(1).uniform(-0.5, 0.5, 20).astype(np.float32))
    x = leaf(rng(2).standard_normal((3, T, F)).astype(np.float32), [batch, time, in_dim])
    h0 = leaf(rng(3).uniform(-1, 1, (3, 5)).astype(np.float32), [batch, out_dim])
    c0 = leaf(rng(4).uniform(-1, 1, (3, 5)).astype(np.float32), [batch, out_dim])
    fused, fused_state = lstm(x, state=rf.LstmState(h=h0, c=c0), spatial_dim=time)
    step = LstmStep(lstm, h0, c0)
    with Loop(axis=time) as loop:
        for _ in loop:
            out = loop.stack(step(loop.unstack(x)))
    stepped = out.get()
    order = [batch, time, out_dim]
    np.testing.assert_allclose(
        stepped.copy_transpose(order).numpy(), fused.copy_transpose(order).numpy(), **TOL
    )
    for mine, theirs in ((step.h.get(), fused_state.h), (step.c.get(), fused_state.c)):
        np.testing.assert_allclose(
            mine.copy_transpose([batch, out_dim]).numpy(),
            theirs.copy_transpose([batch, out_dim]).numpy(),
            **TOL,
        )
    seed = rf.convert_to_tensor(rng(5).standard_normal((3, T, 5)).astype(np.float32), dims=order)
    loss_fused = total(fused * seed) + total(fused_state.c)
    loss_loop = total(stepped * seed) + total(step.c.get())
    for var in (x, h0, c0, lstm.ff_weight, lstm.rec_weight, lstm.bias):
        np.testing.assert_allclose(
            rf.gradient(loss_loop, var).numpy(),
            rf.gradient(loss_fused, var).numpy(),
            rtol=1e-4,
            atol=1e-5,
        )


def greedy(starts: list[float], eos: int, **options: object) -> tuple:
    """A toy greedy decoder: the token is the argmax of ``-(v - s)^2`` over the
    vocabulary (so ``round(s)`` clipped to it), ``s`` a State counting up from
    each entry's start; the loop ends an entry at ``eos``."""
    include_eos = options.pop("include_eos")
    batch, vocab = rf.Dim(len(starts), name="batch"), rf.Dim(eos + 1, name="vocab")
    s0 = leaf(np.array(starts, np.float32), [batch])
    counter = State(initial=s0)
    values = rf.cast(rf.range_over_dim(vocab), "float32")
    with Loop(**options) as loop:
        for _ in loop:
            s = counter.get()
            diff = rf.combine(values, "-", s, allow_broadcast_all_sources=True)
            token = rf.reduce_argmax(-(diff * diff), axis=vocab)
            tokens = loop.stack(token)
            scores = loop.stack(s * 1.0)
            loop.end(token == eos, include_eos=include_eos)
            counter.assign(s + 1.0)
    return loop.axis, tokens.get(), scores.get(), counter.get(), s0, batch


def greedy_reference(starts: list[float], eos: int, include_eos: bool, max_len: int | None):
    lengths, tokens, finals = [], [], []
    for start in starts:
        seq, s = [], start
        while max_len is None or len(seq) < max_len:
            token = min(round(s), eos)
            if token == eos and not include_eos:
                break
            seq.append(token)
            s += 1.0
            if token == eos:
                break
        lengths.append(len(seq))
        tokens.append(seq)
        finals.append(start + len(seq))
    return lengths, tokens, finals


@pytest.mark.parametrize(
    "options",
    [{"include_eos": True}, {"include_eos": False}, {"include_eos": True, "max_seq_len": 2}],
)
def test_greedy_decoding_with_loop_end_gives_each_entry_its_length(options: dict) -> None:
    starts, eos = [1.0, 3.0, 0.0, 2.0], 3
    max_len = options.get("max_seq_len")
    dim, tokens, scores, final, s0, batch = greedy(starts, eos, **dict(options))
    lengths, ref_tokens, ref_finals = greedy_reference(starts, eos, options["include_eos"], max_len)
    np.testing.assert_array_equal(dim.dyn_size_ext.numpy(), lengths)
    assert tokens.dtype == "int64"
    got = tokens.copy_transpose([batch, dim]).numpy()
    for b, seq in enumerate(ref_tokens):
        np.testing.assert_array_equal(got[b, : len(seq)], seq)
        np.testing.assert_array_equal(got[b, len(seq) :], 0)
    np.testing.assert_allclose(final.numpy(), ref_finals)
    # d sum(scores) / d s0: each entry's frames each hold s0 + k
    np.testing.assert_allclose(rf.gradient(total(scores), s0).numpy(), lengths)


def test_nested_loops_with_a_sub_module_state() -> None:
    batch, f = rf.Dim(2, name="batch"), rf.Dim(2, name="f")
    outer = rf.Dim(2, name="outer")
    lengths = rf.convert_to_tensor(np.array([3, 1], np.int32), dims=[batch])
    inner = rf.Dim(lengths, name="inner")
    xv = rng(6).standard_normal((2, 2, 3, 2)).astype(np.float32)
    x = leaf(xv, [outer, batch, inner, f])
    acc = State(initial=rf.convert_to_tensor(np.zeros((2, 2), np.float32), dims=[batch, f]))
    steps = State(initial=rf.convert_to_tensor(0.0))
    with Loop(axis=outer) as out_loop:
        for _ in out_loop:
            x_o = out_loop.unstack(x)
            with Loop(axis=inner) as in_loop:
                for _ in in_loop:
                    acc.assign(acc.get() * 0.5 + in_loop.unstack(x_o))
            steps.assign(steps.get() + 1.0)
            per_outer = out_loop.stack(acc.get())
    ref = np.zeros((2, 2))
    ref_frames = []
    for o in range(2):
        for b, n in enumerate([3, 1]):
            for t in range(n):
                ref[b] = ref[b] * 0.5 + xv[o, b, t]
        ref_frames.append(ref.copy())
    np.testing.assert_allclose(acc.get().copy_transpose([batch, f]).numpy(), ref, **TOL)
    np.testing.assert_allclose(
        per_outer.get().copy_transpose([outer, batch, f]).numpy(), ref_frames, **TOL
    )
    assert float(steps.get().numpy()) == 2.0
    grad = rf.gradient(total(acc.get()), x).copy_transpose([outer, batch, inner, f]).numpy()
    np.testing.assert_allclose(grad[1, 0, :, 0], [0.25, 0.5, 1.0], **TOL)
    np.testing.assert_allclose(grad[0, 0, :, 0], [0.25 / 8, 0.5 / 8, 1.0 / 8], **TOL)
    np.testing.assert_array_equal(grad[:, 1, 1:], 0.0)


def test_a_state_not_assigned_in_a_step_keeps_its_value() -> None:
    t = rf.Dim(4, name="t")
    x = rf.convert_to_tensor(np.arange(4, dtype=np.float32), dims=[t])
    state = State(initial=rf.convert_to_tensor(10.0))
    with Loop(axis=t) as loop:
        for i in loop:
            if i % 2 == 0:
                state.assign(state.get() + loop.unstack(x))
            seen = loop.stack(state.get() * 1.0)
    np.testing.assert_allclose(seen.get().numpy(), [10.0, 10.0, 12.0, 12.0])
    np.testing.assert_allclose(state.get().numpy(), 12.0)


def test_state_without_initial_value_and_dims_form() -> None:
    batch, f = rf.Dim(2, name="batch"), rf.Dim(3, name="f")
    zeros = State([batch, f])
    np.testing.assert_array_equal(zeros.get().numpy(), np.zeros((2, 3)))
    ones = State([f], initial=1, dtype="int32")
    assert ones.get().dtype == "int32"
    later = State()
    later.assign(rf.convert_to_tensor(2.0))  # outside a loop: right away
    assert float(later.get().numpy()) == 2.0


T3 = rf.Dim(3, name="t")
X3 = rf.convert_to_tensor(np.ones(3, np.float32), dims=[T3])
ONE = rf.convert_to_tensor(1.0)


def run_loop(body, axis: rf.Dim | None = T3) -> None:
    """Runs ``body(loop)`` in every step of a Loop over ``axis``."""
    with Loop(axis=axis) as loop:
        for _ in loop:
            body(loop)


def stack_outside(loop: Loop) -> None:
    loop.stack(ONE)


def stack_unstack_source(loop: Loop) -> None:
    loop.unstack(X3)
    loop.stack(X3)


TWICE = State(initial=ONE, name="twice")


def assign_twice(loop: Loop) -> None:
    TWICE.assign(ONE + 1.0)
    TWICE.assign(ONE + 2.0)


def read_unassigned(loop: Loop) -> None:
    State(name="h").get()


def unstack_other_lengths(loop: Loop) -> None:
    pair = rf.Dim(2, name="pair")
    other = rf.Dim(rf.convert_to_tensor(np.array([2, 3], np.int32), dims=[pair]), name="other")
    loop.unstack(rf.convert_to_tensor(np.zeros((2, 3), np.float32), dims=[pair, other]), axis=other)


def end_with_axis(loop: Loop) -> None:
    loop.end(loop.unstack(X3) > 0.0)


def get_in_the_loop(loop: Loop) -> None:
    loop.stack(loop.unstack(X3) * 2.0).get()


def same_lengths_time() -> rf.Dim:
    pair = rf.Dim(2, name="pair")
    return rf.Dim(rf.convert_to_tensor(np.array([3, 3], np.int32), dims=[pair]), name="time")


@pytest.mark.parametrize(
    ("body", "axis", "error", "match"),
    [
        (stack_outside, T3, ValueError, "same tensor in every step is a value from outside"),
        (stack_unstack_source, T3, ValueError, r"the source of loop\.unstack, from outside"),
        (assign_twice, T3, RuntimeError, "State twice: assigned twice in step 0 of the loop"),
        (read_unassigned, T3, RuntimeError, "read in a loop step before it was ever assigned"),
        (
            unstack_other_lengths,
            same_lengths_time(),
            ValueError,
            "dims of different lengths: the loop's axis",
        ),
        (end_with_axis, T3, RuntimeError, "end is for a loop without an input dim"),
        (get_in_the_loop, T3, RuntimeError, "result is there after the loop .* has finished"),
        (lambda loop: None, None, RuntimeError, r"no loop\.end or max_seq_len to end it"),
    ],
)
def test_loop_errors_say_what_is_wrong(body, axis, error, match) -> None:
    with pytest.raises(error, match=match):
        run_loop(body, axis)


def leave_early() -> None:
    with Loop(axis=T3) as loop:
        for _ in loop:
            break


def unstack_outside_the_body() -> None:
    with Loop(axis=T3) as loop:
        loop.unstack(X3)


def test_loop_errors_outside_the_steps() -> None:
    with pytest.raises(RuntimeError, match="read outside any loop before it was assigned"):
        State(name="h").get()
    with pytest.raises(RuntimeError, match="inside the `with` block, to its end"):
        leave_early()
    with pytest.raises(RuntimeError, match="call it in the body, inside `for _ in loop:`"):
        unstack_outside_the_body()


def test_loop_output_is_one_object_for_all_steps() -> None:
    t = rf.Dim(3, name="t")
    x = rf.convert_to_tensor(np.arange(3, dtype=np.float32), dims=[t])
    seen = []
    with Loop(axis=t) as loop:
        for _ in loop:
            seen.append(loop.stack(loop.unstack(x) + 1.0))
    assert all(s is seen[0] for s in seen)
    assert isinstance(seen[0], LoopOutput)
    np.testing.assert_allclose(seen[0].get().numpy(), [1.0, 2.0, 3.0])
    assert rf.Loop is Loop


def test_a_state_holding_an_lstm_state_over_the_unsized_batch_dim() -> None:
    """The README's example: one State with an ``rf.LstmState`` from
    ``default_initial_state`` (over ``[out]`` only: ``batch_dim`` has no size),
    lengths {T, 0, 1}; equal to ``rf.LSTM`` over the sequence."""
    in_dim, out_dim = rf.Dim(F, name="in"), rf.Dim(5, name="out")
    lengths = rf.convert_to_tensor(np.array(LENS, np.int32), dims=[rf.batch_dim])
    time = rf.Dim(lengths, name="time")
    rf.set_random_seed(5)
    lstm = rf.LSTM(in_dim, out_dim)
    x = leaf(rng(7).standard_normal((3, T, F)).astype(np.float32), [rf.batch_dim, time, in_dim])
    initial = lstm.default_initial_state(batch_dims=[rf.batch_dim])
    fused, fused_state = lstm(x, state=initial, spatial_dim=time)
    state = State(initial=initial)
    with Loop() as loop:
        for _ in loop:
            y, new = lstm(loop.unstack(x), state=state.get(), spatial_dim=rf.single_step_dim)
            state.assign(new)
            ys = loop.stack(y)
    assert isinstance(state.get(), rf.LstmState)
    order = [rf.batch_dim, time, out_dim]
    np.testing.assert_allclose(
        ys.get().copy_transpose(order).numpy(), fused.copy_transpose(order).numpy(), **TOL
    )
    for name in ("h", "c"):
        np.testing.assert_allclose(
            state.get()[name].copy_transpose([rf.batch_dim, out_dim]).numpy(),
            fused_state[name].copy_transpose([rf.batch_dim, out_dim]).numpy(),
            **TOL,
        )
    loss_loop, loss_fused = (
        total(ys.get()) + total(state.get().c),
        total(fused) + total(fused_state.c),
    )
    for var in (x, lstm.rec_weight):
        np.testing.assert_allclose(
            rf.gradient(loss_loop, var).numpy(),
            rf.gradient(loss_fused, var).numpy(),
            rtol=1e-4,
            atol=1e-5,
        )
    with pytest.raises(ValueError, match="State state: assign: at the top, expected a LstmState"):
        State(initial=initial).assign(rf.convert_to_tensor(1.0))


def test_assigning_a_value_over_other_dims_is_an_error() -> None:
    """A value without the state's dims would be broadcast with the old value."""
    feat, other = rf.Dim(3, name="feat"), rf.Dim(2, name="o")
    lengths = rf.convert_to_tensor(np.array([2, 1], np.int32), dims=[rf.batch_dim])
    time = rf.Dim(lengths, name="time")
    x = rf.convert_to_tensor(np.ones((2, 2, 3), np.float32), dims=[rf.batch_dim, time, feat])
    state = State(initial=rf.zeros([feat]))
    with Loop() as loop:
        for _ in loop:
            loop.unstack(x)
            message = r"a value over \['o'\], the state is over \[.*'feat'\]"
            with pytest.raises(ValueError, match=message):
                state.assign(rf.zeros([other]))
            state.assign(rf.zeros([rf.batch_dim, feat]))  # more dims: broadcast, fine
