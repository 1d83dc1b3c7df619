"""Text data for sequence models: ``verjus.data.fortunes`` (which files, the split
rule, errors naming the file), ``CharVocab`` (ids, round trips, JSON files) and
``TextBatcher`` (padding, lengths, per-epoch shuffling, every text once)."""

import os
from pathlib import Path

import numpy as np
import pytest

import verjus
from verjus.data import CharVocab, TextBatcher

REAL = Path("/usr/share/games/fortunes")


def reference_split(contents: str) -> list[str]:
    """The split rule, written independently: texts between lines that are only
    ``%``, each without its final newline, empty ones dropped."""
    lines = contents.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    texts, current = [], []
    for line in lines:
        if line == "%":
            texts.append("\n".join(current))
            current = []
        else:
            current.append(line)
    texts.append("\n".join(current))
    return [t for t in texts if t]


def write_fortunes(folder: Path) -> dict[str, str]:
    """A small fortunes folder like Debian's, with what must be left out."""
    folder.mkdir()
    files = {
        "beta": "b one\n%\nb two\nsecond line\n%\n%\n100% sure\n",
        "alpha": "a one\n%\n  indented\n\n%\n",
    }
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
        (folder / f"{name}.dat").write_bytes(b"\x00\x00\x00\x02\xff\xfe")
        os.symlink(name, folder / f"{name}.u8")
    os.symlink("beta", folder / "gamma")
    (folder / "off").mkdir()
    (folder / "off" / "rude").write_text("uvqqra\n%\n", encoding="utf-8")
    return files


def test_fortunes_reads_plain_files_in_name_order(tmp_path):
    files = write_fortunes(tmp_path / "f")
    train, validation, vocab = verjus.data.fortunes(tmp_path / "f", max_len=None, val_every=None)
    expected = reference_split(files["alpha"]) + reference_split(files["beta"])
    assert train == expected
    assert train[1] == "  indented\n"
    assert validation == []
    assert vocab.chars == "".join(sorted(set("".join(expected))))


def test_long_texts_are_left_out_and_every_nth_validates(tmp_path, monkeypatch):
    folder = tmp_path / "f"
    folder.mkdir()
    texts = [("x" * (i % 7 + 1)) + str(i) for i in range(30)]
    (folder / "only").write_text("%\n".join(t + "\n" for t in texts), encoding="utf-8")
    monkeypatch.setenv("VERJUS_FORTUNES", str(folder))
    train, validation, _ = verjus.data.fortunes(max_len=6, val_every=3)
    kept = [t for t in texts if len(t) <= 6]
    assert validation == kept[::3]
    assert train == [t for i, t in enumerate(kept) if i % 3]
    with pytest.raises(ValueError, match="val_every"):
        verjus.data.fortunes(folder, val_every=1)


def test_bad_folders_and_files_name_the_file(tmp_path):
    with pytest.raises(OSError, match="apt-get install fortunes"):
        verjus.data.fortunes(tmp_path / "missing")
    folder = tmp_path / "f"
    folder.mkdir()
    with pytest.raises(OSError, match="no fortune files"):
        verjus.data.fortunes(folder)
    (folder / "good").write_text("fine\n", encoding="utf-8")
    (folder / "latin1").write_bytes("ok\n%\ncafé\n".encode("latin-1"))
    with pytest.raises(OSError, match=r"latin1.*not UTF-8.*offset 8"):
        verjus.data.fortunes(folder)
    (folder / "latin1").write_bytes(b"")
    with pytest.raises(OSError, match=r"latin1.*is empty"):
        verjus.data.fortunes(folder)


def test_vocab_ids_round_trip_and_name_unknown_characters():
    texts = ["héllo\n", "wörld\t!"]
    vocab = CharVocab.build(texts)
    assert vocab.size == 2 + len(set("".join(texts)))
    assert (vocab.pad_id, vocab.eot_id) == (0, 1)
    assert vocab.chars == "".join(sorted(set("".join(texts))))
    for text in texts:
        ids = vocab.encode(text)
        assert ids.dtype == np.int32
        assert list(ids) == [vocab.chars.index(c) + 2 for c in text]
        assert vocab.decode(ids) == text
        assert vocab.decode([vocab.eot_id, *ids, vocab.pad_id]) == text
    with pytest.raises(ValueError, match=r"text 4.*'z'.*position 1"):
        vocab.encode("hz", index=4)
    with pytest.raises(ValueError, match=r"id 99 at position 1"):
        vocab.decode([2, 99])
    with pytest.raises(ValueError, match=r"id 4294967296 at position 0"):
        vocab.decode([2**32])


