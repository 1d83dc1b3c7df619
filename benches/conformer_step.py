"""Times the parts of one training step of the Conformer-CTC example (forward
with the loss, backward, optimizer step) in verjus' RF frontend and in its
PyTorch twin, on the same strips and batches.

    .venv/bin/python benches/conformer_step.py [--strips 960] [--framework both]

Prints milliseconds per step for each part, the mean over the batches after
the first three. PyTorch's side needs torch in the Python environment.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "python"))

import rf_conformer_ctc as ex

WARMUP_STEPS = 3


def time_parts(batches, forward, backward, step) -> dict[str, float]:
    """Mean milliseconds of each part per batch, the first batches left out."""
    totals = {"forward + loss": 0.0, "backward": 0.0, "optimizer step": 0.0}
    counted = 0
    for i, arrays in enumerate(batches):
        start = time.perf_counter()
        loss = forward(arrays)
        mid = time.perf_counter()
        backward(loss)
        end = time.perf_counter()
        step()
        done = time.perf_counter()
        if i >= WARMUP_STEPS:
            counted += 1
            for part, seconds in zip(totals, (mid - start, end - mid, done - end), strict=True):
                totals[part] += seconds
    return {part: 1e3 * s / max(counted, 1) for part, s in totals.items()}


def verjus_parts(args: argparse.Namespace, train) -> dict[str, float]:
    from verjus import rf

    rf.set_random_seed(args.seed)
    model = ex.ConformerCtc(train.height, args.model_dim, args.layers, args.heads)
    opt = rf.AdamW(model.parameters(), lr=ex.LR, weight_decay=ex.WEIGHT_DECAY, clip_norm=ex.CLIP)
    rf.init_train_step_run_ctx(train_flag=True)

    def forward(arrays):
        return ex.ctc_objective(model, ex.to_batch(arrays, model))

    def backward(loss):
        opt.zero_grad()
        loss.backward()

    batches = train.batches(args.batch_size, args.seed, 0)
    return time_parts(batches, forward, backward, opt.step)


def torch_parts(args: argparse.Namespace, train) -> dict[str, float]:
    import torch
    import torch_conformer_ctc as tx

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = tx.ConformerCtc(train.height, args.model_dim, args.layers, args.heads)
    opt = torch.optim.AdamW(model.parameters(), lr=ex.LR, weight_decay=ex.WEIGHT_DECAY)
    model.train()

    def forward(arrays):
        return tx.ctc_objective(model, arrays, "cpu")

    def backward(loss):
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), ex.CLIP)

    batches = train.batches(args.batch_size, args.seed, 0)
    return time_parts(batches, forward, backward, opt.step)


def main() -> None:
    p = ex.make_parser(__doc__)
    p.add_argument("--strips", type=int, default=960, help="training strips (batches of 32)")
    p.add_argument("--framework", choices=("verjus", "torch", "both"), default="both")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    args.train_strips, args.test_strips = args.strips, 1
    train, _ = ex.make_strips(args)
    runs = {"verjus": verjus_parts, "torch": torch_parts}
    for name, run in runs.items():
        if args.framework in (name, "both"):
            parts = run(args, train)
            shown = ", ".join(f"{part} {ms:.1f} ms" for part, ms in parts.items())
            print(f"{name}: {shown} (per step, {args.strips // args.batch_size} steps)")


if __name__ == "__main__":
    main()
