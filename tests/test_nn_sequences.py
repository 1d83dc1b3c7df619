"""Sequence networks from Python: the nn builder's sequence layers, forward on
padded and ragged batches, stepping with carried state, Trainer.fit on
sequences, the Runner on sequences, and bad input named clearly."""

import threading

import numpy as np
import pytest

import verjus
from verjus import nn

VOCAB = 7


def char_net(seed=0):
    return verjus.Network.from_def(
        nn.Sequential(
            nn.Embedding(VOCAB, 5, name="embed"),
            nn.LSTM(6, name="rnn"),
            nn.Linear(VOCAB, name="fc"),
            input_shape=(None,),
            input_name="chars",
            input_dtype="int32",
        ),
        seed=seed,
    )


def test_builder_writes_version_3_sequence_definition():
    d = nn.Sequential(
        nn.LSTM(4, num_layers=2, dropout=0.1, bidirectional=True),
        nn.MeanOverTime(),
        input_shape=(None, 3),
    ).to_def()
    assert d["format_version"] == 3
    assert d["inputs"] == [{"name": "input", "shape": [None, 3]}]
    assert d["layers"][0] == {
        "name": "lstm_1",
        "type": "LSTM",
        "hidden": 4,
        "num_layers": 2,
        "dropout": 0.1,
        "bidirectional": True,
    }
    net = verjus.Network.from_def(d)
    assert net.outputs[0][1] == (8,)


def test_forward_padded_equals_each_alone_and_is_batch_major():
    net = char_net()
    seqs = [np.array([1, 2, 3, 4]), np.array([5, 6])]
    padded = net.forward(seqs)
    assert padded.shape == (2, 4, VOCAB)
    for b, s in enumerate(seqs):
        alone = net.forward(s[None, :])
        np.testing.assert_allclose(padded[b, : len(s)], alone[0], rtol=1e-5, atol=1e-6)
    assert np.all(padded[1, 2:] == 0)


def test_stepper_matches_whole_sequence_and_state_round_trips():
    net = char_net()
    ids = np.array([[1, 4, 2, 6, 3]], dtype=np.int32)
    whole = net.forward(ids)[0]
    stepper = net.stepper()
    steps = [stepper.step(ids[:, t])[0] for t in range(5)]
    np.testing.assert_allclose(np.stack(steps), whole, rtol=1e-5, atol=1e-6)
    state = stepper.state()
    assert sorted(state) == ["rnn.c_l0", "rnn.h_l0"]
    assert state["rnn.h_l0"].shape == (1, 6)
    nxt = stepper.step(np.array([2]))
    stepper.reset_state()
    assert not np.allclose(stepper.step(np.array([2])), nxt)
    stepper.set_state(state)
    np.testing.assert_allclose(stepper.step(np.array([2])), nxt, rtol=1e-6)
    with pytest.raises(ValueError, match=r"rnn\.h_l0"):
        stepper.set_state({"rnn.h_l0": np.zeros((2, 6), np.float32)})


def test_fit_on_ragged_sequences_learns_and_prints_bpc(capsys):
    net = char_net()
    rng = np.random.default_rng(0)
    # The next token is always (token + 1) mod VOCAB: learnable.
    starts = rng.integers(0, VOCAB, 64)
    lens = rng.integers(2, 9, 64)
    xs = [(s + np.arange(n)) % VOCAB for s, n in zip(starts, lens, strict=True)]
    ys = [(x + 1) % VOCAB for x in xs]
    trainer = verjus.Trainer(net, verjus.optim.Adam(lr=0.05, clip_norm=1.0))
    history = trainer.fit(xs, ys, epochs=6, batch_size=16, validation_data=(xs, ys), progress=False)
    bpc = history["val_bpc"]
    assert len(bpc) == 6
    assert bpc[-1] < 0.5 * bpc[0]
    assert "val bpc" in capsys.readouterr().out


