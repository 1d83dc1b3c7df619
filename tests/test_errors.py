"""Every error path ends in a Python exception with a message that names what was
wrong; none crashes the interpreter."""

import json
import os

import numpy as np
import pytest
from conftest import NETS

import verjus
from verjus import nn, optim


def cnn() -> verjus.Network:
    return verjus.Network.from_def(NETS / "fashion_cnn.json")


def test_a_bad_input_shape_names_both_shapes():
    with pytest.raises(ValueError, match=r"\[1, 28, 28\]") as info:
        cnn().forward(np.zeros((2, 1, 28, 27), np.float32))
    assert "27" in str(info.value)


def test_a_definition_shape_mismatch_names_the_layer_and_shapes():
    seq = nn.Sequential(
        nn.Linear(8, name="fc1"), nn.Linear(4, in_features=9, name="fc2"), input_shape=(3,)
    )
    with pytest.raises(ValueError, match=r"fc2") as info:
        verjus.Network.from_def(seq)
    assert "8" in str(info.value)
    assert "9" in str(info.value)


def test_a_bad_kernel_names_the_layer():
    seq = nn.Sequential(nn.Conv2d(4, 9, name="big"), input_shape=(1, 5, 5))
    with pytest.raises(ValueError, match=r"big"):
        verjus.Network.from_def(seq)


def test_an_unknown_input_and_an_unknown_type_are_definition_errors():
    definition = json.loads((NETS / "fashion_mlp.json").read_text())
    definition["layers"][1]["inputs"] = ["nowhere"]
    with pytest.raises(ValueError, match=r"nowhere"):
        verjus.Network.from_def(definition)
    definition = json.loads((NETS / "fashion_mlp.json").read_text())
    definition["layers"][2]["type"] = "Relu6"
    with pytest.raises(ValueError, match=r"Relu6"):
        verjus.Network.from_def(definition)


def test_malformed_json_is_a_value_error():
    with pytest.raises(ValueError, match=r"JSON"):
        verjus.Network.from_def('{"inputs": [')


def test_definition_text_and_files_in_odd_shapes(tmp_path):
    # A JSON array was taken for a file name; a byte-order mark and a binary
    # file gave errors that named neither the file nor the problem.
    with pytest.raises(ValueError, match=r"JSON"):
        verjus.Network.from_def("[1, 2]")
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + (NETS / "fashion_mlp.json").read_bytes())
    plain = verjus.Network.from_def(NETS / "fashion_mlp.json")
    assert verjus.Network.from_def(bom).to_def() == plain.to_def()
    binary = tmp_path / "weights.bin"
    binary.write_bytes(b"\x00\x01\xff\xfe")
    with pytest.raises(ValueError, match=r"weights\.bin: not a network definition: byte 2"):
        verjus.Network.from_def(binary)


def test_a_missing_definition_file_is_an_os_error(tmp_path):
    with pytest.raises(OSError, match=r"missing\.json"):
        verjus.Network.from_def(tmp_path / "missing.json")


