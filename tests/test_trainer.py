"""``verjus.Trainer`` and ``verjus.optim``: steps, evaluation, fit, callbacks, the GIL."""

import re
import threading
import time

import numpy as np
import pytest
from conftest import NETS

import verjus
from verjus import nn, optim


def blobs(n: int = 256, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Three Gaussian blobs in 2-D: an easy classification problem."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, size=n)
    centers = np.array([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]], np.float32)
    x = centers[y] + 0.4 * rng.standard_normal((n, 2)).astype(np.float32)
    return x.astype(np.float32), y.astype(np.int64)


def mlp() -> verjus.Network:
    return verjus.Network.from_def(
        nn.Sequential(nn.Linear(16), nn.ReLU(), nn.Linear(3), input_shape=(2,)), seed=1
    )


def test_train_minibatch_returns_loss_and_output_and_learns():
    x, y = blobs()
    trainer = verjus.Trainer(mlp(), optim.Adam(lr=0.05))
    first, out = trainer.train_minibatch(x, y)
    assert out.shape == (256, 3)
    assert np.isfinite(first)
    for _ in range(50):
        loss, _ = trainer.train_minibatch(x, y)
    assert loss < 0.3 * first
    assert trainer.step == 51


def test_train_minibatch_can_skip_the_output_copy():
    x, y = blobs()
    with_output = verjus.Trainer(mlp(), optim.Adam(lr=0.05))
    loss_only = verjus.Trainer(mlp(), optim.Adam(lr=0.05))
    for _ in range(3):
        loss, out = with_output.train_minibatch(x, y)
        same, none = loss_only.train_minibatch(x, y, return_output=False)
        assert out.shape == (256, 3)
        assert none is None
        assert same == loss
    for name, value in with_output.network.state_dict().items():
        np.testing.assert_array_equal(value, loss_only.network.state_dict()[name])


def test_the_trainer_trains_the_network_it_was_given():
    x, y = blobs()
    net = mlp()
    before = net.forward(x)
    trainer = verjus.Trainer(net, optim.SGD(lr=0.5, momentum=0.9))
    for _ in range(20):
        trainer.train_minibatch(x, y)
    after = net.forward(x)
    assert not np.allclose(before, after)
    assert np.mean(np.argmax(after, axis=1) == y) > 0.9
    assert trainer.network is net


def test_evaluate_reports_loss_and_accuracy():
    x, y = blobs()
    trainer = verjus.Trainer(mlp(), optim.Adam(lr=0.05))
    for _ in range(40):
        trainer.train_minibatch(x, y)
    m = trainer.evaluate(x, y, batch_size=100)
    assert 0.9 < m.accuracy <= 1.0
    logits = trainer.network.forward(x)
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    assert m.loss == pytest.approx(-log_p[np.arange(len(y)), y].mean(), rel=1e-4)
    assert m.as_dict("val_") == {"val_loss": m.loss, "val_accuracy": m.accuracy}


def test_fit_returns_a_history_and_reaches_high_accuracy():
    x, y = blobs(512)
    xv, yv = blobs(128, seed=9)
    trainer = verjus.Trainer(mlp(), optim.Adam(lr=0.02))
    history = trainer.fit(x, y, epochs=4, batch_size=32, validation_data=(xv, yv), progress=False)
    assert len(history) == 4
    assert [e["epoch"] for e in history] == [1, 2, 3, 4]
    assert history["train_loss"][-1] < history["train_loss"][0]
    assert history["val_accuracy"][-1] > 0.95
    assert set(history.epochs[0]) == {
        "epoch", "train_loss", "seconds", "examples_per_second", "val_loss", "val_accuracy"
    }  # fmt: skip
    assert trainer.step == 4 * 16


EPOCH_LINE = (
    r"epoch (\d)/(\d): train loss (\d+\.\d{4}), val loss (\d+\.\d{4}), "
    r"val accuracy (\d\.\d{4}) \(\d+\.\d s, [\d,]+ examples/s\)"
)


def test_fit_prints_one_line_per_epoch_unless_verbose_is_0(capsys):
    x, y = blobs(128)
    xv, yv = blobs(64, seed=9)
    trainer = verjus.Trainer(mlp(), optim.Adam(lr=0.02))
    history = trainer.fit(x, y, epochs=2, batch_size=32, validation_data=(xv, yv), progress=False)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    for line, epoch in zip(lines, history, strict=True):
        found = re.fullmatch(EPOCH_LINE, line)
        assert found is not None, line
        assert found.group(1, 2) == (str(epoch["epoch"]), "2")
        assert float(found.group(3)) == pytest.approx(epoch["train_loss"], abs=5e-5)
        assert float(found.group(4)) == pytest.approx(epoch["val_loss"], abs=5e-5)
        assert float(found.group(5)) == pytest.approx(epoch["val_accuracy"], abs=5e-5)
    # Without validation data, the training loss alone.
    trainer.fit(x, y, epochs=1, batch_size=32)
    line = capsys.readouterr().out.strip()
    assert re.fullmatch(r"epoch 1/1: train loss \d+\.\d{4} \(.* examples/s\)", line), line
    trainer.fit(x, y, epochs=2, batch_size=32, validation_data=(xv, yv), verbose=0)
    assert capsys.readouterr().out == ""


def test_fit_with_a_short_last_batch_and_without_shuffling():
    x, y = blobs(100)
    trainer = verjus.Trainer(mlp(), optim.SGD(lr=0.1))
    seen = []

    class Count(verjus.Callback):
        def on_step_end(self, trainer, examples, loss):
            seen.append(examples)

    trainer.fit(x, y, epochs=1, batch_size=32, shuffle=False, progress=False, callbacks=[Count()])
    assert seen == [32, 32, 32, 4]


