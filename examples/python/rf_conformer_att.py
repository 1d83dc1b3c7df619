"""The attention-decoder variant of the Conformer-CTC example, in verjus.rf.

    python examples/python/rf_conformer_att.py [--epochs 4] [--train-strips 6000]
        [--test-strips 1000] [--batch-size 32] [--seed 0] [--device cpu|cuda]
        [--model-dim 128] [--layers 3] [--heads 4] [--data DIR]
        [--dec-layers 2] [--beam-size 4] [--ctc-weight 0.3]

The same strips of Fashion-MNIST images and the same Conformer encoder as
``rf_conformer_ctc.py`` (whose data, model and engine set-up this reuses), with
an attention decoder as in RETURNN's AED recipes: RETURNN's
``TransformerDecoder`` (``rf.decoder.transformer``; ``--dec-layers`` layers of
``--model-dim``, ``--heads`` heads, dropout 0.1) over the label sequence, its
vocabulary the 10 classes and one BOS/EOS label (index 10, as RETURNN's recipes
share one index for both). Training is teacher-forced: the decoder reads BOS
and the labels and predicts the labels and EOS (both made from the labels with
``rf.pad``, as RETURNN's recipes make them); the loss is the cross entropy
per predicted label, label-smoothed by 0.1 as RETURNN's recipes do it
(``rf.label_smoothed_log_prob_gradient``: the gradient is smoothed, the printed
loss is the plain cross entropy), plus ``--ctc-weight`` times the CTC loss of
the encoder (the CTC example's output layer) per label, as an auxiliary loss.

The test label error rate is that of the best hypothesis of a beam search
(``rf.search.beam_search``, ``--beam-size`` hypotheses, the decoder run one
step at a time with ``rf.single_step_dim``; at most one label per encoder
frame) against the references. Optimizer, schedule and initialization are the
CTC example's.

Measured (``nice -n 19 python examples/python/rf_conformer_att.py --epochs 3``,
the defaults otherwise, 2 cores shared with other jobs, load 3.6-4.4, so the
times are indicative): test LER 63.13 / 30.32 / 25.37 %, 91 / 72 / 79 s per
epoch (and 9-14 s for the beam search over the 1000 test strips), with a
hand-written training loop. Through the engine (load 4-5): 66.48 / 31.23 /
24.28 %, 41-53 s per epoch; the loop right before it: 62.35 / 30.89 / 25.22 %,
47-52 s.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Sequence
from typing import Any

import rf_conformer_ctc as ctc

import verjus
from verjus import rf
from verjus.rf.decoder.transformer import TransformerDecoder

BOS_EOS, LABEL_SMOOTHING = ctc.NUM_CLASSES, 0.1


class ConformerAed(rf.Module):
    """The CTC example's model (encoder and CTC output layer, for the
    auxiliary loss) and a Transformer decoder over ``target_dim``."""

    def __init__(self, rows: int, args: argparse.Namespace) -> None:
        self.ctc = ctc.ConformerCtc(rows, args.model_dim, args.layers, args.heads)
        self.target_dim = rf.Dim(ctc.NUM_CLASSES + 1, name="classes_eos")
        self.decoder = TransformerDecoder(
            self.ctc.encoder.out_dim,
            self.target_dim,
            rf.Dim(args.model_dim, name="dec_model"),
            num_layers=args.dec_layers,
            num_heads=args.heads,
            dropout=ctc.DROPOUT,
            att_dropout=ctc.DROPOUT,
        )

    def to_batch(self, arrays: verjus.data.StripBatch) -> ctc.Batch:
        """The CTC example's batch, its batch dim static (the decoder's initial
        state and the beam search need its size)."""
        return ctc.to_batch(arrays, self.ctc, rf.Dim(len(arrays.lengths), name="batch"))

    def encode(self, batch: ctc.Batch) -> tuple[rf.Tensor, rf.Dim]:
        """The encoder output over ``[batch, frames, model]`` and the frames dim."""
        return self.ctc.encoder(batch.features, in_spatial_dim=batch.columns)


def decoder_log_probs(
    model: ConformerAed, enc: rf.Tensor, frames: rf.Dim, inputs: rf.Tensor, dec_dim: rf.Dim
) -> rf.Tensor:
    """The decoder's log-probabilities over ``[batch, dec_dim, target_dim]``
    for the (teacher-forced) ``inputs``, all positions at once."""
    batch_dims = [d for d in inputs.dims if d != dec_dim]
    logits, _ = model.decoder(
        inputs,
        spatial_dim=dec_dim,
        state=model.decoder.default_initial_state(batch_dims=batch_dims),
        encoder=model.decoder.transform_encoder(enc, axis=frames),
    )
    return rf.log_softmax(logits, axis=model.target_dim)


def train_step(
    *, model: ConformerAed, extern_data: rf.TensorDict, ctc_weight: float, **_kwargs: Any
) -> None:
    """The engine's step: the label-smoothed cross entropy per predicted label
    (reported: the plain cross entropy) and ``ctc_weight`` times the CTC loss
    per label."""
    labels = extern_data["classes"]
    enc, frames = model.ctc.encoder(extern_data["data"], in_spatial_dim=ctc.columns_dim)
    inputs, (dec_dim,) = rf.pad(labels, axes=[ctc.label_dim], padding=[(1, 0)], value=BOS_EOS)
    targets, _ = rf.pad(
        labels, axes=[ctc.label_dim], padding=[(0, 1)], value=BOS_EOS, out_dims=[dec_dim]
    )
    log_probs = decoder_log_probs(model, enc, frames, inputs, dec_dim)
    log_probs = rf.label_smoothed_log_prob_gradient(
        log_probs, LABEL_SMOOTHING, axis=model.target_dim
    )
    ce = rf.cross_entropy(
        estimated=log_probs, target=targets, axis=model.target_dim, estimated_type="log-probs"
    )
    ce.mark_as_loss("ce", use_normalized_loss=True)
    if ctc_weight:
        aux = rf.ctc_loss(
            logits=model.ctc.output(enc),
            targets=labels,
            input_spatial_dim=frames,
            targets_spatial_dim=ctc.label_dim,
            blank_index=ctc.NUM_CLASSES,
        )
        aux.mark_as_loss(
            "ctc",
            scale=ctc_weight,
            custom_inv_norm_factor=ctc.label_dim.get_size_tensor(),
            use_normalized_loss=True,
        )


def beam_search(
    model: ConformerAed, batch: ctc.Batch, beam_size: int
) -> tuple[rf.Tensor, rf.Tensor, rf.Dim, rf.Dim]:
    """``rf.search.beam_search`` over the decoder run step by step, at most
    one label per encoder frame: ``(labels, scores, out_spatial_dim,
    beam_dim)``, best hypothesis first."""
    enc, frames = model.encode(batch)
    encoder = model.decoder.transform_encoder(enc, axis=frames)

    def step(labels: rf.Tensor, state: rf.State) -> tuple[rf.Tensor, rf.State]:
        logits, state = model.decoder(
            labels, spatial_dim=rf.single_step_dim, state=state, encoder=encoder
        )
        return rf.log_softmax(logits, axis=model.target_dim), state

    return rf.search.beam_search(
        step,
        initial_state=model.decoder.default_initial_state(batch_dims=[batch.batch_dim]),
        batch_dims=[batch.batch_dim],
        vocab_dim=model.target_dim,
        beam_size=beam_size,
        bos_index=BOS_EOS,
        eos_index=BOS_EOS,
        max_seq_len=frames.dyn_size_ext,
    )


def label_error_rate(model: ConformerAed, strips: verjus.data.ImageStrips, beam_size: int) -> float:
    """The best hypothesis of the beam search for every test strip: the
    summed edit distances to the references / the summed reference lengths."""
    rf.init_forward_step_run_ctx()
    errors, total = 0, 0
    for arrays in strips.batches(ctc.EVAL_BATCH):
        batch = model.to_batch(arrays)
        hyps, _, hyp_dim, beam = beam_search(model, batch, beam_size)
        dist = rf.edit_distance(hyps, hyp_dim, batch.labels, batch.label_positions)
        errors += int(rf.gather(dist, axis=beam, indices=0).numpy().sum())
        total += int(arrays.label_lengths.sum())
    return errors / total


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = ctc.make_parser(__doc__)
    p.add_argument("--dec-layers", type=int, default=2)
    p.add_argument("--beam-size", type=int, default=4)
    p.add_argument("--ctc-weight", type=float, default=0.3)
    return p.parse_args(argv)


def build(
    argv: Sequence[str] | None = None,
) -> tuple[argparse.Namespace, ConformerAed, verjus.data.ImageStrips, verjus.data.ImageStrips]:
    """The options, the model (initialized after ``rf.set_random_seed(seed)``)
    and the training and test strips."""
    args = parse_args(argv)
    train, test = ctc.make_strips(args)
    if args.device != "cpu":
        rf.set_default_device(args.device)
    rf.set_random_seed(args.seed)
    return args, ConformerAed(train.height, args), train, test


def main(argv: Sequence[str] | None = None) -> ctc.Result:
    return fit(*build(argv))


def fit(
    args: argparse.Namespace,
    model: ConformerAed,
    train: verjus.data.ImageStrips,
    test: verjus.data.ImageStrips,
) -> ctc.Result:
    """The CTC example's engine with this model's inputs, step and test."""
    return ctc.fit(
        args,
        model,
        train,
        test,
        ctc.extern_data(model.ctc.in_dim, model.target_dim),
        functools.partial(train_step, ctc_weight=args.ctc_weight),
        lambda strips: label_error_rate(model, strips, args.beam_size),
    )


if __name__ == "__main__":
    main()