def test_fit_on_text_batcher(tmp_path):
    texts = ["hello world", "hello there", "a b c", "world hello"] * 4
    vocab = verjus.data.CharVocab.build(texts)
    net = verjus.Network.from_def(
        nn.Sequential(
            nn.Embedding(vocab.size, 8), nn.LSTM(8), nn.Linear(vocab.size),
            input_shape=(None,), input_dtype="int32",
        )
    )  # fmt: skip
    trainer = verjus.Trainer(net, verjus.optim.Adam(lr=0.02))
    batches = verjus.data.TextBatcher(texts, vocab, batch_size=4)
    history = trainer.fit(batches, epochs=2, validation_data=batches, verbose=0, progress=False)
    assert history["val_bpc"][1] < history["val_bpc"][0]


def test_fit_row_lstm_classifier_reports_accuracy():
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 64)
    x = rng.normal(size=(64, 5, 3)).astype(np.float32)
    x[:, :, 0] += np.where(y == 1, 2.0, -2.0)[:, None]
    net = verjus.Network.from_def(
        nn.Sequential(nn.LSTM(8), nn.LastFrame(), nn.Linear(2), input_shape=(None, 3))
    )
    trainer = verjus.Trainer(net, verjus.optim.Adam(lr=0.05))
    history = trainer.fit(x, y, epochs=5, batch_size=16, validation_data=(x, y), verbose=0)
    assert history["val_accuracy"][-1] > 0.9


def test_bad_lengths_name_the_example():
    net = char_net()
    x = np.ones((2, 3), np.int32)
    with pytest.raises(ValueError, match=r"example 1 has length 5.*padded to 3"):
        net.forward(x, lengths=[3, 5])


def test_token_outside_vocabulary_names_example_and_value():
    net = char_net()
    x = np.array([[1, 2, 3], [1, VOCAB + 2, 0]], np.int32)
    with pytest.raises(ValueError, match=rf"example 1, frame 1: token id {VOCAB + 2}"):
        net.forward(x)
    with pytest.raises(ValueError, match="does not fit int32"):
        net.forward([np.array([2**40])])


def test_empty_sequence_where_the_loss_needs_a_frame():
    net = char_net()
    trainer = verjus.Trainer(net, verjus.optim.Adam(lr=1e-3))
    xs = [np.array([1, 2]), np.array([], dtype=np.int64)]
    ys = [np.array([2, 3]), np.array([], dtype=np.int64)]
    with pytest.raises(ValueError, match=r"example 1 has length 0.*needs at least one frame"):
        trainer.fit(xs, ys, epochs=1, verbose=0)


def test_non_utf8_text_file_is_named(tmp_path):
    (tmp_path / "good").write_text("one\n%\ntwo\n")
    (tmp_path / "bad").write_bytes(b"caf\xe9\n%\n")
    with pytest.raises(OSError, match="bad"):
        verjus.data.fortunes(tmp_path)


def test_runner_serves_sequences_from_threads_and_refuses_other_vocabulary():
    net = char_net()
    runner = verjus.Runner(net)
    rng = np.random.default_rng(2)
    requests = [rng.integers(0, VOCAB, (1, n)).astype(np.int32) for n in range(1, 9)]
    expected = [net.forward(r) for r in requests]
    got = [None] * len(requests)

    def serve(i):
        got[i] = runner.infer(requests[i])

    threads = [threading.Thread(target=serve, args=(i,)) for i in range(len(requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    assert runner.swap(char_net(seed=1)) == 1
    other = verjus.Network.from_def(
        nn.Sequential(
            nn.Embedding(VOCAB + 3, 5, name="embed"), nn.LSTM(6, name="rnn"),
            nn.Linear(VOCAB, name="fc"), input_shape=(None,), input_name="chars",
            input_dtype="int32",
        )
    )  # fmt: skip
    with pytest.raises(ValueError, match="vocabulary"):
        runner.swap(other)
    assert runner.generation == 1


def test_runner_returns_zeros_past_each_length():
    """Frames past an example's length come back as 0 from the Runner (its last
    layer, a Linear, would otherwise leave its bias there), and the real frames
    equal the example run alone."""
    net = char_net()
    runner = verjus.Runner(net)
    x = np.array([[1, 2, 3, 4], [5, 6, 0, 0]], np.int32)
    out = runner.infer(x, lengths=[4, 2])
    assert out.shape == (2, 4, VOCAB)
    assert np.all(out[1, 2:] == 0)
    np.testing.assert_allclose(out[1, :2], net.forward(x[1:, :2])[0], rtol=1e-5, atol=1e-6)
    assert np.any(out[0, 3] != 0)
