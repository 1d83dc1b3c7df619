"""Defaults that follow RETURNN's behavior version (and its ``rf_*`` config
options), against RETURNN's own results on its torch backend, and per version
without RETURNN.

RETURNN's frontend changes some defaults with its global behavior version:
the attention weights' dropout shares one mask over all but the keys' axis up
to version 18; ``rf.pad`` pads a dynamic dim after its padded frames below 21;
``rf.stft``, ``rf.transposed_conv`` and ``rf.scatter`` (so ``scatter_count``
and ``scatter_mean``) leave the padding frames in up to 22; a masked scatter
with a ``fill_value`` other than the mode's neutral one sends that value from
the padding frames to their indices below 25; SpecAugment's number of time
masks follows the longest sequence below 28; the Transformer decoder has
no shared embedding, no embedding scale and no input dropout by default
below 20; and below 34 ``rf.moments`` takes its mean over the valid frames
even with ``use_mask=False``, and ``rf.BatchNorm``'s masked path (with
``distributed``) masks whatever its ``use_mask``. The option
``rf_dropout_broadcast`` (True by default) decides the modules' dropout
broadcast. verjus follows them where RETURNN's settings are in effect
(``verjus.rf.backend.returnn_behavior_version``).

The comparisons run each case on RETURNN's rf (in the reference interpreter,
see ``test_rf_conv_behavior_version``) and on verjus.rf under the same
settings; the inputs' padding frames hold random values, so that they show
where they enter a result. The per-version checks set the settings through
stand-ins of RETURNN's modules, so they need no RETURNN.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import types
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from test_rf_conv_behavior_version import (
    LATEST,
    REFERENCE_HEADER,
    returnn_settings,
    run_reference,
)

import verjus.rf as rf
from verjus.rf import Dim
from verjus.rf.attention import _att_dropout_broadcast_default
from verjus.rf.decoder.transformer import TransformerDecoder

specaugment_module = importlib.import_module("verjus.rf.audio.specaugment")

LENS = [7, 4, 6]
B, T, F = len(LENS), max(LENS), 3
SAMPLE_LENS = [40, 23, 31]  # the signals of the STFT
OUT = 4  # the scatter's out dim

# The same code builds and runs a case on RETURNN's rf and on verjus.rf; each
# case gives named arrays (lengths as "<name>:lens").
CASE_CODE = """
import importlib
import numpy as np


def source(rf, Dim, x, lens):
    batch = Dim(x.shape[0], name="batch")
    time = Dim(rf.convert_to_tensor(lens, dims=[batch]), name="time")
    feats = [Dim(n, name=f"feat{i}") for i, n in enumerate(x.shape[2:])]
    return rf.convert_to_tensor(x, dims=[batch, time, *feats]), batch, time, feats


def lengths(dim, batch, to_numpy):
    size = dim.dyn_size_ext
    if size is not None and batch in size.dims:
        return to_numpy(size.copy_transpose([batch]))
    return np.full([batch.dimension], dim.get_dim_value())


def ordered(y, dims, to_numpy):
    return to_numpy(y.copy_transpose([*dims, *[d for d in y.dims if d not in dims]]))


def case_att(rf, Dim, data, to_numpy):
    # Uniform weights 1/5 with values the identity: the output is the weights
    # after dropout (0 or 2/5), per sequence and query frame.
    batch, query, kv = Dim(3, name="batch"), Dim(4, name="query"), Dim(5, name="kv")
    key, value = Dim(2, name="key"), Dim(5, name="value")
    q = rf.convert_to_tensor(np.zeros((3, 4, 2), np.float32), dims=[batch, query, key])
    k = rf.convert_to_tensor(np.zeros((3, 5, 2), np.float32), dims=[batch, kv, key])
    eye = np.tile(np.eye(5, dtype=np.float32)[None], (3, 1, 1))
    v = rf.convert_to_tensor(eye, dims=[batch, kv, value])
    with rf.get_run_ctx().train_flag_ctx(True):
        att = rf.dot_attention(q, k, v, key_dim=key, axis=kv, att_dropout=0.5)
    return {"att": ordered(att, [batch, query, value], to_numpy)}


