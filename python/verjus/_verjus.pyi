"""Type stub of the native module ``verjus._verjus`` (crates/verjus-py).

The Python package wraps these classes; user code imports ``verjus``, not this
module. Every call that computes releases the GIL. Errors: ``ValueError`` for bad
shapes, dtypes, values and definitions (the message names the layer and the
expected and actual shapes), ``OSError`` for file problems (the message names the
file), ``RuntimeError`` for device failures, ``NotImplementedError`` for an op a
backend lacks. No Rust panic reaches Python.
"""

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__version__: str

def cuda_is_available() -> bool: ...
def cuda_device_count() -> int: ...
def cuda_unavailable_reason() -> str | None: ...
def cuda_memory_stats(ordinal: int = 0) -> tuple[int, int, int]: ...
def cuda_reset_peak_memory(ordinal: int = 0) -> None: ...
def devices() -> list[str]:
    """Names of the devices this build can compute on; ``"cpu"`` is always first."""

def gemm(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """``a @ b`` for float32 arrays on the CPU (the GIL is released while computing).

    Matrices are the last two axes; leading axes are a batch, equal in both
    operands or absent in one. Raises ``ValueError`` naming both shapes when they
    do not fit, and ``TypeError`` for anything but float32 numpy arrays.
    """

def fashion_mnist(
    split: str, data_dir: str | None = None
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
    """One split (``"train"`` or ``"test"``) of Fashion-MNIST from the IDX ``.gz`` files.

    Images ``[N, 1, 28, 28]`` float32 scaled to ``[0, 1]``, labels ``[N]`` int64.
    The folder is ``data_dir``, else ``$VERJUS_FASHION_MNIST``, else
    ``/usr/share/datasets/fashion-mnist``. A missing file is an ``OSError`` whose
    message says to ``apt-get install dataset-fashion-mnist``; a malformed one an
    ``OSError`` naming the file and the byte offset.
    """

class Network:
    """A built network (static graph) and its parameters, on one device.

    A ``Trainer`` made from a network trains *this* network: the two share it,
    so ``forward`` and ``state_dict`` see the trained weights. Devices are
    ``"cpu"``, ``"cuda"`` or ``"cuda:N"``: a malformed name is a ``ValueError``, a
    device that cannot be used here a ``RuntimeError`` naming what is missing.
    """

    @staticmethod
    def from_json(text: str, seed: int = 0, device: str = "cpu") -> Network:
        """Parses and builds a ``NetworkDef`` (JSON text) on ``device``; parameters are
        drawn there from ``seed`` (the same values on every device).

        A definition error is a ``ValueError`` naming the layer and the shapes.
        """

    @property
    def device(self) -> str:
        """The device the parameters live on and ``forward`` computes on (``"cuda:0"``)."""

    def to(self, device: str) -> None:
        """Moves the parameters to ``device`` (bit-identical), and the solver state of
        the ``Trainer`` that trains this network with them; on an error nothing moves."""

    def to_json(self) -> str:
        """The definition as JSON (what ``from_json`` reads)."""

    def inputs(self) -> list[tuple[str, list[int]]]:
        """``(name, unit shape)`` of each input, in order."""

    def outputs(self) -> list[tuple[str, list[int]]]:
        """``(name, unit shape)`` of each output, in order."""

    def descriptors(self) -> list[dict[str, object]]:
        """One dict per leaf layer in execution order, with keys ``path`` (str),
        ``kind`` (str), ``inputs`` (list[str]), ``input_shapes`` (list[list[int]]),
        ``output_shape`` (list[int]), ``params`` (list of ``(name, shape)``),
        ``shares`` (str | None) and ``live`` (bool)."""

    def parameter_count(self) -> int:
        """Number of learnable scalars (shared parameters counted once)."""

    def forward(self, inputs: Sequence[npt.ArrayLike]) -> list[npt.NDArray[np.float32]]:
        """Inference (training off, no dropout) on one batch; one array per input,
        uploaded to the network's device, the outputs downloaded.

        Each input is ``[batch, *unit_shape]``; a C-contiguous float32 array is read
        without a copy, other float arrays and non-contiguous ones are converted,
        and anything else is a ``TypeError``. Returns one float32 array per output.
        """

    def state_dict(self) -> list[tuple[str, npt.NDArray[np.float32]]]:
        """``(name, copy of the value)`` per parameter, in parameter order (``fc1.weight``...)."""

    def load_state_dict(self, values: Mapping[str, npt.ArrayLike], strict: bool = True) -> None:
        """Replaces parameters by name. Every name and shape is checked before any
        value changes: an unknown name, a wrong shape, or (when ``strict``) a
        missing name is a ``ValueError`` naming the parameter and both shapes."""

    @staticmethod
    def load(folder: str, device: str = "cpu") -> Network:
        """Loads a network folder (``save``'s, or a training checkpoint) onto ``device``:
        definition, seed and weights, each file checked against ``checkpoint.json``
        before anything is built. File problems are ``OSError``, a definition or
        weights that do not fit ``ValueError``; both name the file."""

    def save(self, folder: str) -> None:
        """Saves ``network.json``, ``weights.safetensors`` and ``checkpoint.json`` as the
        folder ``folder``, replacing it atomically; other files in it are kept."""

    def save_weights(self, path: str) -> None:
        """Writes the parameters as safetensors (names are parameter names), atomically:
        a temporary file in the same folder, fsync, then rename."""

    def load_weights(self, path: str, strict: bool = True) -> None:
        """Reads a safetensors file and loads it like ``load_state_dict``; nothing
        changes unless the whole file is valid. File problems are ``OSError``."""

class Dataset:
    """Examples and targets held in Rust, for ``Trainer.train_epoch`` / ``evaluate_dataset``.

    ``x`` is ``[N, ...]`` float32 (converted from other float arrays); ``y`` is
    ``[N]`` integer class labels (stored as int64) or ``[N, ...]`` float32 targets.
    The arrays are copied once, when the dataset is made.
    """

    def __init__(self, x: npt.ArrayLike, y: npt.ArrayLike) -> None: ...
    def __len__(self) -> int: ...

class Trainer:
    """Trains one network with one solver and one loss on one device."""

    def __init__(
        self, network: Network, solver_json: str, loss_json: str, device: str | None = None
    ) -> None:
        """``solver_json`` is a ``SolverConfig``: ``{"rule": {"Adam": {...}} | {"Sgd": {...}},
        "schedule": "Constant" | {"Step": {...}} | {"Cosine": {...}}, "clip_norm": float | null}``
        with the fields of the Rust ``Sgd`` / ``Adam`` / ``LrSchedule``; of ``Sgd`` and ``Adam``
        only ``lr`` is required, the others default to PyTorch's (``momentum``, ``dampening``,
        ``weight_decay`` 0, ``nesterov`` / ``decoupled`` false, ``beta1`` 0.9, ``beta2`` 0.999,
        ``eps`` 1e-8), and an unknown field is an error. ``loss_json`` is a
        ``Loss``: ``{"type": "SoftmaxCrossEntropy", "label_smoothing": 0.0}``,
        ``{"type": "Nll"}`` or ``{"type": "Mse"}``. ``device`` is ``"cpu"``, ``"cuda"`` or
        ``"cuda:N"``; ``None`` trains the network where it lives, another device moves the
        network there first (like ``Network.to``). A device that is not there is a
        ``RuntimeError`` naming what is missing, and the network stays where it was.
        Bad settings are a ``ValueError`` naming the field."""

    @staticmethod
    def resume(folder: str, device: str = "cpu") -> Trainer:
        """A trainer continuing the checkpoint ``folder`` on ``device`` (bit for bit on
        the CPU), with a new ``network``. Every file is checked first."""

    def save_checkpoint(self, folder: str) -> None:
        """Saves network, weights, solver state, loss, step and dropout stream position as
        the folder ``folder``, replacing it atomically; other files in it are kept."""

    @property
    def network(self) -> Network:
        """The network this trainer trains (the same object it was made with)."""

    @property
    def device(self) -> str:
        """The device this trainer and its network compute on."""

    @property
    def step(self) -> int:
        """Solver steps taken so far."""

    @property
    def lr(self) -> float:
        """The learning rate the next step will use (after the schedule)."""

    def solver_json(self) -> str:
        """The solver's configuration (not its state) as JSON."""

    def train_minibatch(
        self, x: npt.ArrayLike, y: npt.ArrayLike
    ) -> tuple[float, npt.NDArray[np.float32]]:
        """One step: forward (training mode), loss, backward, update normalised by
        this batch's size. Returns the mean loss and a copy of output 0."""

    def evaluate(
        self, x: npt.ArrayLike, y: npt.ArrayLike, batch_size: int = 1000
    ) -> tuple[float, float | None]:
        """Mean loss and accuracy (``None`` unless ``y`` holds class labels) in inference mode."""

    def check_dataset(self, data: Dataset) -> None:
        """Checks the labels against the network's classes, naming a bad one's example."""

    def evaluate_dataset(self, data: Dataset, batch_size: int = 1000) -> tuple[float, float | None]:
        """``evaluate`` over a ``Dataset``."""

    def train_epoch(
        self,
        data: Dataset,
        batch_size: int,
        shuffle_seed: int | None = None,
        on_step: Callable[[int, float], object] | None = None,
    ) -> float:
        """One pass over ``data`` in minibatches (shuffled by ``shuffle_seed`` when given,
        the last batch may be short). After each step, with the GIL held, calls
        ``on_step(examples_in_step, loss)``; an exception it raises stops the epoch
        and propagates. Returns the mean training loss over the epoch's examples."""

class Runner:
    """Serves inference from a network that can be swapped at run time, on one device."""

    def __init__(self, network: Network, device: str = "cpu") -> None:
        """Serves a copy of ``network`` on ``device``."""

    @staticmethod
    def from_checkpoint(folder: str, device: str = "cpu") -> Runner:
        """Serves the network of a checkpoint (or network) folder on ``device``."""

    @property
    def device(self) -> str:
        """The device the served networks live and compute on."""

    @property
    def generation(self) -> int:
        """0 for the first network, +1 per swap."""

    def infer(self, inputs: Sequence[npt.ArrayLike]) -> tuple[list[npt.NDArray[np.float32]], int]:
        """Inference with the network served now (GIL released, no lock around the
        computation): the outputs and the generation that computed them."""

    def swap(self, network: Network) -> int:
        """Swaps in a copy of ``network`` if its inputs and outputs fit (else
        ``ValueError`` naming the mismatch); returns the new generation."""

    def swap_from(self, folder: str) -> int:
        """Loads a checkpoint folder and swaps it in like ``swap``."""

    def watch(
        self,
        folder: str,
        interval: float = 1.0,
        on_event: Callable[[dict[str, Any]], object] | None = None,
    ) -> None:
        """Polls ``folder`` and swaps in each new version; ``on_event`` gets
        ``{"event": "swapped", "generation": n}`` or ``{"event": "refused", "error": msg}``."""

    def stop_watching(self) -> None:
        """Stops watching and waits for the watcher thread."""

# --- The RF frontend (crates/verjus-py/src/rf); ``verjus.rf`` re-exports these. ---

class Dim:
    """The name of an axis; equal only to itself (hash by identity).

    ``Dim(7, name="feat")`` is static, ``Dim(lengths, name="time")`` dynamic
    (``lengths`` an int Tensor over e.g. ``[batch_dim]``), ``Dim(None)`` of
    unknown size (like the batch).
    """

    def __init__(self, dimension: int | Tensor | None, *, name: str | None = None) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def dimension(self) -> int | None:
        """The static size; ``None`` for dynamic and unknown dims."""
    @property
    def size(self) -> int | None:
        """The axis size of tensors with this dim (static size or longest sequence)."""
    @property
    def dyn_size_ext(self) -> Tensor | None:
        """The per-sequence lengths of a dynamic dim."""
    def is_dynamic(self) -> bool: ...

class Tensor:
    """A tensor whose axes are named by dims; operators combine by dims."""

    def __init__(self, source: Tensor) -> None:
        """Another handle to ``source`` (for subclasses such as ``rf.Parameter``)."""
    def backward(self) -> None:
        """Adds ``d self / d p`` to ``p.grad`` for every leaf ``p`` (one-element ``self``)."""
    @property
    def grad(self) -> Tensor | None:
        """The gradient ``backward`` accumulated (leaves only), with this tensor's dims."""
    def zero_grad(self) -> None: ...
    def assign(self, array: npt.NDArray[np.float32]) -> None:
        """Replaces a leaf's values (same shape, float32)."""

    @property
    def dims(self) -> tuple[Dim, ...]: ...
    @property
    def dtype(self) -> str:
        """``"float32"``, ``"int32"``, ``"int64"`` or ``"bool"``."""
    @property
    def sparse_dim(self) -> Dim | None: ...
    @property
    def feature_dim(self) -> Dim | None: ...
    @property
    def shape(self) -> list[int]: ...
    @property
    def requires_grad(self) -> bool: ...
    @property
    def raw_tensor(self) -> npt.NDArray[Any]: ...
    def numpy(self) -> npt.NDArray[Any]:
        """The values, axes in dims order (bool tensors as a bool array)."""
    def copy_transpose(self, dims: Sequence[Dim]) -> Tensor: ...
    def __add__(self, other: Tensor | float) -> Tensor: ...
    def __radd__(self, other: Tensor | float) -> Tensor: ...
    def __sub__(self, other: Tensor | float) -> Tensor: ...
    def __rsub__(self, other: Tensor | float) -> Tensor: ...
    def __mul__(self, other: Tensor | float) -> Tensor: ...
    def __rmul__(self, other: Tensor | float) -> Tensor: ...
    def __truediv__(self, other: Tensor | float) -> Tensor: ...
    def __rtruediv__(self, other: Tensor | float) -> Tensor: ...
    def __pow__(self, other: Tensor | float) -> Tensor: ...
    def __rpow__(self, other: Tensor | float) -> Tensor: ...
    def __neg__(self) -> Tensor: ...
    def __lt__(self, other: Tensor | float) -> Tensor: ...
    def __le__(self, other: Tensor | float) -> Tensor: ...
    def __gt__(self, other: Tensor | float) -> Tensor: ...
    def __ge__(self, other: Tensor | float) -> Tensor: ...
    def __eq__(self, other: object) -> Tensor: ...  # type: ignore[override]
    def __ne__(self, other: object) -> Tensor: ...  # type: ignore[override]
    def __bool__(self) -> bool: ...  # one value only; ValueError for more

rf_batch_dim: Dim

def rf_from_numpy(
    array: npt.NDArray[Any],
    dims: Sequence[Dim],
    dtype: str,
    requires_grad: bool,
    sparse_dim: Dim | None,
    feature_dim: Dim | None,
) -> Tensor:
    """A Tensor from a contiguous array of ``dtype``'s storage type (bool as float32)."""

def rf_combine(
    a: Tensor | float, kind: str, b: Tensor | float, *, allow_broadcast_all_sources: bool = False
) -> Tensor: ...
def rf_compare(
    a: Tensor | float, kind: str, b: Tensor | float, *, allow_broadcast_all_sources: bool = False
) -> Tensor: ...
def rf_matmul(
    a: Tensor, b: Tensor, *, reduce: Dim | Sequence[Dim], use_mask: bool = True
) -> Tensor: ...
def rf_reduce_sum(
    source: Tensor, *, axis: Dim | Sequence[Dim], use_mask: bool = True
) -> Tensor: ...
def rf_reduce_mean(
    source: Tensor, *, axis: Dim | Sequence[Dim], use_mask: bool = True
) -> Tensor: ...
def rf_reduce_max(
    source: Tensor, *, axis: Dim | Sequence[Dim], use_mask: bool = True
) -> Tensor: ...
def rf_reduce_min(
    source: Tensor, *, axis: Dim | Sequence[Dim], use_mask: bool = True
) -> Tensor: ...
def rf_reduce_logsumexp(
    source: Tensor, *, axis: Dim | Sequence[Dim], use_mask: bool = True
) -> Tensor: ...
def rf_reduce_argmax(source: Tensor, *, axis: Dim, use_mask: bool = True) -> Tensor: ...
def rf_softmax(x: Tensor, *, axis: Dim, use_mask: bool = True) -> Tensor: ...
def rf_log_softmax(x: Tensor, *, axis: Dim, use_mask: bool = True) -> Tensor: ...
def rf_relu(x: Tensor) -> Tensor: ...
def rf_gelu(x: Tensor) -> Tensor: ...
def rf_sigmoid(x: Tensor) -> Tensor: ...
def rf_tanh(x: Tensor) -> Tensor: ...
def rf_exp(x: Tensor) -> Tensor: ...
def rf_log(x: Tensor) -> Tensor: ...
def rf_sqrt(x: Tensor) -> Tensor: ...
def rf_rsqrt(x: Tensor) -> Tensor: ...
def rf_abs(x: Tensor) -> Tensor: ...
def rf_square(x: Tensor) -> Tensor: ...
def rf_safe_log(x: Tensor, *, eps: float = 1e-7) -> Tensor: ...
def rf_where(
    cond: Tensor,
    true_: Tensor | float,
    false_: Tensor | float,
    *,
    allow_broadcast_all_sources: bool = False,
) -> Tensor: ...
def rf_cast(x: Tensor, dtype: str) -> Tensor: ...
def rf_stop_gradient(x: Tensor) -> Tensor: ...
def rf_sequence_mask(dims: Dim | Sequence[Dim]) -> Tensor: ...
def rf_range_over_dim(dim: Dim) -> Tensor: ...
def rf_gradient(y: Tensor, x: Tensor) -> Tensor:
    """``dy/dx`` for a one-element ``y``, with ``x``'s dims (zeros if unrelated)."""

def rf_gather(source: Tensor, *, indices: Tensor, axis: Dim, clip_to_valid: bool = False) -> Tensor:
    """Dims shared by ``source`` and ``indices`` (besides ``axis``) are batch dims."""

def rf_slice(
    source: Tensor,
    *,
    axis: Dim,
    start: int | None = None,
    end: int | None = None,
    step: int | None = None,
    size: int | Dim | None = None,
    out_dim: Dim | None = None,
) -> tuple[Tensor, Dim]:
    """``source[start:end:step]`` along ``axis``; returns the tensor and the new dim."""

def rf_split(source: Tensor, *, axis: Dim, out_dims: Sequence[Dim]) -> list[Tensor]: ...
def rf_conv(
    source: Tensor,
    *,
    in_dim: Dim,
    out_dim: Dim,
    in_spatial_dims: Sequence[Dim],
    out_spatial_dims: Sequence[Dim] | None,
    filter: Tensor,
    filter_size: Sequence[Dim],
    padding: str | Sequence[int],
    strides: Sequence[int],
    dilation_rate: Sequence[int],
    groups: int,
    bias: Tensor | None,
) -> tuple[Tensor, list[Dim]]:
    """1-D/2-D conv, one stride/dilation/padding entry per spatial dim."""

def rf_pool(
    source: Tensor,
    *,
    mode: str,
    pool_size: Sequence[int],
    padding: str | Sequence[int],
    dilation_rate: Sequence[int],
    strides: Sequence[int],
    in_spatial_dims: Sequence[Dim],
    out_spatial_dims: Sequence[Dim] | None,
) -> tuple[Tensor, list[Dim]]:
    """``"max"`` or ``"avg"`` pooling, one entry per spatial dim."""

def rf_set_default_device(device: str) -> None:
    """``"cpu"``, ``"cuda"`` or ``"cuda:N"``; one without a backend raises."""

def rf_get_default_device() -> str: ...
def rf_one_hot(source: Tensor) -> Tensor: ...
def rf_cross_entropy(
    *, estimated: Tensor, target: Tensor, axis: Dim, estimated_type: str
) -> Tensor:
    """Against sparse or dense targets; ``estimated_type`` is ``"logits"``,
    ``"log-probs"`` or ``"probs"``."""

def rf_concat(
    *sources: tuple[Tensor, Dim], allow_broadcast: bool = False, out_dim: Dim | None = None
) -> tuple[Tensor, Dim]:
    """Joins dims (dynamic ones per sequence); returns the tensor and the new dim."""

def rf_pad(
    source: Tensor,
    *,
    axes: Dim | Sequence[Dim],
    padding: Sequence[tuple[int, int]],
    out_dims: Dim | Sequence[Dim] | None = None,
    value: float = 0.0,
) -> tuple[Tensor, list[Dim]]:
    """Pads with ``value`` (after each sequence's end on dynamic dims); returns
    the tensor and the new dims."""

def rf_full(
    *, dims: Dim | Sequence[Dim], fill_value: float, dtype: str | None = None
) -> Tensor: ...
def rf_full_like(other: Tensor, fill_value: float) -> Tensor: ...
def rf_expand_dim(source: Tensor, dim: Dim) -> Tensor: ...
def rf_merge_dims(
    source: Tensor, *, dims: Sequence[Dim], out_dim: Dim | None = None
) -> tuple[Tensor, Dim]: ...
def rf_split_dims(source: Tensor, *, axis: Dim, dims: Sequence[Dim]) -> Tensor: ...
def rf_random_uniform(
    dims: Dim | Sequence[Dim], *, minval: float = 0.0, maxval: float = 1.0
) -> Tensor: ...
def rf_random_normal(
    dims: Dim | Sequence[Dim], *, mean: float = 0.0, stddev: float = 1.0
) -> Tensor: ...
def rf_set_random_seed(seed: int) -> None:
    """Restarts the RF random stream (random_* and dropout) at ``seed``."""

def rf_dropout(
    source: Tensor, drop_prob: float, axis: Dim | Sequence[Dim] | None, train: bool
) -> Tensor:
    """Inverted dropout when ``train``; the mask varies over ``axis`` only (all dims if None)."""

class RfOptimizer:
    """An optimizer over RF parameters (``verjus.optim``'s classes bind through it)."""

    def __init__(self, params: list[Tensor], solver_json: str) -> None: ...
    def step(self) -> None: ...
    def zero_grad(self) -> None: ...
    @property
    def steps(self) -> int: ...
