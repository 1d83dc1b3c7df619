"""The PyTorch twin of ``rf_conformer_ctc.py``: the same Conformer-CTC on the same strips.

    python examples/python/torch_conformer_ctc.py [--epochs 4] [--train-strips 6000]
        [--test-strips 1000] [--batch-size 32] [--seed 0] [--device cpu|cuda]
        [--model-dim 128] [--layers 3] [--heads 4] [--data DIR] [--threads 2]

torchaudio is not installed here, so the blocks are a direct transcription of
the ones ``verjus.rf.encoder.conformer`` takes from RETURNN (which torchaudio's
Conformer does not match: it has no convolutional frontend nor relative
positions): the ``ConformerConvSubsample`` frontend, half-step feed-forwards,
Transformer-XL relative-position self-attention (``pos_bias_u``/``pos_bias_v``,
a projected sinusoidal encoding of the distances), the convolution block with a
BatchNorm whose statistics leave the padding out, each pre-normalized with a
residual, a final LayerNorm per block; dropout masks shared over batch and
time (RETURNN's ``rf_dropout_broadcast``), attention dropout per weight. Padding
frames never enter a real frame's result (zeroed before every convolution,
masked out of the keys). The same sizes, initialization scheme (Glorot-uniform
weights, zero biases), optimizer and schedule, data (``verjus.data.ImageStrips``,
the batches in the same order), ``torch.nn.functional.ctc_loss`` and greedy
decoding / label error rate as the RF example; ``--threads`` (2) for
``torch.set_num_threads``.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

import verjus

LR, MIN_LR, WEIGHT_DECAY, CLIP, WARMUP = 1e-3, 1e-5, 0.01, 5.0, 0.1
CONV_CHANNELS, CONV_KERNEL, DROPOUT, NUM_CLASSES = 32, 15, 0.1, 10
LN_EPS, BN_EPS, BN_MOMENTUM = 1e-6, 1e-3, 0.1
EVAL_BATCH = 100


def shared_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Dropout with one mask over the last (feature) dim, shared over the others."""
    if not training or p == 0.0:
        return x
    keep = torch.empty(x.shape[-1], device=x.device).bernoulli_(1.0 - p)
    return x * keep / (1.0 - p)


def glorot_init(model: nn.Module) -> None:
    """RETURNN's default: every weight Glorot-uniform (fans of a filter:
    channels times window), every bias zero; LayerNorm / BatchNorm at 1 and 0."""
    for name, param in model.named_parameters():
        if name.endswith("bias") or "norm" in name:
            continue
        nn.init.xavier_uniform_(param)
    for module in model.modules():
        if isinstance(module, nn.Linear | nn.Conv1d | nn.Conv2d) and module.bias is not None:
            nn.init.zeros_(module.bias)


class MaskedBatchNorm(nn.Module):
    """BatchNorm over ``[B, T, F]`` whose statistics are those of the real
    frames (rf.BatchNorm's ``use_mask``); running statistics for evaluation."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(dim))
        self.beta = nn.Parameter(torch.zeros(dim))
        self.register_buffer("running_mean", torch.zeros(dim))
        self.register_buffer("running_variance", torch.ones(dim))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.training:
            m = mask.unsqueeze(-1).to(x.dtype)
            n = m.sum()
            mean = (x * m).sum(dim=(0, 1)) / n
            var = (((x - mean) * m) ** 2).sum(dim=(0, 1)) / n
            with torch.no_grad():
                self.running_mean += (mean - self.running_mean) * BN_MOMENTUM
                self.running_variance += (var - self.running_variance) * BN_MOMENTUM
        else:
            mean, var = self.running_mean, self.running_variance
        return (x - mean) * torch.rsqrt(var + BN_EPS) * self.gamma + self.beta


class FeedForward(nn.Module):
    """Linear to 4x, swish, dropout, linear back."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.linear_ff = nn.Linear(dim, 4 * dim)
        self.linear_out = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = shared_dropout(F.silu(self.linear_ff(x)), DROPOUT, self.training)
        return self.linear_out(h)


def relative_positions(t: int, dim: int, device: torch.device) -> torch.Tensor:
    """The sinusoidal encoding ``[2T - 1, dim]`` of the distances ``-(T - 1) .. T - 1``
    (``[sin, cos]`` halves, ``10000 ** (-2i / dim)``)."""
    half = dim // 2
    div = torch.exp(torch.arange(half, dtype=torch.float32) * -(2.0 * math.log(1e4) / dim))
    pos = torch.arange(-(t - 1), t, dtype=torch.float32)[:, None] * div
    return torch.cat([torch.sin(pos), torch.cos(pos)], dim=-1).to(device)