def case_pad(rf, Dim, data, to_numpy):
    x, batch, time, (feat,) = source(rf, Dim, data["x"], data["lens"])
    y, (out,) = rf.pad(x, axes=[time], padding=[(1, 2)], value=7.0)
    return {
        "pad": ordered(y, [batch, out, feat], to_numpy),
        "pad:lens": lengths(out, batch, to_numpy),
    }


def case_stft(rf, Dim, data, to_numpy):
    x, batch, time, _ = source(rf, Dim, data["signal"], data["signal_lens"])
    y, frames, freq = rf.stft(x, in_spatial_dim=time, frame_step=4, frame_length=8)
    return {
        "stft": ordered(y, [batch, frames, freq], to_numpy),
        "stft:lens": lengths(frames, batch, to_numpy),
    }


def case_transposed_conv(rf, Dim, data, to_numpy):
    x, batch, time, (c_in,) = source(rf, Dim, data["x"], data["lens"])
    c_out, width = Dim(2, name="c_out"), Dim(3, name="width")
    filt = rf.convert_to_tensor(data["filter"], dims=[c_in, c_out, width])
    y, (out,) = rf.transposed_conv(
        x, in_dim=c_in, out_dim=c_out, in_spatial_dims=[time], filter=filt, filter_size=[width],
        padding="valid", strides=[2],
    )
    return {
        "tconv": ordered(y, [batch, out, c_out], to_numpy),
        "tconv:lens": lengths(out, batch, to_numpy),
    }


def case_scatter(rf, Dim, data, to_numpy):
    x, batch, time, (feat,) = source(rf, Dim, data["x"], data["lens"])
    out = Dim(int(data["out"]), name="out")
    indices = rf.convert_to_tensor(data["indices"], dims=[batch, time])
    kw = dict(indices=indices, indices_dim=time, out_dim=out)
    results = {
        "sum": rf.scatter(x, **kw),
        "max-fill": rf.scatter(x, mode="max", fill_value=0.5, **kw),
        "mean": rf.scatter_mean(x, **kw),
        "count": rf.scatter_count(**kw),
        "count-fill": rf.scatter_count(fill_value=1, **kw),
    }
    return {k: ordered(y, [batch, out], to_numpy) for k, y in results.items()}


def case_moments(rf, Dim, data, to_numpy):
    # use_mask=False: the mean is masked anyway below 34. BatchNorm's masked path
    # (distributed, one worker) runs moments masked anyway below 34; the plain one
    # (PyTorch's batch_norm: unbiased running variance) in every version.
    x, batch, time, (feat,) = source(rf, Dim, data["x"], data["lens"])
    mean, variance = rf.moments(x, axis=[batch, time], use_mask=False)
    results = {"mean": to_numpy(mean), "variance": to_numpy(variance)}
    for name, opts in [("bn-distributed", {"distributed": True}), ("bn", {})]:
        bn = rf.BatchNorm(feat, use_mask=False, momentum=0.5, **opts)
        with rf.get_run_ctx().train_flag_ctx(True):
            y = bn(x)
        results[name] = ordered(y, [batch, time, feat], to_numpy)
        results[name + "-running_mean"] = to_numpy(bn.running_mean)
        results[name + "-running_variance"] = to_numpy(bn.running_variance)
    return results


def case_dropout(rf, Dim, data, to_numpy):
    conformer = importlib.import_module(rf.__name__ + ".encoder.conformer")
    ff = conformer.ConformerPositionwiseFeedForward(Dim(4, name="model"), ff_dim=8)
    return {
        "default": np.array(rf.dropout_broadcast_default()),
        "conformer_ff": np.array(ff.dropout_broadcast),
    }


