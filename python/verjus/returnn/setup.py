"""A RETURNN config turned into a verjus ``Engine`` run (see the package docs).

RETURNN's own modules (config, datasets, learning-rate control, HDF writer)
are imported before the import redirection is installed, so they keep
RETURNN's own ``returnn.tensor``; the config file, loaded after, gets
``verjus.rf`` for ``returnn.frontend`` and ``returnn.tensor``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["run_config"]

# RETURNN options this runner reads (besides the config's own names: its model
# class, dims and helper functions).
HONOURED = {
    "task", "backend", "train", "dev", "eval", "eval_datasets", "forward_data", "extern_data",
    "model_outputs", "get_model", "train_step", "forward_step", "optimizer", "learning_rate",
    "learning_rates", "dynamic_learning_rate", "learning_rate_control", "learning_rate_file",
    "gradient_clip", "gradient_clip_global_norm", "accum_grad_multiple_step", "model",
    "save_interval", "num_epochs", "preload_from_files", "import_model_train_epoch1", "load",
    "load_epoch", "random_seed", "device", "log_verbosity", "log", "batch_size", "max_seqs",
    "max_seq_length", "batching", "output_file", "behavior_version", "online_shuffle_batches",
    "torch_distributed", "torch_amp",
}  # fmt: skip
# RETURNN options that change how RETURNN trains or runs and that verjus does
# not honour: named in one warning when a config sets them.
NOT_HONOURED = {
    "grad_scaler", "torch_log_memory_usage",
    "stop_on_nonfinite_train_score", "cleanup_old_models", "chunking", "use_tensorboard",
    "watch_memory", "torch_dataloader_opts", "online_loss_normalization", "gradient_noise",
    "torch_cuda_graph", "torch_profile", "wandb", "max_seq_length_eval", "packed_batch_size",
    "torch_compile", "accum_grad_multiple_step_dyn", "min_seq_length", "log_grad_norm",
    "stop_for_resubmission_when_low_time_left", "newbob_learning_rate_decay_multi_epoch",
    "torch_batching", "default_input", "target", "use_learning_rate_control_always",
}  # fmt: skip


def run_config(argv: list[str]) -> None:
    """Loads the config (``argv``: the file, then ``++key value`` overrides) and runs its task."""
    config_file, overrides = argv[0], argv[1:]
    if not Path(config_file).is_file():
        raise FileNotFoundError(f"{config_file}: no such config file")
    import returnn.__main__ as rnn
    from returnn.datasets.basic import init_dataset
    from returnn.learning_rate_control import load_learning_rate_control_from_config

    from verjus.rf import returnn_compat

    returnn_compat.install()
    try:
        try:
            rnn.init_config(config_file, overrides)
        except SyntaxError as e:
            raise SyntaxError(f"{e.filename}, line {e.lineno}: {e.msg}") from None
        except AssertionError as e:  # RETURNN's parser of its line-based format
            raise ValueError(
                f"{config_file}: not a RETURNN config ({e}); a Python config starts with "
                "'#!returnn.py'"
            ) from None
        config = rnn.config
        rnn.init_log()
        _warn_not_honoured(config)
        task = config.value("task", "train")
        if task not in ("train", "forward"):
            raise ValueError(f"task {task!r}: verjus runs 'train' and 'forward'")
        # RETURNN's datasets import RETURNN's own returnn.tensor, lazily: made
        # without the redirection (the config's code keeps the verjus modules it got).
        returnn_compat.uninstall()
        datasets = _datasets(config, init_dataset, task)
        lr_control = load_learning_rate_control_from_config(config) if task == "train" else None
        returnn_compat.install()
        engine = _engine(config)
        if task == "train":
            _train(config, engine, datasets, lr_control)
        else:
            _forward(config, engine, datasets["forward"])
    finally:
        returnn_compat.uninstall()


def _warn_not_honoured(config: Any) -> None:
    ignored = sorted(k for k in NOT_HONOURED if config.has(k))
    if ignored:
        print(
            f"verjus returnn: warning: these config options are not honoured and have no "
            f"effect: {', '.join(ignored)}",
            file=sys.stderr,
            flush=True,
        )


def _engine(config: Any) -> Any:
    from verjus.engine import Engine

    def required(key: str) -> Any:
        if not config.has(key):
            raise ValueError(f"the config has no {key!r}")
        return config.typed_value(key)

    task = config.value("task", "train")
    model = config.value("model", None)
    device = config.value("device", None) or "cpu"
    return Engine(
        get_model=required("get_model"),
        extern_data=required("extern_data"),
        train_step=required("train_step") if task == "train" else config.typed_value("train_step"),
        forward_step=required("forward_step")
        if task == "forward"
        else config.typed_value("forward_step"),
        optimizer=config.typed_value("optimizer"),
        learning_rate=config.float("learning_rate", 1.0),
        dynamic_learning_rate=config.typed_value("dynamic_learning_rate"),
        gradient_clip=config.float("gradient_clip", 0.0),
        gradient_clip_global_norm=config.float("gradient_clip_global_norm", 0.0),
        accum_grad_multiple_step=config.int("accum_grad_multiple_step", 1),
        batch_size=config.typed_value("batch_size", None),
        max_seqs=config.typed_value("max_seqs", None),
        max_seq_length=config.typed_value("max_seq_length", None) or None,
        online_shuffle_batches=_shuffle_buffer(config.typed_value("online_shuffle_batches")),
        num_epochs=config.int("num_epochs", 1),
        model=os.path.expanduser(model) if model else None,
        save_interval=config.int("save_interval", 1),
        device="cuda" if device == "gpu" else device,
        random_seed=config.int("random_seed", 42),
        log=lambda line: print(line, flush=True),
        log_steps=max(config.int_list("log_verbosity", [3]) or [3]) >= 5,
        distributed=config.typed_value("torch_distributed"),
        torch_amp=config.typed_value("torch_amp"),
    )


def _shuffle_buffer(option: Any) -> int | None:
    """RETURNN's ``online_shuffle_batches``: a number of batches, or ``{"buffer_size": n}``."""
    if isinstance(option, dict):
        unknown = sorted(set(option) - {"buffer_size"})
        if unknown:
            raise ValueError(
                f"online_shuffle_batches: verjus takes buffer_size only, got {unknown}"
            )
        option = option.get("buffer_size")
    return None if option is None else int(option)