def test_same_seed_same_training():
    x, y = blobs()
    results = []
    for _ in range(2):
        trainer = verjus.Trainer(mlp(), optim.Adam(lr=0.01))
        trainer.fit(x, y, epochs=2, batch_size=16, seed=7, progress=False)
        results.append(trainer.network.state_dict())
    for name, value in results[0].items():
        np.testing.assert_array_equal(value, results[1][name])


def test_callbacks_see_each_epoch_and_can_stop_training():
    x, y = blobs()
    trainer = verjus.Trainer(mlp(), optim.Adam(lr=0.01))
    calls = []

    def stop_after_two(trainer, metrics):
        calls.append(metrics["epoch"])
        if metrics["epoch"] == 2:
            trainer.stop_training = True

    history = trainer.fit(x, y, epochs=5, batch_size=64, progress=False, callbacks=[stop_after_two])
    assert calls == [1, 2]
    assert len(history) == 2


def test_an_exception_in_a_callback_stops_fit():
    x, y = blobs()
    trainer = verjus.Trainer(mlp(), optim.Adam(lr=0.01))

    class Boom(verjus.Callback):
        def on_step_end(self, trainer, examples, loss):
            raise KeyError("stop here")

    with pytest.raises(KeyError, match="stop here"):
        trainer.fit(x, y, epochs=1, batch_size=64, progress=False, callbacks=[Boom()])
    assert trainer.step == 1


def test_fit_releases_the_gil():
    """Another Python thread keeps running while ``fit`` computes."""
    rng = np.random.default_rng(0)
    # 8192 images: 2048 took under 50 ms a step on a fast VM, too quick to tell.
    x = rng.random((8192, 1, 28, 28), dtype=np.float32)
    y = rng.integers(0, 10, size=8192)
    trainer = verjus.Trainer(verjus.Network.from_def(NETS / "fashion_mlp.json"), optim.Adam())
    ticks = 0
    running = threading.Event()
    done = threading.Event()

    def tick():
        nonlocal ticks
        running.set()
        while not done.is_set():
            ticks += 1
            time.sleep(0.001)

    thread = threading.Thread(target=tick)
    thread.start()
    running.wait()
    start_ticks, start = ticks, time.perf_counter()
    try:
        # One step of 8192 images per epoch: the GIL changes hands only between epochs.
        trainer.fit(x, y, epochs=2, batch_size=8192, progress=False)
    finally:
        elapsed = time.perf_counter() - start
        progressed = ticks - start_ticks
        done.set()
        thread.join()
    assert elapsed > 0.05, "the steps were too quick to tell"
    # Holding the GIL through each step would allow a few ticks at most.
    assert progressed >= 10, f"{progressed} ticks in {elapsed:.3f} s"


def test_mse_trains_a_regression_with_float_targets():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((128, 3)).astype(np.float32)
    true_w = np.array([[1.0, -2.0, 0.5]], np.float32)
    y = x @ true_w.T + 0.25
    net = verjus.Network.from_def(nn.Sequential(nn.Linear(1, name="fc"), input_shape=(3,)))
    trainer = verjus.Trainer(net, optim.SGD(lr=0.1), loss="mse")
    trainer.fit(x, y, epochs=60, batch_size=32, progress=False)
    state = net.state_dict()
    np.testing.assert_allclose(state["fc.weight"], true_w, atol=1e-2)
    np.testing.assert_allclose(state["fc.bias"], [0.25], atol=1e-2)
    assert trainer.evaluate(x, y).accuracy is None


def test_schedules_change_the_learning_rate():
    x, y = blobs(64)
    step = verjus.Trainer(mlp(), optim.SGD(lr=1.0, schedule=optim.StepLR(step_size=2, gamma=0.5)))
    lrs = []
    for _ in range(5):
        lrs.append(step.lr)
        step.train_minibatch(x, y)
    assert lrs == pytest.approx([1.0, 1.0, 0.5, 0.5, 0.25])
    cosine = optim.Adam(lr=0.1, schedule=optim.CosineWarmup(warmup_steps=2, total_steps=6))
    trainer = verjus.Trainer(mlp(), cosine)
    lrs = []
    for _ in range(7):
        lrs.append(trainer.lr)
        trainer.train_minibatch(x, y)
    assert lrs[:2] == pytest.approx([0.05, 0.1])
    assert lrs[-1] == pytest.approx(0.0, abs=1e-7)


@pytest.mark.parametrize(
    "optimizer",
    [
        optim.SGD(lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4),
        optim.Adam(lr=0.01, weight_decay=1e-4, clip_norm=1.0),
        optim.AdamW(lr=0.01),
    ],
)
def test_every_optimizer_learns(optimizer):
    x, y = blobs()
    trainer = verjus.Trainer(mlp(), optimizer)
    trainer.fit(x, y, epochs=5, batch_size=32, progress=False)
    assert trainer.evaluate(x, y).accuracy > 0.9


def test_label_smoothing_raises_the_loss_floor():
    x, y = blobs()
    plain = verjus.Trainer(mlp(), optim.Adam(lr=0.01))
    smooth = verjus.Trainer(mlp(), optim.Adam(lr=0.01), label_smoothing=0.2)
    a, _ = plain.train_minibatch(x, y)
    b, _ = smooth.train_minibatch(x, y)
    assert b != pytest.approx(a)