def case_decoder(rf, Dim, data, to_numpy):
    decoder = importlib.import_module(rf.__name__ + ".decoder.transformer").TransformerDecoder(
        None, Dim(7, name="vocab"), Dim(16, name="model"), num_layers=1, num_heads=2, dropout=0.3
    )
    return {
        "share_embedding": np.array(decoder.logits.weight is decoder.input_embedding.weight),
        "input_embedding_scale": np.array(decoder.input_embedding_scale),
        "input_dropout": np.array(decoder.input_dropout),
    }
"""

# RETURNN's max_num of SpecAugment's time masks, per sequence (its random_mask watched).
SPECAUGMENT_REFERENCE = """
def case_specaugment(rf, Dim, data, to_numpy):
    module = importlib.import_module("returnn.frontend.audio.specaugment")

    x, batch, time, (feat,) = source(rf, Dim, data["spec"], data["spec_lens"])
    seen = []

    def watch(x, **kwargs):
        seen.append(kwargs["max_num"])
        return original(x, **kwargs)

    original, module.random_mask = module.random_mask, watch
    try:
        module.specaugment(
            x, spatial_dim=time, feature_dim=feat, global_train_step_dependent=False,
            only_on_train=False, num_spatial_mask_factor=10, max_consecutive_feature_dims=0,
        )
    finally:
        module.random_mask = original
    max_num = seen[0]
    max_num = max_num.copy_compatible_to_dims([batch]) if max_num.dims else max_num
    return {"max_num": np.broadcast_to(to_numpy(max_num), [batch.dimension])}
"""

REFERENCE_SCRIPT = (
    REFERENCE_HEADER
    + """


def to_numpy(t):
    a = t.raw_tensor.detach().cpu().numpy()
    return np.stack([a.real, a.imag], -1) if np.iscomplexobj(a) else a


results = {}
"""
    + CASE_CODE
    + SPECAUGMENT_REFERENCE
    + """
for case in request["cases"]:
    BehaviorVersion._reset((case["version"], 0))
    with global_config_ctx(Config(case["options"])):
        out = globals()["case_" + case["item"]](rf, Dim, data, to_numpy)
    results.update({f"{case['id']}/{k}": v for k, v in out.items()})
