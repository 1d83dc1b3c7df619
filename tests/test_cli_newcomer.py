"""What a newcomer meets in the ``verjus`` command (issue 39): sequence
networks shown with their time axis and dtypes, a character model's run
folder in bits per character, ``--data`` that says what each kind of network
takes, ``train --resume``, and the messages of text data that leaves nothing
to train on, a float "vocab" input and greedy sampling."""

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import NETS
from safetensors.numpy import load_file
from test_cli_text import NET as TEXT_NET

import verjus
from verjus._textcli import fill_vocab
from verjus.cli import main


@pytest.fixture
def text_net(tmp_path: Path) -> Path:
    path = tmp_path / "lm.json"
    path.write_text(json.dumps(TEXT_NET))
    return path


@pytest.fixture
def fortunes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fortune folder of 60 short texts, as ``--data fortunes``."""
    folder = tmp_path / "fortunes"
    folder.mkdir()
    texts = [f"the {['cat', 'dog', 'hen'][i % 3]} sat on mat {i}" for i in range(60)]
    (folder / "animals").write_text("\n%\n".join(texts) + "\n")
    monkeypatch.setenv("VERJUS_FORTUNES", str(folder))
    return folder


def png_width(path: Path) -> int:
    """The width in pixels of a PNG file (its IHDR chunk)."""
    return struct.unpack(">I", path.read_bytes()[16:20])[0]


def weights(folder: Path) -> dict[str, np.ndarray]:
    return load_file(str(folder / "weights.safetensors"))


def metrics(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]


# -- 5: sequence networks show their time axis and dtypes -------------------------------------


def test_summary_and_repr_show_the_time_axis_and_the_input_dtype(capsys):
    char_lm = NETS / "char_lm.json"
    assert main(["info", str(char_lm), "--vocab", "50"]) == 0
    out = capsys.readouterr().out
    assert "inputs: chars (batch, time) int32" in out
    assert "(batch, time, 64)" in out  # the embedding
    assert "(batch, time, 256)" in out  # the LSTM
    assert "(batch, time, 50)" in out  # the scores of each step
    net = verjus.Network.from_def(fill_vocab(json.loads(char_lm.read_text()), 50, "char_lm"))
    assert repr(net) == (
        "Network(inputs=[chars(time,) int32], outputs=[logits(time, 50)], "
        "parameters=345,778, device='cpu')"
    )
    # A time reduction ends the time axis; image inputs are float32 without one.
    rows = verjus.Network.from_def(NETS / "fashion_rowlstm.json").summary(print_fn=None)
    assert "inputs: rows (batch, time, 28) float32" in rows
    assert "LSTM       (batch, time, 128)" in rows
    assert "LastFrame  (batch, 128)" in rows
    cnn = verjus.Network.from_def(NETS / "fashion_cnn.json")
    assert "inputs: image (batch, 1, 28, 28) float32" in cnn.summary(print_fn=None)
    assert repr(cnn).startswith("Network(inputs=[image(1, 28, 28)], outputs=[logits(10,)]")


# -- 6: a character model's run folder says what its console says ------------------------------


def test_a_text_run_records_and_plots_bits_per_character(tmp_path, fortunes, text_net, capsys):
    out = tmp_path / "run"
    argv = ["train", str(text_net), "--epochs", "2", "--lr", "0.02", "--batch-size", "8"]
    assert main([*argv, "--no-progress", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    rows = metrics(out)
    assert set(rows[0]) == {
        "epoch", "train_bpc", "validation_bpc", "seconds", "characters_per_second", "lr",
    }  # fmt: skip
    assert f"validation {rows[1]['validation_bpc']:.4f} bits per character" in printed
    assert f"train {rows[1]['train_bpc']:.4f} bpc" in printed
    # One panel of bits per character: no empty accuracy panel beside it.
    assert png_width(out / "curves.png") == 500


def test_a_classifier_run_keeps_its_loss_and_accuracy_panels(tmp_path, fashion_dir):
    out = tmp_path / "run"
    argv = ["train", str(NETS / "fashion_mlp.json"), "--data", str(fashion_dir), "--epochs", "1"]
    assert main([*argv, "--batch-size", "64", "--no-progress", "--out", str(out)]) == 0
    assert {"train_loss", "test_loss", "test_accuracy"} <= set(metrics(out)[0])
    assert png_width(out / "curves.png") == 1000


# -- 7: --data names what each kind of network takes, and refuses the other kind ---------------


def test_train_help_names_the_data_of_each_kind_of_network(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # no line breaks inside the names
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = capsys.readouterr().out
    for what in ("fashion-mnist", "IDX", "fortunes", "folder of text files", "image classifier",
                 "text network"):  # fmt: skip
        assert what in text, what


def test_data_of_the_other_kind_is_refused_by_name(tmp_path, fortunes, fashion_dir, text_net,
                                                   capsys):  # fmt: skip
    out = tmp_path / "run"
    mlp = str(NETS / "fashion_mlp.json")
    for data in ("fortunes", str(fortunes)):
        assert main(["train", mlp, "--data", data, "--out", str(out)]) == 1
        err = capsys.readouterr().err
        assert "is an image classifier, which takes --data fashion-mnist" in err
        assert "not found" not in err
    for data in ("fashion-mnist", str(fashion_dir)):
        assert main(["train", str(text_net), "--data", data, "--out", str(out)]) == 1
        err = capsys.readouterr().err
        assert f"--data {data}: Fashion-MNIST images" in err
        assert "is a text network" in err
    saved = verjus.Network.from_def(mlp).save(tmp_path / "saved")
    assert main(["predict", str(saved), "--data", "fortunes"]) == 1
    assert "is an image classifier" in capsys.readouterr().err
    assert not out.exists()


def test_a_text_network_reads_the_folder_given(tmp_path, fortunes, text_net, capsys):
    """``--data FOLDER`` is read, not ``$VERJUS_FORTUNES``."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "a.txt").write_text("\n%\n".join(f"text number {i}" for i in range(40)))
    argv = ["train", str(text_net), "--data", str(folder), "--epochs", "0"]
    assert main([*argv, "--out", str(tmp_path / "run")]) == 0
    assert "38 training texts" in capsys.readouterr().out  # 40, less texts 0 and 20