def _dataset(config: Any, key: str, init_dataset: Any, **defaults: Any) -> Any:
    """The RETURNN dataset of config option ``key`` (``None`` if not set), for the engine."""
    from returnn.datasets.basic import Dataset

    from verjus.engine import ReturnnDataset

    opts = config.typed_value(key) if config.is_typed(key) else config.value(key, None)
    if not opts:
        return None
    if isinstance(opts, dict):
        kwargs = {"name": key, **defaults, **opts}
        Dataset.kwargs_update_from_config(config, kwargs)
        dataset = init_dataset(kwargs)
    else:
        dataset = init_dataset(opts, default_kwargs={"name": key, **defaults})
    return ReturnnDataset(dataset)


def _datasets(config: Any, init_dataset: Any, task: str) -> dict[str, Any]:
    """The task's RETURNN datasets: ``train`` and the dev sets (``dev``, ``eval``,
    ``eval_datasets``), or ``forward`` (``forward_data``, else ``eval``)."""
    from returnn.datasets.basic import Dataset

    from verjus.engine import ReturnnDataset

    eval_defaults = Dataset.get_default_kwargs_eval(config=config)
    if task == "forward":
        data = _dataset(config, "forward_data", init_dataset) or _dataset(
            config, "eval", init_dataset, **eval_defaults
        )
        if data is None:
            raise ValueError("task forward: the config has no 'forward_data' (or 'eval') dataset")
        return {"forward": data}
    train = _dataset(
        config, "train", init_dataset, **Dataset.get_default_kwargs_train(config=config)
    )
    if train is None:
        raise ValueError("task train: the config has no 'train' dataset")
    out = {"train": train}
    for name in ("dev", "eval"):
        ds = _dataset(config, name, init_dataset, **eval_defaults)
        if ds is not None:
            out[name] = ds
    for name, opts in (config.typed_value("eval_datasets") or {}).items():
        out[name] = ReturnnDataset(
            init_dataset(opts, default_kwargs={"name": name, **eval_defaults})
        )
    return out