np.savez(request["outputs"], **results)
"""
)

_namespace: dict[str, Any] = {}
exec(CASE_CODE, _namespace)  # the shared case code above

# Per item: (name, behavior version, RETURNN config options).
SETTINGS = {
    "att": [
        ("v18", 18, {}),
        ("v19", 19, {}),
        ("latest-rf_att_dropout_broadcast", LATEST, {"rf_att_dropout_broadcast": True}),
        ("v18-rf_dropout_broadcast-False", 18, {"rf_dropout_broadcast": False}),
    ],
    "pad": [("v20", 20, {}), ("v21", 21, {})],
    "stft": [
        ("v22", 22, {}),
        ("v23", 23, {}),
        ("v0-rf_use_mask_stft", 0, {"rf_use_mask_stft": True}),
    ],
    "transposed_conv": [
        ("v22", 22, {}),
        ("v23", 23, {}),
        ("latest-rf_use_mask-False", LATEST, {"rf_use_mask": False}),
        ("v0-rf_use_mask_transposed_conv", 0, {"rf_use_mask_transposed_conv": True}),
    ],
    "scatter": [
        ("v22", 22, {}),
        ("v24", 24, {}),
        ("v25", 25, {}),
        ("v24-rf_scatter_use_fixed_masking", 24, {"rf_scatter_use_fixed_masking": True}),
    ],
    "specaugment": [
        ("v27", 27, {}),
        ("v28", 28, {}),
        ("v27-rf_specaugment_num_masks_per_seq", 27, {"rf_specaugment_num_masks_per_seq": True}),
    ],
    "decoder": [("v19", 19, {}), ("v20", 20, {})],
    "moments": [
        ("v33", 33, {}),
        ("v34", 34, {}),
        ("v33-rf_moments_use_fixed_masking", 33, {"rf_moments_use_fixed_masking": True}),
        (
            "latest-rf_moments_use_fixed_masking-False",
            LATEST,
            {"rf_moments_use_fixed_masking": False},
        ),
    ],
    "dropout": [
        ("v0", 0, {}),
        ("latest", LATEST, {}),
        ("latest-rf_dropout_broadcast-False", LATEST, {"rf_dropout_broadcast": False}),
        ("v0-rf_dropout_broadcast-True", 0, {"rf_dropout_broadcast": True}),
    ],
}
CASES = [(item, *setting) for item, settings in SETTINGS.items() for setting in settings]


def inputs() -> dict[str, np.ndarray]:
    """Inputs with random values in their padding frames (and padding indices)."""
    g = np.random.default_rng(0)
    return {
        "lens": np.array(LENS, np.int32),
        "x": g.standard_normal((B, T, F)).astype(np.float32),
        "filter": g.standard_normal((F, 2, 3)).astype(np.float32),
        "signal_lens": np.array(SAMPLE_LENS, np.int32),
        "signal": g.standard_normal((B, max(SAMPLE_LENS))).astype(np.float32),
        "out": np.array(OUT),
        "indices": g.integers(0, OUT, (B, T)).astype(np.int32),
        "spec_lens": np.array([250, 30, 120], np.int32),
        "spec": g.standard_normal((B, 250, F)).astype(np.float32),
    }


def case_specaugment(rf_: Any, dim: type, data: dict, to_numpy: Any) -> dict[str, np.ndarray]:
    """verjus's max_num of SpecAugment's time masks, per sequence (its
    ``_random_mask`` watched), as ``SPECAUGMENT_REFERENCE`` for RETURNN."""
    x, _, time, (feat,) = _namespace["source"](rf_, dim, data["spec"], data["spec_lens"])
    seen = []
    original = specaugment_module._random_mask

    def watch(x: Any, mask_axis: Dim, *args: Any) -> Any:
        seen.append(args[2])  # (batch_dims, min_num, max_num, ...)
        return original(x, mask_axis, *args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(specaugment_module, "_random_mask", watch)
        rf_.audio.specaugment(
            x,
            spatial_dim=time,
            feature_dim=feat,
            global_train_step_dependent=False,
            only_on_train=False,
            num_spatial_mask_factor=10,
            max_consecutive_feature_dims=0,
        )
    return {"max_num": seen[0]}


def run_case(item: str, data: dict) -> dict[str, np.ndarray]:
    """A case on verjus.rf under the settings in effect."""
    run = case_specaugment if item == "specaugment" else _namespace[f"case_{item}"]
    return run(rf, Dim, data, lambda t: t.numpy())


@pytest.fixture(scope="module")
def returnn_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, np.ndarray]:
    """RETURNN's results of every case, by ``<item>/<setting>/<name>``."""
    cases = [
        {"id": f"{item}/{name}", "item": item, "version": version, "options": options}
        for item, name, version, options in CASES
    ]
    return run_reference(tmp_path_factory, REFERENCE_SCRIPT, cases, inputs())


def shared_over_query_and_batch(att: np.ndarray) -> bool:
    """Whether the dropout mask of ``case_att``'s weights ``[batch, query, kv]``
    is one mask over the keys for all sequences and query frames."""
    kept = att != 0
    return bool((kept == kept[:1, :1]).all())


@pytest.mark.parametrize(
    ("item", "name", "version", "options"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES]
)
def test_equals_returnn(
    returnn_results: dict, item: str, name: str, version: int, options: dict
) -> None:
    with returnn_settings(version, options):
        got = run_case(item, inputs())
    prefix = f"{item}/{name}/"
    want = {k[len(prefix) :]: v for k, v in returnn_results.items() if k.startswith(prefix)}
    assert sorted(got) == sorted(want)
    if item == "att":  # dropout draws differ: compare whether the mask is shared
        assert shared_over_query_and_batch(got["att"]) == shared_over_query_and_batch(want["att"])
        return
    for key, value in got.items():  # padding frames too: a later unmasked op reads them
        np.testing.assert_allclose(value, want[key], rtol=1e-5, atol=1e-5, err_msg=key)