class RelPosSelfAttention(nn.Module):
    """Transformer-XL self-attention (RETURNN's ``RelPosSelfAttention``)."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads, self.dk = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.linear_pos = nn.Linear(dim, dim, bias=False)
        self.pos_bias_u = nn.Parameter(torch.empty(heads, self.dk))
        self.pos_bias_v = nn.Parameter(torch.empty(heads, self.dk))
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        # RETURNN's layout: heads first, then q, k, v per head; each [B, T, H, dk]
        q, k, v = self.qkv(x).view(b, t, self.heads, 3, self.dk).unbind(dim=3)
        pos = self.linear_pos(relative_positions(t, d, x.device)).view(2 * t - 1, self.heads, -1)
        ac = torch.einsum("bihd,bjhd->bhij", q + self.pos_bias_u, k)
        bd = torch.einsum("bihd,phd->bhip", q + self.pos_bias_v, pos)
        # Entry (i, j) takes the encoding of distance j - i: index T - 1 - i + j.
        idx = (t - 1) - torch.arange(t, device=x.device)[:, None] + torch.arange(t, device=x.device)
        bd = bd.gather(-1, idx.expand(b, self.heads, t, t))
        scores = (ac + bd) * self.dk**-0.5
        scores = scores.masked_fill(~mask[:, None, None, :], float("-inf"))
        weights = F.dropout(torch.softmax(scores, dim=-1), DROPOUT, self.training)
        out = torch.einsum("bhij,bjhd->bihd", weights, v).reshape(b, t, d)
        return self.proj(out)


class ConvBlock(nn.Module):
    """Pointwise to 2x, GLU, depthwise convolution, masked BatchNorm, swish, pointwise."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.positionwise_conv1 = nn.Linear(dim, 2 * dim)
        self.depthwise_conv = nn.Conv1d(dim, dim, CONV_KERNEL, padding=CONV_KERNEL // 2, groups=dim)
        self.norm = MaskedBatchNorm(dim)
        self.positionwise_conv2 = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        a, gate = self.positionwise_conv1(x).chunk(2, dim=-1)
        h = (a * torch.sigmoid(gate)) * mask.unsqueeze(-1)
        h = self.depthwise_conv(h.transpose(1, 2)).transpose(1, 2)
        return self.positionwise_conv2(F.silu(self.norm(h, mask)))


class ConformerLayer(nn.Module):
    """One Conformer block, pre-norm residuals, a final LayerNorm."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.ffn1, self.ffn2 = FeedForward(dim), FeedForward(dim)
        self.self_att = RelPosSelfAttention(dim, heads)
        self.conv_block = ConvBlock(dim)
        names = ("ffn1", "self_att", "conv", "ffn2", "final")
        self.norms = nn.ModuleDict({n: nn.LayerNorm(dim, eps=LN_EPS) for n in names})

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        def drop(h: torch.Tensor) -> torch.Tensor:
            return shared_dropout(h, DROPOUT, self.training)

        n = self.norms
        x = 0.5 * drop(self.ffn1(n["ffn1"](x))) + x
        x = drop(self.self_att(n["self_att"](x), mask)) + x
        x = drop(self.conv_block(n["conv"](x), mask)) + x
        x = 0.5 * drop(self.ffn2(n["ffn2"](x))) + x
        return n["final"](x)


class ConformerCtc(nn.Module):
    """Frontend (two 3x3 convs + ReLU + 2x2 max-pool), projection, Conformer
    layers, logits over the 10 classes and the blank (last)."""

    def __init__(self, rows: int, model_dim: int, layers: int, heads: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, CONV_CHANNELS, 3, padding=1)
        self.conv2 = nn.Conv2d(CONV_CHANNELS, CONV_CHANNELS, 3, padding=1)
        self.input_projection = nn.Linear(CONV_CHANNELS * (rows // 4), model_dim, bias=False)
        self.layers = nn.ModuleList(ConformerLayer(model_dim, heads) for _ in range(layers))
        self.output = nn.Linear(model_dim, NUM_CLASSES + 1)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits ``[B, T / 4, 11]`` of features ``[B, T, rows]`` and their lengths."""
        h = x.unsqueeze(1)  # [B, 1, T, rows]
        for conv in (self.conv1, self.conv2):
            mask = torch.arange(h.shape[2], device=x.device)[None, :] < lengths[:, None]
            h = h * mask[:, None, :, None]  # the padding stays out of the convolution
            h = F.max_pool2d(F.relu(conv(h)), 2, ceil_mode=True)
            lengths = (lengths + 1) // 2
        b, c, t, f = h.shape
        h = self.input_projection(h.permute(0, 2, 3, 1).reshape(b, t, f * c))
        h = shared_dropout(h, DROPOUT, self.training)
        mask = torch.arange(t, device=x.device)[None, :] < lengths[:, None]
        for layer in self.layers:
            h = layer(h, mask)
        return self.output(h), lengths


def cosine_warmup(steps: int) -> tuple[int, object]:
    """verjus.optim.CosineWarmup's factor of the base lr at step ``t``."""
    warmup, total = max(1, int(WARMUP * steps)), max(2, steps)

    def factor(t: int) -> float:
        if t < warmup:
            return (t + 1) / warmup
        s = min(1.0, (t - warmup) / max(1, total - warmup))
        return (MIN_LR + (LR - MIN_LR) * (1 + math.cos(math.pi * s)) / 2) / LR

    return warmup, factor


def tensors(
    batch: verjus.data.StripBatch, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    return (
        torch.from_numpy(batch.features).to(device),
        torch.from_numpy(batch.lengths).long().to(device),
        torch.from_numpy(batch.labels).long().to(device),
        torch.from_numpy(batch.label_lengths).long().to(device),
    )


def ctc_objective(model: ConformerCtc, batch: verjus.data.StripBatch, dev: object) -> torch.Tensor:
    """The CTC loss summed over the batch / its size (as the RF model's)."""
    x, lengths, labels, label_lengths = tensors(batch, dev)
    logits, frames = model(x, lengths)
    log_probs = F.log_softmax(logits, dim=-1).transpose(0, 1)  # [T, B, C]
    loss = F.ctc_loss(log_probs, labels, frames, label_lengths, blank=NUM_CLASSES, reduction="sum")
    return loss / len(lengths)


def train_step(
    model: ConformerCtc, opt: torch.optim.Optimizer, batch: verjus.data.StripBatch, dev: object
) -> torch.Tensor:
    loss = ctc_objective(model, batch, dev)
    opt.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), CLIP)
    opt.step()
    return loss.detach()