# -- 8: verjus train --resume ------------------------------------------------------------------


def test_resume_continues_a_classifier_run_as_if_never_stopped(tmp_path, fashion_dir, capsys):
    common = ["train", str(NETS / "fashion_mlp.json"), "--data", str(fashion_dir)]
    common += ["--batch-size", "64", "--seed", "3", "--no-progress"]
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert main([*common, "--epochs", "2", "--out", str(straight)]) == 0
    assert main([*common, "--epochs", "1", "--out", str(resumed)]) == 0
    first_plot = (resumed / "curves.png").read_bytes()
    capsys.readouterr()
    assert main([*common, "--epochs", "2", "--out", str(resumed), "--resume"]) == 0
    printed = capsys.readouterr().out
    assert "resumed after epoch 1" in printed
    assert "epoch 2/2" in printed
    assert "epoch 1/2" not in printed
    for name, value in weights(straight).items():
        np.testing.assert_allclose(weights(resumed)[name], value, rtol=0, atol=1e-6)
    rows, straight_rows = metrics(resumed), metrics(straight)
    assert [r["epoch"] for r in rows] == [1, 2]
    assert rows[1]["test_accuracy"] == pytest.approx(straight_rows[1]["test_accuracy"], abs=1e-6)
    assert (resumed / "curves.png").read_bytes() != first_plot  # redrawn with epoch 2


def test_resume_continues_a_text_run_on_the_same_batches(tmp_path, fortunes, text_net, capsys):
    common = ["train", str(text_net), "--lr", "0.02", "--batch-size", "8", "--seed", "1"]
    common += ["--no-progress"]
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert main([*common, "--epochs", "3", "--out", str(straight)]) == 0
    assert main([*common, "--epochs", "1", "--out", str(resumed)]) == 0
    assert main([*common, "--epochs", "3", "--out", str(resumed), "--resume"]) == 0
    assert "epoch 3/3" in capsys.readouterr().out
    for name, value in weights(straight).items():
        np.testing.assert_allclose(weights(resumed)[name], value, rtol=0, atol=1e-6)
    assert [r["epoch"] for r in metrics(resumed)] == [1, 2, 3]


def test_resume_refuses_what_it_cannot_continue(tmp_path, fashion_dir, capsys):
    common = ["train", str(NETS / "fashion_mlp.json"), "--data", str(fashion_dir)]
    common += ["--batch-size", "64", "--no-progress"]
    run = tmp_path / "run"
    assert main([*common, "--epochs", "1", "--out", str(run), "--resume"]) == 1
    assert "holds no run to resume" in capsys.readouterr().err
    assert main([*common, "--epochs", "1", "--out", str(run)]) == 0
    before = weights(run)
    capsys.readouterr()
    cases = [
        (["--epochs", "1"], "has done 1 epoch already; give --epochs more than 1"),
        (["--epochs", "2", "--batch-size", "32"], "--batch-size 32 differs from the run's 64"),
        (["--epochs", "2", "--lr", "0.01"], "--lr 0.01 differs from the run's 0.001"),
    ]
    for extra, message in cases:
        assert main([*common, "--out", str(run), "--resume", *extra]) == 1
        assert message in capsys.readouterr().err
    other = ["train", str(NETS / "fashion_cnn.json"), "--data", str(fashion_dir), "--resume"]
    assert main([*other, "--epochs", "2", "--out", str(run)]) == 1
    assert "is not the network of" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main([*common, "--out", str(run), "--resume", "--overwrite"])
    assert exit_.value.code == 2
    for name, value in before.items():
        np.testing.assert_array_equal(weights(run)[name], value)
    assert len(metrics(run)) == 1