# -- per version, without RETURNN ----------------------------------------------------------


@contextlib.contextmanager
def stand_in_settings(version: int | None, options: dict | None = None) -> Iterator[None]:
    """RETURNN's settings as verjus reads them (``verjus.rf.backend``), by stand-ins
    of RETURNN's modules: behavior ``version`` (None: none set), and a global
    config with ``options`` if given."""

    class Versions:
        @staticmethod
        def get_if_set() -> int | None:
            return version

        @staticmethod
        def get() -> int:
            return version or 0

    config = None if options is None else types.SimpleNamespace(typed_dict=options, dict={})
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(
            sys.modules, "returnn.util.basic", types.SimpleNamespace(BehaviorVersion=Versions)
        )
        patch.setitem(
            sys.modules,
            "returnn.config",
            types.SimpleNamespace(get_global_config=lambda raise_exception=True: config),
        )
        yield


@pytest.mark.parametrize(
    ("version", "options", "broadcast"),
    [
        (None, None, False),
        (0, None, True),
        (18, None, True),
        (19, None, False),
        (LATEST, {"rf_att_dropout_broadcast": True}, True),
        (18, {"rf_dropout_broadcast": False}, False),
        (18, {"rf_att_dropout_broadcast": True, "rf_dropout_broadcast": False}, True),
    ],
)
def test_att_dropout_broadcast_per_version(
    version: int | None, options: dict | None, broadcast: bool
) -> None:
    with stand_in_settings(version, options):
        assert _att_dropout_broadcast_default() is broadcast
        module = rf.SelfAttention(
            Dim(4, name="in"),
            None,
            key_dim_total=Dim(4, name="key"),
            value_dim_total=Dim(4, name="value"),
            num_heads=2,
        )
        assert module.att_dropout_broadcast is broadcast
        att = run_case("att", inputs())["att"]
    assert shared_over_query_and_batch(att) is broadcast


def test_pad_handle_dynamic_dims_per_version() -> None:
    data = inputs()
    with stand_in_settings(21):
        new = run_case("pad", data)
    with stand_in_settings(20):
        old = run_case("pad", data)
    x = data["x"]
    np.testing.assert_array_equal(new["pad:lens"], np.array(LENS) + 3)
    for b, n in enumerate(LENS):  # the value right after each sequence's end
        np.testing.assert_array_equal(
            new["pad"][b, : n + 3], np.pad(x[b, :n], [(1, 2), (0, 0)], constant_values=7.0)
        )
    # Before 21: after the padded frames, which are kept; one size for all.
    np.testing.assert_array_equal(old["pad:lens"], [T + 3] * B)
    np.testing.assert_array_equal(
        old["pad"], np.pad(x, [(0, 0), (1, 2), (0, 0)], constant_values=7.0)
    )


@pytest.mark.parametrize("item", ["stft", "transposed_conv", "scatter"])
def test_use_mask_default_per_version(item: str) -> None:
    """Up to version 22 the default is ``use_mask=False``, from 23 on True;
    the options override the version. The padding frames change the results
    unmasked."""
    data = inputs()

    def results(version: int | None, options: dict | None = None) -> dict[str, np.ndarray]:
        with stand_in_settings(version, options):
            return run_case(item, data)

    unmasked, masked = results(22), results(23)
    with pytest.raises(AssertionError):
        assert_same(unmasked, masked)
    assert_same(results(0, {f"rf_use_mask_{item}": True}), masked)
    assert_same(results(23, {"rf_use_mask": False}), unmasked)


def assert_same(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert sorted(got) == sorted(want)
    for key in got:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-6, atol=1e-6, err_msg=key)


