"""Tiny runs of ``examples/python/rf_fashion.py`` on the synthetic Fashion-MNIST
of ``conftest.fashion_dir``: both models learn its easy classes through the
engine (each image one sequence of a batch of up to 128) and print a line per
epoch."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "python" / "rf_fashion.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("rf_fashion", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("model", "epochs"), [("mlp", 2), ("cnn", 1)])
def test_learns_and_prints_each_epoch(
    example, fashion_dir: Path, model: str, epochs: int, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("VERJUS_FASHION_MNIST", str(fashion_dir))
    accuracies = example.main(["--model", model, "--epochs", str(epochs)])
    out = capsys.readouterr().out
    assert len(accuracies) == epochs
    assert accuracies[-1] > 0.8  # 10 classes: chance is 0.1
    for epoch, accuracy in enumerate(accuracies, 1):
        assert f"epoch {epoch}: train loss " in out
        assert f"test accuracy {accuracy:.4f}" in out
    assert out.count("ms/step") == epochs