def test_a_missing_or_damaged_weights_file_is_an_os_error(tmp_path):
    net = verjus.Network.from_def(NETS / "fashion_mlp.json")
    with pytest.raises(OSError, match=r"nothing\.safetensors"):
        net.load_weights(tmp_path / "nothing.safetensors")
    net.save_weights(tmp_path / "w.safetensors")
    data = (tmp_path / "w.safetensors").read_bytes()
    (tmp_path / "cut.safetensors").write_bytes(data[: len(data) // 2])
    before = net.state_dict()
    with pytest.raises(OSError, match=r"cut\.safetensors"):
        net.load_weights(tmp_path / "cut.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"\xff" * 64)
    with pytest.raises(OSError, match=r"junk\.safetensors"):
        net.load_weights(tmp_path / "junk.safetensors")
    for name, value in net.state_dict().items():
        np.testing.assert_array_equal(value, before[name])


def test_weights_of_another_network_are_refused(tmp_path):
    cnn().save_weights(tmp_path / "cnn.safetensors")
    mlp = verjus.Network.from_def(NETS / "fashion_mlp.json")
    with pytest.raises(ValueError, match=r"(conv1|fc1).*cnn\.safetensors"):
        mlp.load_weights(tmp_path / "cnn.safetensors")


def test_a_state_dict_must_be_a_mapping():
    net = verjus.Network.from_def(NETS / "fashion_mlp.json")
    with pytest.raises(TypeError, match=r"mapping of parameter names to arrays, got a list"):
        net.load_state_dict([1, 2])


def test_a_missing_device_is_a_runtime_error():
    if not verjus.cuda.is_available():
        with pytest.raises(RuntimeError, match=r"(?i)cuda"):
            verjus.Trainer(cnn(), optim.Adam(), device="cuda")
    with pytest.raises(ValueError, match=r"tpu"):
        verjus.Trainer(cnn(), optim.Adam(), device="tpu")


def test_bad_optimizer_settings_name_the_field():
    with pytest.raises(ValueError, match=r"momentum"):
        verjus.Trainer(cnn(), optim.SGD(lr=0.1, momentum=1.5))
    with pytest.raises(ValueError, match=r"lr"):
        verjus.Trainer(cnn(), optim.Adam(lr=-1.0))
    with pytest.raises(ValueError, match=r"total_steps"):
        verjus.Trainer(
            cnn(), optim.Adam(schedule=optim.CosineWarmup(warmup_steps=5, total_steps=5))
        )


def test_bad_training_data_is_a_value_error():
    trainer = verjus.Trainer(cnn(), optim.Adam())
    x = np.zeros((4, 1, 28, 28), np.float32)
    with pytest.raises(ValueError, match=r"\[4"):
        trainer.train_minibatch(x, np.zeros(3, np.int64))
    with pytest.raises(ValueError, match=r"label"):
        trainer.train_minibatch(x, np.full(4, 10, np.int64))  # only 10 classes
    with pytest.raises(ValueError, match=r"label 9223372036854775808 does not fit int64"):
        trainer.train_minibatch(x, np.array([2**63, 0, 0, 0], np.uint64))  # was wrapped to -1
    with pytest.raises(ValueError, match=r"\[1, 28, 28\]"):
        trainer.fit(np.zeros((4, 784), np.float32), np.zeros(4, np.int64), progress=False)
    with pytest.raises(ValueError, match=r"unknown loss"):
        verjus.Trainer(cnn(), optim.Adam(), loss="hinge")


def test_fit_names_a_bad_label_by_its_example_and_its_validation_data_by_shape():
    # A label outside the classes was named by its row in a shuffled batch.
    trainer = verjus.Trainer(cnn(), optim.Adam())
    x = np.zeros((300, 1, 28, 28), np.float32)
    y = np.zeros(300, np.int64)
    y[217] = 12
    with pytest.raises(ValueError, match=r"label 12 of example 217 is outside \[0, 10\)"):
        trainer.fit(x, y, batch_size=32, progress=False)
    good = np.zeros(300, np.int64)
    with pytest.raises(ValueError, match=r"label 12 of example 217"):
        trainer.fit(x[:8], good[:8], progress=False, validation_data=(x, y))
    assert trainer.step == 0  # refused before the first epoch
    y = good
    with pytest.raises(TypeError, match=r"validation_data must be a pair \(x, y\), got a ndarray"):
        trainer.fit(x, y, epochs=0, validation_data=x)
    with pytest.raises(TypeError, match=r"got a tuple of 3 items"):
        trainer.fit(x, y, epochs=0, validation_data=(x, y, y))


def test_a_diverged_loss_is_an_error_that_leaves_the_weights():
    net = verjus.Network.from_def(nn.Sequential(nn.Linear(2), input_shape=(2,)))
    trainer = verjus.Trainer(net, optim.SGD(lr=0.1))
    before = net.state_dict()
    with pytest.raises(ValueError, match=r"diverged"):
        trainer.train_minibatch(np.full((2, 2), np.inf, np.float32), np.zeros(2, np.int64))
    for name, value in net.state_dict().items():
        np.testing.assert_array_equal(value, before[name])


def test_wrong_python_types_are_type_errors():
    with pytest.raises(TypeError):
        verjus.Network.from_def(42)
    with pytest.raises(TypeError):
        verjus.Trainer("net", optim.Adam())
    with pytest.raises(TypeError):
        verjus.Trainer(cnn(), "adam")


def test_non_finite_settings_name_the_field():
    with pytest.raises(ValueError, match=r"SGD: lr must be a finite number, got nan"):
        verjus.Trainer(cnn(), optim.SGD(lr=float("nan")))
    with pytest.raises(ValueError, match=r"AdamW: weight_decay must be a finite number, got inf"):
        verjus.Trainer(cnn(), optim.AdamW(weight_decay=float("inf")))
    with pytest.raises(ValueError, match=r"loss: label_smoothing must be a finite number, got nan"):
        verjus.Trainer(cnn(), optim.Adam(), label_smoothing=float("nan"))
    with pytest.raises(ValueError, match=r"label_smoothing must be in \[0, 1\), got 2"):
        verjus.Trainer(cnn(), optim.Adam(), label_smoothing=2)


def test_a_nan_input_shows_in_the_loss_instead_of_corrupting_the_weights():
    # ReLU passes NaN through (as PyTorch does), so the loss is NaN, the step is
    # refused, and the weights stay as they were.
    net = verjus.Network.from_def(
        nn.Sequential(nn.Linear(8), nn.ReLU(), nn.Linear(3), input_shape=(4,))
    )
    trainer = verjus.Trainer(net, optim.Adam())
    before = net.state_dict()
    x = np.ones((2, 4), np.float32)
    x[0, 0] = np.nan
    with pytest.raises(ValueError, match=r"diverged"):
        trainer.train_minibatch(x, np.zeros(2, np.int64))
    for name, value in net.state_dict().items():
        np.testing.assert_array_equal(value, before[name])
    assert np.isnan(net(x)[0]).all()


def test_a_misaligned_array_is_copied_not_refused():
    net = verjus.Network.from_def(nn.Sequential(nn.Linear(3), input_shape=(4,)))
    buffer = np.zeros(2 * 4 * 4 + 1, np.uint8)
    x = buffer[1:].view(np.float32).reshape(2, 4)  # C-contiguous, at an odd address
    x[:] = np.arange(8, dtype=np.float32).reshape(2, 4)
    assert not x.flags.aligned
    np.testing.assert_array_equal(net(x), net(np.ascontiguousarray(x)))


def test_fit_refuses_empty_data_and_a_zero_eval_batch_before_training():
    trainer = verjus.Trainer(cnn(), optim.Adam())
    x, y = np.zeros((4, 1, 28, 28), np.float32), np.zeros(4, np.int64)
    with pytest.raises(ValueError, match=r"fit: validation_data has no examples"):
        trainer.fit(x, y, progress=False, validation_data=(x[:0], y[:0]))
    with pytest.raises(ValueError, match=r"fit: x has no examples"):
        trainer.fit(x[:0], y[:0], progress=False)
    with pytest.raises(ValueError, match=r"eval_batch_size > 0"):
        trainer.fit(x, y, progress=False, validation_data=(x, y), eval_batch_size=0)
    assert trainer.step == 0  # each refused before the first epoch


def test_a_trainer_refuses_a_network_of_two_outputs_when_made():
    two_heads = {
        "inputs": [{"name": "x", "shape": [4]}],
        "outputs": ["f", "g"],
        "layers": [
            {"name": "f", "type": "Linear", "out_features": 3, "inputs": ["x"]},
            {"name": "g", "type": "Linear", "out_features": 2, "inputs": ["x"]},
        ],
    }
    net = verjus.Network.from_def(two_heads)
    with pytest.raises(ValueError, match=r'one input and one output.*outputs \["f", "g"\]'):
        verjus.Trainer(net, optim.SGD(lr=0.1))


def test_a_non_finite_number_in_a_definition_names_its_layer_and_field():
    with pytest.raises(ValueError, match=r"layer 'drop': p must be a finite number, got nan"):
        verjus.Network.from_def(
            {
                "inputs": [{"name": "x", "shape": [4]}],
                "layers": [{"name": "drop", "type": "Dropout", "p": float("nan")}],
            }
        )
    with pytest.raises(ValueError, match=r"p must be a finite number, got inf"):
        verjus.Network.from_def(nn.Sequential(nn.Dropout(np.float32("inf")), input_shape=(4,)))
    net = verjus.Network.from_def(nn.Sequential(nn.Linear(np.int64(3)), input_shape=(4,)))
    assert net.outputs[0][1] == (3,)


def test_diverged_weights_are_named_and_never_saved_over_a_checkpoint(tmp_path):
    x = np.random.default_rng(0).normal(size=(10, 4)).astype(np.float32) * 1e3
    y = np.arange(10) % 3
    net = verjus.Network.from_def(nn.Sequential(nn.Linear(3), input_shape=(4,)))
    trainer = verjus.Trainer(net, optim.SGD(lr=1e36))
    trainer.save_checkpoint(tmp_path / "run")
    good = (tmp_path / "run" / "weights.safetensors").read_bytes()
    trainer.train_minibatch(x, y)  # a finite loss, then an update to infinity
    with pytest.raises(ValueError, match=r"not saved: \S+ holds (inf|-inf|NaN) at element"):
        trainer.save_checkpoint(tmp_path / "run")
    with pytest.raises(ValueError, match=r"not saved"):
        net.save(tmp_path / "run")
    assert (tmp_path / "run" / "weights.safetensors").read_bytes() == good
    with pytest.raises(ValueError, match=r"already holds non-finite values: an earlier update"):
        trainer.train_minibatch(x, y)


def test_float_labels_for_a_classification_loss_say_what_is_wanted():
    trainer = verjus.Trainer(cnn(), optim.Adam())
    x = np.zeros((2, 1, 28, 28), np.float32)
    with pytest.raises(ValueError, match=r"targets must be integer class indices, got float32"):
        trainer.train_minibatch(x, np.zeros(2))


def test_a_superseded_trainer_still_has_a_repr():
    net = cnn()
    first = verjus.Trainer(net, optim.Adam())
    verjus.Trainer(net, optim.SGD(lr=0.1))
    assert repr(first).endswith("superseded)")


def test_a_definition_file_is_named_and_read_only_when_it_is_a_sane_file(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"inputs": [], "layers": [],}')
    with pytest.raises(ValueError, match=r"broken\.json: .*invalid JSON: trailing comma"):
        verjus.Network.from_def(broken)
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as f:
        f.truncate(65 << 20)  # sparse: nothing is written
    with pytest.raises(ValueError, match=r"huge\.json: 68157440 bytes, more than .* \(64 MiB\)"):
        verjus.Network.from_def(huge)
    if os.path.exists("/dev/zero"):
        with pytest.raises(OSError, match=r"/dev/zero: .*not a regular file"):
            verjus.Network.from_def("/dev/zero")
