"""Training curves as a PNG (matplotlib, without a display).

``curves.png`` of a run folder: the training and test loss per epoch on the
left, the test accuracy on the right. Written atomically, like every file of a
run folder.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping, Sequence

from verjus._files import write_bytes_atomic

__all__ = ["plot_curves"]


def plot_curves(
    epochs: Sequence[Mapping[str, float]], path: str | os.PathLike[str], *, title: str = ""
) -> None:
    """Draws loss and accuracy per epoch from ``epochs`` (dicts with ``epoch`` and
    any of ``train_loss``, ``test_loss``, ``test_accuracy``) into ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4), layout="constrained")
    loss_ax, acc_ax = fig.subplots(1, 2)
    x = [int(e["epoch"]) for e in epochs]
    for key, label in (("train_loss", "train"), ("test_loss", "test")):
        if all(key in e for e in epochs):
            loss_ax.plot(x, [e[key] for e in epochs], marker="o", label=label)
    loss_ax.set(xlabel="epoch", ylabel="loss", title="loss")
    loss_ax.legend()
    if all("test_accuracy" in e for e in epochs):
        acc_ax.plot(x, [e["test_accuracy"] for e in epochs], marker="o", color="tab:green")
    acc_ax.set(xlabel="epoch", ylabel="accuracy", title="test accuracy")
    for ax in (loss_ax, acc_ax):
        ax.grid(alpha=0.3)
        ax.set_xticks(x)
    if title:
        fig.suptitle(title)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    write_bytes_atomic(path, buf.getvalue())
