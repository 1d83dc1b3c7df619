"""``rf.search.beam_search``: on small hand-made decoders with known
probabilities (a trigram table whose state is the label before last, so the
state must follow the back-pointers), against greedy decoding (beam 1), the
best sequence greedy misses, an exhaustive beam against brute-force
enumeration (scores, labels, lengths, eos and max-length handling), batched
against each entry alone, a random ``TransformerDecoder`` whose best score is
its log-prob of that sequence in one full-sequence pass, and bad input.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from verjus import rf
from verjus.rf.decoder.transformer import TransformerDecoder
from verjus.rf.search import beam_search

EOS = BOS = 0


class Trigram:
    """``log p(y_t | y_{t-2}, y_{t-1})`` from a table over ``[entry, prev-prev,
    prev, vocab]`` (one table per batch entry); the state is the label before
    last (bos at the start)."""

    def __init__(self, table: np.ndarray) -> None:
        self.n, v = table.shape[0], table.shape[-1]
        self.batch = rf.Dim(self.n, name="b")
        self.vocab = rf.Dim(v, name="vocab")
        self.pp, self.p = rf.Dim(v, name="pp"), rf.Dim(v, name="p")
        self.log_table = np.log(table / table.sum(-1, keepdims=True)).astype(np.float32)
        self.table = rf.convert_to_tensor(
            self.log_table, dims=[self.batch, self.pp, self.p, self.vocab]
        )

    def step(self, labels: rf.Tensor, state: rf.State) -> tuple[rf.Tensor, rf.State]:
        rows = rf.gather(self.table, indices=state.prev, axis=self.pp)
        return rf.gather(rows, indices=labels, axis=self.p), rf.State(prev=labels)

    def search(self, beam_size: int, max_seq_len: int | rf.Tensor):
        init = rf.State(prev=rf.convert_to_tensor(np.int32(BOS), dtype="int32"))
        labels, scores, out_dim, beam = beam_search(
            self.step,
            initial_state=init,
            batch_dims=[self.batch],
            vocab_dim=self.vocab,
            beam_size=beam_size,
            bos_index=BOS,
            eos_index=EOS,
            max_seq_len=max_seq_len,
        )
        lengths = out_dim.dyn_size_ext.copy_transpose([self.batch, beam]).numpy()
        labels = labels.copy_transpose([self.batch, beam, out_dim]).numpy()
        hyps = [
            [list(labels[b, j, : lengths[b, j]]) for j in range(beam.dimension)]
            for b in range(self.n)
        ]
        return hyps, scores.copy_transpose([self.batch, beam]).numpy()

    def score(self, b: int, seq: list[int], max_len: int) -> float:
        """The log-prob of ``seq`` for entry ``b`` (with eos unless it has ``max_len`` labels)."""
        full = [BOS, BOS, *seq] + ([EOS] if len(seq) < max_len else [])
        return float(
            sum(self.log_table[b, full[t - 2], full[t - 1], full[t]] for t in range(2, len(full)))
        )

    def greedy(self, b: int, max_len: int) -> tuple[list[int], float]:
        seq: list[int] = []
        while len(seq) < max_len:
            ctx = [BOS, BOS, *seq]
            y = int(np.argmax(self.log_table[b, ctx[-2], ctx[-1]]))
            if y == EOS:
                break
            seq.append(y)
        return seq, self.score(b, seq, max_len)


def random_trigram(seed: int, n: int, v: int) -> Trigram:
    return Trigram(np.random.default_rng(seed).uniform(0.05, 1.0, (n, v, v, v)))


def test_beam_1_is_greedy() -> None:
    model = random_trigram(1, 4, 5)
    hyps, scores = model.search(beam_size=1, max_seq_len=6)
    for b in range(model.n):
        seq, score = model.greedy(b, 6)
        assert hyps[b][0] == seq
        np.testing.assert_allclose(scores[b, 0], score, rtol=1e-5)


def test_finds_the_best_sequence_greedy_misses() -> None:
    # From bos: a 0.6, b 0.4. After a: eos 0.4 (a eos: 0.24). After b: eos 0.9 (b eos: 0.36).
    table = np.full((1, 3, 3, 3), 1.0 / 3)
    table[0, :, BOS] = [0.0001, 0.6, 0.3999]
    table[0, :, 1] = [0.4, 0.3, 0.3]
    table[0, :, 2] = [0.9, 0.05, 0.05]
    model = Trigram(table)
    assert model.greedy(0, 5)[0] == [1]
    hyps, scores = model.search(beam_size=2, max_seq_len=5)
    assert hyps[0][0] == [2]
    np.testing.assert_allclose(scores[0, 0], np.log(0.3999 * 0.9), rtol=1e-5)
    assert scores[0, 0] > model.greedy(0, 5)[1]


@pytest.mark.parametrize("max_len", [1, 3])
def test_exhaustive_beam_equals_brute_force(max_len: int) -> None:
    model = random_trigram(2, 1, 3)
    seqs = [list(s) for n in range(max_len + 1) for s in itertools.product([1, 2], repeat=n)]
    expected = sorted(((model.score(0, s, max_len), s) for s in seqs), reverse=True)
    hyps, scores = model.search(beam_size=len(seqs), max_seq_len=max_len)
    assert len(hyps[0]) == len(seqs)
    assert hyps[0] == [s for _, s in expected]
    np.testing.assert_allclose(scores[0], [sc for sc, _ in expected], rtol=1e-5)


def test_finished_hypotheses_stay_finished() -> None:
    model = random_trigram(3, 1, 4)
    hyps, scores = model.search(beam_size=3, max_seq_len=5)
    for seq, score in zip(hyps[0], scores[0], strict=True):
        assert EOS not in seq
        assert len(seq) <= 5
        np.testing.assert_allclose(score, model.score(0, seq, 5), rtol=1e-5)  # frozen at its end
    assert list(scores[0]) == sorted(scores[0], reverse=True)


def test_batched_equals_each_entry_alone_with_own_max_length() -> None:
    model = random_trigram(4, 3, 4)
    max_lens = [4, 1, 3]
    max_t = rf.convert_to_tensor(np.array(max_lens, np.int32), dims=[model.batch])
    hyps, scores = model.search(beam_size=3, max_seq_len=max_t)
    for b in range(model.n):
        alone = Trigram(np.exp(model.log_table[b : b + 1]))
        hyps1, scores1 = alone.search(beam_size=3, max_seq_len=max_lens[b])
        assert hyps[b] == hyps1[0]
        np.testing.assert_allclose(scores[b], scores1[0], rtol=1e-5)
        assert all(len(s) <= max_lens[b] for s in hyps[b])


def test_transformer_decoder_best_score_is_its_full_sequence_log_prob() -> None:
    rf.set_random_seed(7)
    vocab, enc_dim, batch = rf.Dim(6, name="vocab"), rf.Dim(5, name="enc"), rf.Dim(2, name="b")
    dec = TransformerDecoder(
        enc_dim, vocab, 8, num_layers=2, num_heads=2, dropout=0.0, att_dropout=0.0
    )
    enc_lens = np.array([4, 2], np.int32)
    etime = rf.Dim(rf.convert_to_tensor(enc_lens, dims=[batch]), name="s")
    enc_in = np.random.default_rng(8).standard_normal((2, 4, 5)).astype(np.float32)
    enc = dec.transform_encoder(
        rf.convert_to_tensor(enc_in, dims=[batch, etime, enc_dim]), axis=etime
    )

    def step(labels: rf.Tensor, state: rf.State) -> tuple[rf.Tensor, rf.State]:
        logits, state = dec(labels, spatial_dim=rf.single_step_dim, state=state, encoder=enc)
        return rf.log_softmax(logits, axis=vocab), state

    max_len = 5
    labels, scores, out_dim, beam = beam_search(
        step,
        initial_state=dec.default_initial_state(batch_dims=[batch]),
        batch_dims=[batch],
        vocab_dim=vocab,
        beam_size=3,
        bos_index=BOS,
        eos_index=EOS,
        max_seq_len=max_len,
    )
    assert beam.dimension == 3
    lens = out_dim.dyn_size_ext.copy_transpose([batch, beam]).numpy()
    best = labels.copy_transpose([batch, beam, out_dim]).numpy()[:, 0]
    scores = scores.copy_transpose([batch, beam]).numpy()
    for b in range(2):
        seq = list(best[b, : lens[b, 0]])
        inputs = [BOS, *seq] if len(seq) < max_len else [BOS, *seq[:-1]]
        targets = [*seq, EOS] if len(seq) < max_len else seq
        one = rf.Dim(1, name="one")
        time = rf.Dim(len(inputs), name="t")
        es = rf.Dim(int(enc_lens[b]), name="es")
        y = rf.convert_to_tensor(np.array([inputs], np.int32), dims=[one, time], sparse_dim=vocab)
        e = rf.convert_to_tensor(enc_in[b : b + 1, : enc_lens[b]], dims=[one, es, enc_dim])
        logits, _ = dec(
            y,
            spatial_dim=time,
            state=dec.default_initial_state(batch_dims=[one]),
            encoder=dec.transform_encoder(e, axis=es),
        )
        lp = rf.log_softmax(logits, axis=vocab).copy_transpose([one, time, vocab]).numpy()[0]
        expected = sum(lp[t, y_t] for t, y_t in enumerate(targets))
        np.testing.assert_allclose(scores[b, 0], expected, rtol=1e-4, atol=1e-5)


def test_bad_input() -> None:
    model = random_trigram(5, 1, 3)
    init = rf.State(prev=rf.convert_to_tensor(np.int32(BOS), dtype="int32"))
    kw = {
        "initial_state": init,
        "batch_dims": [model.batch],
        "vocab_dim": model.vocab,
        "beam_size": 2,
        "bos_index": BOS,
        "eos_index": EOS,
        "max_seq_len": 3,
    }
    with pytest.raises(
        ValueError, match=r"beam_search: eos_index 3 is not a label of vocab_dim vocab"
    ):
        beam_search(model.step, **{**kw, "eos_index": 3})
    with pytest.raises(ValueError, match="beam_search: beam_size must be an int >= 1, got 0"):
        beam_search(model.step, **{**kw, "beam_size": 0})
    with pytest.raises(ValueError, match=r"beam_search: step must return log_probs over vocab_dim"):
        beam_search(lambda y, s: (rf.reduce_sum(model.step(y, s)[0], axis=model.vocab), s), **kw)
    extra = rf.Dim(2, name="extra")
    with pytest.raises(ValueError, match=r"beam_search: step's log_probs have dims \['extra'\]"):
        beam_search(lambda y, s: (rf.expand_dim(model.step(y, s)[0], extra), s), **kw)