def test_scatter_fill_value_masking_per_version() -> None:
    """Before version 25 the padding frame of the first sequence (value 9,
    index 1) sends the fill value 5 to index 1: summed there, the max there,
    and counted there."""
    batch = Dim(2, name="batch")
    time = Dim(rf.convert_to_tensor(np.array([2, 3], np.int32), dims=[batch]), name="time")
    out = Dim(3, name="out")
    x = rf.convert_to_tensor(np.array([[1, 2, 9], [4, 4, 4]], np.float32), dims=[batch, time])
    indices = rf.convert_to_tensor(np.array([[0, 1, 1], [2, 2, 2]], np.int32), dims=[batch, time])
    kw = {"indices": indices, "indices_dim": time, "out_dim": out}

    def results() -> list[list[list[float]]]:
        return [
            rf.scatter(x, fill_value=5.0, **kw).numpy().tolist(),
            rf.scatter(x, mode="max", fill_value=5.0, **kw).numpy().tolist(),
            rf.scatter_count(fill_value=1, **kw).numpy().tolist(),
        ]

    fixed = [[[1, 2, 5], [5, 5, 12]], [[1, 2, 5], [5, 5, 4]], [[1, 1, 1], [1, 1, 3]]]
    with stand_in_settings(25):
        assert results() == fixed
    with stand_in_settings(24, {"rf_scatter_use_fixed_masking": True}):
        assert results() == fixed
    with stand_in_settings(24):
        assert results() == [
            [[1, 7, 5], [5, 5, 12]],
            [[1, 5, 5], [5, 5, 4]],
            [[1, 2, 1], [1, 1, 3]],
        ]


def test_specaugment_num_masks_per_seq_per_version() -> None:
    """The most time masks: a tenth of the sequence's own length times 4 from
    version 28 on, else of the longest one (up to the own length, the masks'
    starts being distinct frames of it)."""
    data = inputs()
    own = [100, 12, 48]
    for version, options, want in [
        (None, None, own),
        (28, None, own),
        (27, None, [100] * 3),
        (27, {"rf_specaugment_num_masks_per_seq": True}, own),
        (LATEST, {"rf_specaugment_num_masks_per_seq": False}, [100] * 3),
    ]:
        with stand_in_settings(version, options):
            assert run_case("specaugment", data)["max_num"].tolist() == want, (version, options)


def test_transformer_decoder_defaults_per_version() -> None:
    for version, want in [
        (None, (True, 4.0, 0.3)),
        (20, (True, 4.0, 0.3)),
        (19, (False, 1.0, 0.0)),
    ]:
        with stand_in_settings(version):
            got = run_case("decoder", {})
        assert (got["share_embedding"], got["input_embedding_scale"], got["input_dropout"]) == want
    with stand_in_settings(19):  # explicit arguments win
        decoder = TransformerDecoder(
            None, Dim(7, name="vocab"), 16, num_layers=1, share_embedding=True, input_dropout=0.1
        )
    assert decoder.logits.weight is decoder.input_embedding.weight
    assert decoder.input_dropout == 0.1


def test_moments_masking_per_version() -> None:
    """``moments(use_mask=False)``: below version 34 the mean is that of the
    valid frames, the variance around it over every frame; from 34 on both over
    every frame. ``distributed`` follows ``use_mask`` in every version."""
    data = inputs()
    x_np, ok = data["x"], np.arange(T)[None, :] < np.array(LENS)[:, None]
    unmasked_mean, masked_mean = x_np.reshape(-1, F).mean(0), x_np[ok].mean(0)
    fixed = (unmasked_mean, ((x_np - unmasked_mean) ** 2).reshape(-1, F).mean(0))
    old = (masked_mean, ((x_np - masked_mean) ** 2).reshape(-1, F).mean(0))
    assert not np.allclose(fixed[0], old[0], atol=1e-3)
    for version, options, want in [
        (None, None, fixed),
        (34, None, fixed),
        (33, None, old),
        (0, None, old),
        (33, {"rf_moments_use_fixed_masking": True}, fixed),
        (LATEST, {"rf_moments_use_fixed_masking": False}, old),
    ]:
        with stand_in_settings(version, options):
            x, batch, time, _ = _namespace["source"](rf, Dim, x_np, data["lens"])
            got = rf.moments(x, axis=[batch, time], use_mask=False)
            distributed = rf.moments(x, axis=[batch, time], use_mask=False, distributed=True)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-5, err_msg=str((version, options)))
        for g, w in zip(distributed, fixed, strict=True):
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-5, err_msg=str((version, options)))


