"""``verjus train`` on a character model definition and ``verjus sample``, on a
tiny fortune folder (``VERJUS_FORTUNES``)."""

import json
from pathlib import Path

import pytest

from verjus.cli import main

NET = {
    "format_version": 3,
    "inputs": [{"name": "chars", "shape": [None], "dtype": "int32"}],
    "layers": [
        {"name": "embed", "type": "Embedding", "vocab": "vocab", "dim": 8},
        {"name": "rnn", "type": "LSTM", "hidden": 16},
        {"name": "fc", "type": "Linear", "out_features": "vocab"},
    ],
}


@pytest.fixture
def fortunes(tmp_path, monkeypatch):
    folder = tmp_path / "fortunes"
    folder.mkdir()
    texts = [f"the cat sat on mat {i}" for i in range(40)]
    (folder / "cats").write_text("\n%\n".join(texts) + "\n")
    monkeypatch.setenv("VERJUS_FORTUNES", str(folder))
    return folder


def test_train_text_writes_run_folder_and_sample_continues_prompt(tmp_path, fortunes, capsys):
    net = tmp_path / "lm.json"
    net.write_text(json.dumps(NET))
    out = tmp_path / "run"
    argv = ["train", str(net), "--data", "fortunes", "--epochs", "2", "--lr", "0.02"]
    argv += ["--batch-size", "8", "--clip-norm", "1.0", "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert printed.count("bits per character") >= 2
    names = {p.name for p in out.iterdir()}
    assert {"network.json", "weights.safetensors", "metrics.jsonl", "vocab.json"} <= names
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in rows] == [1, 2]
    assert rows[1]["validation_bpc"] < rows[0]["validation_bpc"]
    assert main(["sample", str(out), "--prompt", "the ", "--chars", "20", "--seed", "3"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("the ")
    assert len(text.rstrip("\n")) > 4
    assert main(["sample", str(out), "--prompt", "the ", "--chars", "20", "--seed", "3"]) == 0
    assert capsys.readouterr().out == text  # seeded: the same text


def test_sample_refuses_unknown_prompt_character(tmp_path, fortunes, capsys):
    net = tmp_path / "lm.json"
    net.write_text(json.dumps(NET))
    out = tmp_path / "run"
    assert main(["train", str(net), "--epochs", "0", "--out", str(out), "--no-progress"]) == 0
    assert main(["sample", str(out), "--prompt", "Z", "--chars", "3"]) == 1
    assert "'Z'" in capsys.readouterr().err


def test_wrong_vocab_number_is_refused(tmp_path, fortunes, capsys):
    d = json.loads(json.dumps(NET))
    d["layers"][0]["vocab"] = 3
    net = tmp_path / "lm.json"
    net.write_text(json.dumps(d))
    assert main(["train", str(net), "--out", str(tmp_path / "r"), "--no-progress"]) == 1
    assert "vocab 3" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_shipped_char_lm_definition_is_a_text_definition():
    from verjus._textcli import fill_vocab, is_text_definition

    path = Path(__file__).parent.parent / "examples" / "nets" / "char_lm.json"
    d = json.loads(path.read_text())
    assert is_text_definition(d)
    filled = fill_vocab(d, 114, str(path))
    assert filled["layers"][0]["vocab"] == 114
    assert filled["layers"][2]["out_features"] == 114


def test_info_of_a_text_definition_takes_the_vocabulary_size(capsys):
    path = Path(__file__).parent.parent / "examples" / "nets" / "char_lm.json"
    assert main(["info", str(path)]) == 1
    assert "--vocab N" in capsys.readouterr().err
    assert main(["info", str(path), "--vocab", "50"]) == 0
    out = capsys.readouterr().out
    # Embedding 50 x 64 and the output Linear 256 -> 50 (weights and bias).
    assert "3,200" in out
    assert "12,850" in out


def _run_with_epochs0(tmp_path) -> Path:
    net = tmp_path / "lm.json"
    net.write_text(json.dumps(NET))
    out = tmp_path / "run"
    assert main(["train", str(net), "--epochs", "0", "--out", str(out), "--no-progress"]) == 0
    return out


def test_the_vocabulary_is_in_the_checkpoints_manifest(tmp_path, fortunes, capsys):
    """An edited ``vocab.json`` of the same size (two characters swapped) would
    print garbage; it is refused by the manifest's checksum, naming the file."""
    out = _run_with_epochs0(tmp_path)
    manifest = json.loads((out / "checkpoint.json").read_text())
    assert "vocab.json" in manifest["files"]
    vocab = json.loads((out / "vocab.json").read_text())
    vocab["chars"][0], vocab["chars"][1] = vocab["chars"][1], vocab["chars"][0]
    (out / "vocab.json").write_text(json.dumps(vocab, indent=2) + "\n")
    assert main(["sample", str(out), "--prompt", "the", "--chars", "3"]) == 1
    assert "vocab.json" in capsys.readouterr().err


def test_a_vocabulary_of_another_size_is_refused_by_name(tmp_path, fortunes, capsys):
    """A run saved before vocabularies were listed (its vocab.json unchecked)
    with another run's vocabulary: the sizes name the mismatch."""
    out = _run_with_epochs0(tmp_path)
    manifest = json.loads((out / "checkpoint.json").read_text())
    del manifest["files"]["vocab.json"]
    (out / "checkpoint.json").write_text(json.dumps(manifest, indent=1))
    vocab = json.loads((out / "vocab.json").read_text())
    vocab["chars"] = vocab["chars"][:-2]
    (out / "vocab.json").write_text(json.dumps(vocab, indent=2) + "\n")
    assert main(["sample", str(out), "--prompt", "the", "--chars", "3"]) == 1
    err = capsys.readouterr().err
    assert "vocab.json" in err
    assert "not this model's" in err