def levenshtein(a: Sequence[int], b: Sequence[int]) -> int:
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row = row, [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            row[j] = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (ca != cb))
    return row[-1]


@torch.no_grad()
def label_error_rate(model: ConformerCtc, strips: verjus.data.ImageStrips, dev: object) -> float:
    """Greedy CTC decoding (best class per frame, repeats merged, blanks
    removed): summed edit distances / summed reference lengths."""
    model.eval()
    errors, total = 0, 0
    for batch in strips.batches(EVAL_BATCH):
        x, lengths, _, _ = tensors(batch, dev)
        logits, frames = model(x, lengths)
        best = logits.argmax(dim=-1).cpu().numpy()
        for b, n in enumerate(frames.cpu().numpy()):
            row = best[b, :n]
            keep = (row != NUM_CLASSES) & np.concatenate([[True], row[1:] != row[:-1]])
            ref = batch.labels[b, : batch.label_lengths[b]]
            errors += levenshtein(row[keep].tolist(), ref.tolist())
            total += len(ref)
    model.train()
    return errors / total


@dataclass
class Result:
    """Per epoch: mean training loss of the first and last tenth of steps,
    test label error rate, seconds."""

    first_loss: list[float] = field(default_factory=list)
    last_loss: list[float] = field(default_factory=list)
    ler: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--train-strips", type=int, default=6000)
    p.add_argument("--test-strips", type=int, default=1000)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--model-dim", type=int, default=128)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--data", default=None, help="Fashion-MNIST folder (default: system's)")
    p.add_argument("--threads", type=int, default=2)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> Result:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    train_x, train_y = verjus.data.fashion_mnist("train", args.data)
    test_x, test_y = verjus.data.fashion_mnist("test", args.data)
    train = verjus.data.ImageStrips(train_x, train_y, args.train_strips, seed=args.seed)
    test = verjus.data.ImageStrips(test_x, test_y, args.test_strips, seed=args.seed + 1)
    dev = torch.device(args.device)
    torch.manual_seed(args.seed)
    model = ConformerCtc(train.height, args.model_dim, args.layers, args.heads)
    glorot_init(model)
    model.to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    _, factor = cosine_warmup(args.epochs * len(train.plan(args.batch_size, args.seed)))
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    n_params = sum(p.numel() for p in model.parameters())
    print(
        f"{len(train)} training strips, {len(test)} test strips; model dim {args.model_dim}, "
        f"{args.layers} layers, {args.heads} heads; {n_params} parameters; {args.device}, "
        f"{torch.get_num_threads()} threads"
    )
    result = Result()
    for epoch in range(args.epochs):
        model.train()
        start = time.perf_counter()
        losses = []
        for batch in train.batches(args.batch_size, args.seed, epoch):
            losses.append(train_step(model, opt, batch, dev))
            schedule.step()
        values = torch.stack(losses).cpu().numpy()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        train_s = time.perf_counter() - start
        ler = label_error_rate(model, test, dev)
        tenth = max(1, len(values) // 10)
        result.first_loss.append(float(np.mean(values[:tenth])))
        result.last_loss.append(float(np.mean(values[-tenth:])))
        result.ler.append(ler)
        result.seconds.append(train_s)
        print(
            f"epoch {epoch + 1}: train loss {np.mean(values):.4f}, test LER {100 * ler:.2f} %, "
            f"{train_s:.1f} s/epoch ({1e3 * train_s / len(values):.0f} ms/step), "
            f"{time.perf_counter() - start - train_s:.1f} s test"
        )
    return result


if __name__ == "__main__":
    main()