def test_batch_norm_masking_per_version() -> None:
    """``BatchNorm(use_mask=False)`` over a dynamic dim: PyTorch's batch norm in
    every version (every frame, unbiased running variance); with ``distributed``
    RETURNN's masked path (biased running variance), masked below version 34
    whatever ``use_mask`` says."""
    data = inputs()
    x_np, ok = data["x"], np.arange(T)[None, :] < np.array(LENS)[:, None]
    n = B * T

    def stats(frames: np.ndarray, unbiased: bool) -> tuple[np.ndarray, np.ndarray]:
        var = frames.var(0) * (len(frames) / (len(frames) - 1) if unbiased else 1)
        return frames.mean(0), var

    def run(distributed: bool | None) -> tuple[np.ndarray, np.ndarray]:
        x, _, _, (feat,) = _namespace["source"](rf, Dim, x_np, data["lens"])
        bn = rf.BatchNorm(feat, use_mask=False, momentum=1.0, distributed=distributed)
        with rf.get_run_ctx().train_flag_ctx(True):
            bn(x)
        return bn.running_mean.numpy(), bn.running_variance.numpy()

    every = x_np.reshape(n, F)
    for version, options, distributed, want in [
        (None, None, False, stats(every, unbiased=True)),
        (33, None, False, stats(every, unbiased=True)),
        (None, None, True, stats(every, unbiased=False)),
        (34, None, True, stats(every, unbiased=False)),
        (33, None, True, stats(x_np[ok], unbiased=False)),
        (33, {"rf_moments_use_fixed_masking": True}, True, stats(every, unbiased=False)),
        (33, {"rf_batch_norm_distributed": True}, None, stats(x_np[ok], unbiased=False)),
        (34, {"rf_batch_norm_distributed": True}, None, stats(every, unbiased=False)),
    ]:
        with stand_in_settings(version, options):
            got = run(distributed)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-5, err_msg=str((version, options)))


@pytest.mark.parametrize(
    ("version", "options", "broadcast"),
    [
        (None, None, True),
        (0, None, True),
        (LATEST, {}, True),
        (LATEST, {"rf_dropout_broadcast": False}, False),
        (0, {"rf_dropout_broadcast": False}, False),
        (0, {"rf_dropout_broadcast": True}, True),
    ],
)
def test_dropout_broadcast_default_follows_the_config(
    version: int | None, options: dict | None, broadcast: bool
) -> None:
    """``rf_dropout_broadcast`` decides whether the Conformer's feed-forward
    shares its dropout mask over batch and time (its inner activations here the
    input, all ones: 0 where dropped, 2 where kept)."""
    model = Dim(4, name="model")
    with stand_in_settings(version, options):
        assert rf.dropout_broadcast_default() is broadcast
        ff = rf.encoder.conformer.ConformerPositionwiseFeedForward(
            model, ff_dim=model, dropout=0.5, activation=lambda x: x
        )
    assert ff.dropout_broadcast is broadcast
    eye = np.eye(4, dtype=np.float32)
    for linear in (ff.linear_ff, ff.linear_out):
        linear.weight.assign(eye)
        linear.bias.assign(np.zeros(4, np.float32))
    batch, time = Dim(3, name="batch"), Dim(50, name="time")
    x = rf.convert_to_tensor(np.ones((3, 50, 4), np.float32), dims=[batch, time, model])
    with rf.get_run_ctx().train_flag_ctx(True):
        y = ff(x).copy_transpose([batch, time, model]).numpy()
    kept = y != 0
    assert bool((kept == kept[:1, :1]).all()) is broadcast