def test_fit_initial_epoch_trains_the_epochs_after_it(tmp_path, rng):
    """``Trainer.fit(epochs=2, initial_epoch=1)`` after a resume equals two
    epochs straight: epoch 2's shuffle, not epoch 1's again."""
    x = rng.random((96, 1, 28, 28), dtype=np.float32)
    y = rng.integers(0, 10, 96)

    def trainer() -> verjus.Trainer:
        net = verjus.Network.from_def(NETS / "fashion_mlp.json", seed=4)
        return verjus.Trainer(net, verjus.optim.SGD(lr=0.1))

    straight = trainer()
    straight.fit(x, y, epochs=2, batch_size=16, verbose=0, progress=False)
    first = trainer()
    first.fit(x, y, epochs=1, batch_size=16, verbose=0, progress=False)
    first.save_checkpoint(tmp_path / "ckpt")
    resumed = verjus.Trainer.resume(tmp_path / "ckpt")
    history = resumed.fit(x, y, epochs=2, initial_epoch=1, batch_size=16, verbose=0,
                          progress=False)  # fmt: skip
    assert history["epoch"] == [2]
    for name, value in straight.network.state_dict().items():
        np.testing.assert_allclose(resumed.network.state_dict()[name], value, rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="initial_epoch >= 0"):
        resumed.fit(x, y, epochs=2, initial_epoch=-1)


@pytest.mark.skipif(
    shutil.which("mpirun") is None, reason="needs Open MPI (apt-get install openmpi-bin)"
)
def test_resume_on_two_ranks(tmp_path, fashion_dir):
    """``--nproc 2 --resume``: the ranks resume the run together and rank 0
    writes its epochs."""
    pytest.importorskip("mpi4py")
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "RAYON_NUM_THREADS": "1"}  # fmt: skip
    run = tmp_path / "run"
    common = [sys.executable, "-m", "verjus", "train", str(NETS / "fashion_mlp.json"),
              "--data", str(fashion_dir), "--batch-size", "64", "--no-progress",
              "--out", str(run)]  # fmt: skip
    for extra in (["--epochs", "1"], ["--epochs", "2", "--resume", "--nproc", "2"]):
        result = subprocess.run([*common, *extra], env=env, capture_output=True, text=True,
                                timeout=300, check=False)  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("epoch 2/2") == 1
    assert [r["epoch"] for r in metrics(run)] == [1, 2]


# -- 13: messages that say what is wrong -------------------------------------------------------


def test_text_data_with_nothing_to_train_on_says_why(tmp_path, fortunes, text_net, capsys):
    out = str(tmp_path / "run")
    assert main(["train", str(text_net), "--max-len", "1", "--out", out]) == 1
    err = capsys.readouterr().err
    assert "0 texts of at most --max-len 1 characters (of 60; the shortest has 20)" in err
    assert "TextBatcher" not in err
    one = tmp_path / "one"
    one.mkdir()
    (one / "a.txt").write_text("a single text\nof two lines\n")
    assert main(["train", str(text_net), "--data", str(one), "--out", out]) == 1
    err = capsys.readouterr().err
    assert f"--data {one}: 1 text; training needs at least 2" in err
    assert "every 20th text, the first included, is for validation" in err


def test_a_float_input_with_a_vocab_size_names_the_input(tmp_path, capsys):
    definition = json.loads((NETS / "char_lm.json").read_text())
    definition["inputs"][0]["dtype"] = "float32"
    path = tmp_path / "f32.json"
    path.write_text(json.dumps(definition))
    for argv in (["train", str(path), "--out", str(tmp_path / "run")], ["info", str(path)]):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert "input 'chars' has shape [null] and dtype float32" in err
        assert '"dtype": "int32"' in err
        assert "invalid JSON" not in err


def test_sample_temperature_zero_is_greedy(tmp_path, fortunes, text_net, capsys):
    out = tmp_path / "run"
    argv = ["train", str(text_net), "--epochs", "2", "--lr", "0.02", "--batch-size", "8"]
    assert main([*argv, "--no-progress", "--out", str(out)]) == 0
    capsys.readouterr()
    texts = []
    for seed in ("1", "2"):
        sample = ["sample", str(out), "--prompt", "the ", "--chars", "30", "--seed", seed]
        assert main([*sample, "--temperature", "0"]) == 0
        texts.append(capsys.readouterr().out)
    assert texts[0] == texts[1]  # no draw: the seed does not matter
    # The most likely character each step, as the network's own scores say.
    vocab = verjus.data.CharVocab.load(out / "vocab.json")
    stepper = verjus.Network.load(out).stepper()
    scores = stepper.step(np.array([[vocab.eot_id, *vocab.encode("the ")]], np.int32))[0, -1]
    generated = vocab.encode(texts[0].removesuffix("\n")[4:])
    assert len(generated) > 0
    for next_id in generated:
        scores[vocab.pad_id] = -np.inf
        assert np.argmax(scores) == next_id
        scores = stepper.step(np.array([next_id], np.int32))[0]
    assert main(["sample", str(out), "--temperature", "-1"]) == 1
    assert "--temperature must be a number >= 0" in capsys.readouterr().err
