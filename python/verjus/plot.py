"""Training curves as a PNG (matplotlib, without a display).

``curves.png`` of a run folder: one panel per ``Panel``, each drawing some
per-epoch metrics. A classifier's run (the default, ``LOSS_AND_ACCURACY``)
shows the training and test loss on the left and the test accuracy on the
right; a character model's run (``BITS_PER_CHARACTER``) shows the bits per
character on training and validation, the figures its console lines give.
Written atomically, like every file of a run folder.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping, Sequence

from verjus._files import write_bytes_atomic

__all__ = ["BITS_PER_CHARACTER", "LOSS_AND_ACCURACY", "Panel", "plot_curves"]

# (title, y-axis label, ((metric key, legend label), ...)): one panel of the figure.
Panel = tuple[str, str, tuple[tuple[str, str], ...]]

LOSS_AND_ACCURACY: tuple[Panel, ...] = (
    ("loss", "loss", (("train_loss", "train"), ("test_loss", "test"))),
    ("test accuracy", "accuracy", (("test_accuracy", "test"),)),
)
BITS_PER_CHARACTER: tuple[Panel, ...] = (
    (
        "bits per character",
        "bits per character",
        (("train_bpc", "train"), ("validation_bpc", "validation")),
    ),
)


def plot_curves(
    epochs: Sequence[Mapping[str, float]],
    path: str | os.PathLike[str],
    *,
    title: str = "",
    panels: Sequence[Panel] = LOSS_AND_ACCURACY,
) -> None:
    """Draws the metrics of ``epochs`` (dicts with ``epoch`` and the panels'
    keys) into ``path``, a panel each; a metric that some epoch lacks is left
    out of its panel."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5 * len(panels), 4), layout="constrained")
    x = [int(e["epoch"]) for e in epochs]
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (name, ylabel, series) in zip(axes, panels, strict=True):
        for key, label in series:
            if all(key in e for e in epochs):
                ax.plot(x, [e[key] for e in epochs], marker="o", label=label)
        ax.set(xlabel="epoch", ylabel=ylabel, title=name)
        if len(series) > 1 and ax.lines:
            ax.legend()
        ax.grid(alpha=0.3)
        ax.set_xticks(x)
    if title:
        fig.suptitle(title)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    write_bytes_atomic(path, buf.getvalue())