def _train(config: Any, engine: Any, datasets: dict[str, Any], lr_control: Any) -> None:
    engine.learning_rate_control = lr_control
    dev = {k: v for k, v in datasets.items() if k != "train"}
    # Forked before the model exists, the data worker shares none of its memory.
    engine.start_data_worker(datasets["train"], *dev.values())
    engine.init_model()
    _preload(config, engine)
    engine.train(datasets["train"], dev)


def _forward(config: Any, engine: Any, data: Any) -> None:
    engine.init_model()
    load = config.value("load", None)
    if load:
        _load_params(engine, load, ignore_missing=False, prefix="")
    elif engine.model_prefix:
        from verjus.engine import checkpoints

        epoch = config.int("load_epoch", 0) or checkpoints.last_epoch(
            engine.model_prefix, up_to=10**9
        )
        if not epoch:
            raise ValueError(f"task forward: no checkpoint under {engine.model_prefix!r}")
        engine.load_checkpoint(checkpoints.Checkpoint(engine.model_prefix, epoch).params)
    output = config.value("output_file", "output.npz")
    engine.forward(data, output=output)
    print(f"Wrote {output}", flush=True)


def _preload(config: Any, engine: Any) -> None:
    """``import_model_train_epoch1`` / ``load`` and ``preload_from_files``: parameters
    before the first epoch (not when continuing a run)."""
    from verjus.engine import checkpoints

    if engine.model_prefix and checkpoints.last_epoch(engine.model_prefix, up_to=engine.num_epochs):
        return
    first = config.value("import_model_train_epoch1", None) or config.value("load", None)
    if first:
        _load_params(engine, first, ignore_missing=False, prefix="")
    for name, opts in (config.typed_value("preload_from_files") or {}).items():
        if not opts.get("init_for_train", True):
            continue
        _load_params(
            engine,
            opts["filename"],
            ignore_missing=bool(opts.get("ignore_missing", False)),
            prefix=opts.get("prefix", ""),
            what=f"preload_from_files[{name!r}]",
        )


def _load_params(
    engine: Any, filename: str, *, ignore_missing: bool, prefix: str, what: str = "load"
) -> None:
    """Parameters from a verjus ``.safetensors`` or a RETURNN ``.pt`` checkpoint,
    by RETURNN's names (with ``prefix`` before each name of the file)."""
    import verjus.rf as rf

    path = Path(os.path.expanduser(filename))
    if not path.exists():
        raise FileNotFoundError(f"{what}: {path}: no such checkpoint")
    if path.suffix == ".pt":
        try:
            import torch
        except ImportError:
            raise RuntimeError(f"{what}: {path}: reading a .pt checkpoint needs torch") from None
        saved = torch.load(path, map_location="cpu", weights_only=False)
        state = saved.get("model", saved)
        arrays = {k: v.detach().numpy() for k, v in state.items()}
    else:
        arrays = rf.read_state(path)
    arrays = {prefix + k: v for k, v in arrays.items()}
    names = {n for n, _ in engine.model.named_parameters()}
    if not ignore_missing and not prefix:
        missing = sorted(names - set(arrays))
        if missing:
            raise ValueError(f"{what}: {path}: no parameters {missing[:5]} for this model")
    try:
        rf.load_state_dict(
            engine.model, {k: v for k, v in arrays.items() if k in names}, strict=False
        )
    except ValueError as e:
        raise ValueError(f"{what}: {path}: {e}") from None
    print(f"Loaded {len(names & set(arrays))} parameters from {path}", flush=True)