def test_vocab_save_and_load(tmp_path):
    vocab = CharVocab.build(['"quotes" \\ and ünïcode 🙂\n'])
    path = tmp_path / "vocab.json"
    vocab.save(path)
    loaded = CharVocab.load(path)
    assert loaded.chars == vocab.chars
    assert loaded.size == vocab.size
    assert not [p.name for p in tmp_path.iterdir() if p.name != "vocab.json"]
    path.write_text('{"format": "verjus-char-vocab"}', encoding="utf-8")
    with pytest.raises(OSError, match=r"vocab\.json"):
        CharVocab.load(path)
    with pytest.raises(OSError, match=r"nothing\.json"):
        CharVocab.load(tmp_path / "nothing.json")


def corpus(n: int) -> list[str]:
    rng = np.random.default_rng(0)
    return ["".join(rng.choice(list("abcdef "), size=int(rng.integers(0, 60)))) for _ in range(n)]


def test_batches_are_shifted_padded_texts():
    texts = corpus(70)
    vocab = CharVocab.build(texts)
    batcher = TextBatcher(texts, vocab, batch_size=8, pool=3)
    assert len(batcher) == 9
    assert batcher.tokens == sum(len(t) + 1 for t in texts)
    plan = batcher.plan(seed=4, epoch=2)
    for rows, (inputs, targets, lengths) in zip(plan, batcher.epoch(seed=4, epoch=2), strict=True):
        assert inputs.dtype == targets.dtype == lengths.dtype == np.int32
        assert inputs.shape == targets.shape == (len(rows), lengths.max())
        for i, r in enumerate(rows):
            ids = list(vocab.encode(texts[r]))
            n = len(ids) + 1
            assert lengths[i] == n
            assert list(inputs[i, :n]) == [vocab.eot_id, *ids]
            assert list(targets[i, :n]) == [*ids, vocab.eot_id]
            assert (inputs[i, n:] == vocab.pad_id).all()
            assert (targets[i, n:] == vocab.pad_id).all()


def test_each_epoch_covers_every_text_once_in_a_new_order():
    texts = corpus(100)
    batcher = TextBatcher(texts, CharVocab.build(texts), batch_size=8, pool=4)
    first = batcher.plan(seed=1, epoch=0)
    assert sorted(i for rows in first for i in rows) == list(range(100))
    assert first == batcher.plan(seed=1, epoch=0)
    second = batcher.plan(seed=1, epoch=1)
    assert sorted(i for rows in second for i in rows) == list(range(100))
    assert first != second
    assert {frozenset(r) for r in first} != {frozenset(r) for r in second}
    assert first != batcher.plan(seed=2, epoch=0)
    # Bucketing: less padding than batches of random texts.
    padded = sum(max(len(texts[i]) for i in rows) + 1 for rows in first)
    random_batches = TextBatcher(texts, CharVocab.build(texts), batch_size=8, pool=1)
    padded_random = sum(max(len(texts[i]) for i in rows) + 1 for rows in random_batches.plan(1))
    assert padded < padded_random
    # Without a seed: sorted by length.
    lengths = [len(texts[i]) for rows in batcher.plan() for i in rows]
    assert lengths == sorted(lengths)


def test_bad_batcher_input_is_named():
    vocab = CharVocab.build(["ab"])
    with pytest.raises(ValueError, match=r"text 1.*'c'"):
        TextBatcher(["ab", "abc"], vocab)
    with pytest.raises(ValueError, match="batch_size"):
        TextBatcher(["ab"], vocab, batch_size=0)
    with pytest.raises(ValueError, match=r"text 5 is outside"):
        TextBatcher(["ab"], vocab).batch([5])


@pytest.mark.skipif(
    not (REAL / "fortunes").is_file(), reason=f"{REAL} is missing (apt-get install fortunes)"
)
def test_the_real_package_gives_the_recipe_figures():
    # The figures of issue 21's char-LM recipe (measured with PyTorch's loader).
    train, validation, vocab = verjus.data.fortunes()
    assert len(train) == 13_540
    assert round(sum(map(len, train)) / 1e6, 2) == 1.65
    assert vocab.size == 112 + 2
    assert all(0 < len(t) <= 512 for t in train + validation)
    all_texts, _, _ = verjus.data.fortunes(max_len=None, val_every=None)
    assert 14_000 < len(all_texts) < 17_000
    assert max(map(len, all_texts)) > 2_000
