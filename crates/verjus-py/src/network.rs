//! `verjus._verjus.Network`: a built network, inference and its parameters.
//!
//! The Python class is a handle on the [`Shared`] model, so a `Trainer` made
//! from it trains this very network. The network lives on one device (its
//! parameters are there and `forward` computes there); `to` moves it. Every call converts its arguments with the
//! GIL held, then releases the GIL, takes the lock and computes.

use crate::convert::{self, Borrowed};
use crate::device;
use crate::error::to_py_err;
use crate::sequences::{self, Input, Signature};
use crate::shared::{self, Shared};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::path::{Path, PathBuf};
use verjus::nn::{weights, NetworkDef};
use verjus::{BackendRef, Tensor};

/// A built network (static graph) and its parameters, on one device.
///
/// A ``Trainer`` made from a network trains *this* network: the two share it,
/// so ``forward`` and ``state_dict`` see the trained weights. Devices are
/// ``"cpu"``, ``"cuda"`` or ``"cuda:N"``: a malformed name is a ``ValueError``,
/// a device that cannot be used here a ``RuntimeError`` naming what is missing.
#[pyclass(frozen, module = "verjus._verjus")]
pub(crate) struct Network {
    pub(crate) model: Shared,
}

/// One leaf layer's descriptor, copied out of the lock.
struct DescriptorData {
    path: String,
    kind: &'static str,
    inputs: Vec<String>,
    input_shapes: Vec<Vec<usize>>,
    output_shape: Vec<usize>,
    params: Vec<(String, Vec<usize>)>,
    shares: Option<String>,
    live: bool,
    sequence: bool,
}

impl Network {
    /// A copy of the network (definition, seed and weights) on `target`'s
    /// device, for a `Runner`, which owns what it serves.
    pub(crate) fn copy(
        &self,
        py: Python<'_>,
        target: &BackendRef,
    ) -> PyResult<verjus::nn::Network> {
        self.with_net(py, |net, be| {
            let named = net.named_parameters_host(&**be).map_err(to_py_err)?;
            let mut copy = verjus::nn::Network::build(net.def().clone(), &**target, net.seed())
                .map_err(to_py_err)?;
            copy.load_parameters(&**target, named, true)
                .map_err(to_py_err)?;
            Ok(copy)
        })
    }

    /// Runs `f` on the network with the GIL released and the read lock held.
    fn with_net<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&verjus::nn::Network, &verjus::BackendRef) -> PyResult<T> + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            let model = shared::read(&self.model)?;
            let (net, be) = model.network()?;
            f(net, be)
        })
    }

    /// Replaces parameters by name (see `load_state_dict`), GIL released;
    /// errors name `file` when the values came from one.
    fn load_named(
        &self,
        py: Python<'_>,
        named: Vec<(String, Tensor)>,
        strict: bool,
        file: Option<&Path>,
    ) -> PyResult<()> {
        py.detach(|| {
            let mut model = shared::write(&self.model)?;
            let (net, be) = model.network_mut()?;
            net.load_parameters(&*be, named, strict).map_err(|e| {
                to_py_err(match file {
                    Some(path) => e.in_file(path),
                    None => e,
                })
            })
        })
    }
}

#[pymethods]
impl Network {
    /// Parses and builds a ``NetworkDef`` (JSON text) on ``device``;
    /// parameters are drawn there from ``seed`` (the same values on every
    /// device).
    ///
    /// A definition error is a ``ValueError`` naming the layer and the shapes.
    ///
    /// :param str text: the definition as JSON
    /// :param int seed: the seed of the initial parameters
    /// :param str device: where the network lives
    /// :rtype: Network
    #[staticmethod]
    #[pyo3(signature = (text, seed = 0, device = "cpu"))]
    fn from_json(py: Python<'_>, text: &str, seed: u64, device: &str) -> PyResult<Network> {
        let be = device::backend(device)?;
        let net = py
            .detach(|| {
                let def = NetworkDef::from_json(text)?;
                verjus::nn::Network::build(def, &*be, seed)
            })
            .map_err(to_py_err)?;
        Ok(Network {
            model: shared::new_shared(net, be),
        })
    }

    /// The device the parameters live on and ``forward`` computes on
    /// (``"cuda:0"``).
    ///
    /// :rtype: str
    #[getter]
    fn device(&self, py: Python<'_>) -> PyResult<String> {
        self.with_net(py, |_, be| Ok(be.device().to_string()))
    }

    /// Moves the parameters to ``device`` (bit-identical), and the solver
    /// state of the ``Trainer`` that trains this network with them; on an
    /// error nothing moves.
    ///
    /// :param str device: the new device
    fn to(&self, py: Python<'_>, device: &str) -> PyResult<()> {
        let be = device::backend(device)?;
        py.detach(|| {
            let mut model = shared::write(&self.model)?;
            model.move_to(be).map_err(to_py_err)
        })
    }

    /// The definition as JSON (what ``from_json`` reads).
    ///
    /// :rtype: str
    fn to_json(&self, py: Python<'_>) -> PyResult<String> {
        self.with_net(py, |net, _| Ok(net.def().to_json()))
    }

    /// ``(name, unit shape)`` of each input, in order.
    ///
    /// :rtype: list[tuple[str, list[int]]]
    fn inputs(&self, py: Python<'_>) -> PyResult<Vec<(String, Vec<usize>)>> {
        self.with_net(py, |net, _| {
            Ok(net
                .inputs()
                .iter()
                .map(|i| (i.name.clone(), i.shape.clone()))
                .collect())
        })
    }

    /// ``(name, is a sequence, dtype)`` of each input, in order: a sequence
    /// input has a time axis before its unit shape, and ``dtype`` is
    /// ``"float32"`` or ``"int32"`` (token ids).
    ///
    /// :rtype: list[tuple[str, bool, str]]
    fn input_kinds(&self, py: Python<'_>) -> PyResult<Vec<(String, bool, &'static str)>> {
        self.with_net(py, |net, _| {
            Ok(net
                .inputs()
                .iter()
                .map(|i| {
                    let dtype = match i.dtype {
                        verjus::nn::InputDType::F32 => "float32",
                        verjus::nn::InputDType::I32 => "int32",
                    };
                    (i.name.clone(), i.sequence, dtype)
                })
                .collect())
        })
    }

    /// Whether each output is a sequence (batch-major ``[batch, T, ...]``
    /// from ``forward_sequences``), in order.
    ///
    /// :rtype: list[bool]
    fn sequence_outputs(&self, py: Python<'_>) -> PyResult<Vec<bool>> {
        self.with_net(py, |net, _| Ok(Signature::of(net).sequence_outputs))
    }

    /// ``(name, unit shape)`` of each output, in order.
    ///
    /// :rtype: list[tuple[str, list[int]]]
    fn outputs(&self, py: Python<'_>) -> PyResult<Vec<(String, Vec<usize>)>> {
        self.with_net(py, |net, _| Ok(net.output_shapes()))
    }

    /// One dict per leaf layer in execution order, with keys ``path`` (str),
    /// ``kind`` (str), ``inputs`` (list[str]), ``input_shapes``
    /// (list[list[int]]), ``output_shape`` (list[int]), ``params`` (list of
    /// ``(name, shape)``), ``shares`` (str | None), ``live`` (bool) and
    /// ``sequence`` (bool: the output has a time axis after the batch axis).
    ///
    /// :rtype: list[dict[str, object]]
    fn descriptors<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let data = self.with_net(py, |net, _| {
            Ok(net
                .descriptors()
                .iter()
                .map(|d| DescriptorData {
                    path: d.path.clone(),
                    kind: d.kind,
                    inputs: d.inputs.clone(),
                    input_shapes: d.input_shapes.clone(),
                    output_shape: d.output_shape.clone(),
                    params: d
                        .params
                        .iter()
                        .map(|p| (p.name.clone(), p.shape.clone()))
                        .collect(),
                    shares: d.shares.clone(),
                    live: d.live,
                    sequence: d.sequence,
                })
                .collect::<Vec<_>>())
        })?;
        data.into_iter()
            .map(|d| {
                let dict = PyDict::new(py);
                dict.set_item("path", d.path)?;
                dict.set_item("kind", d.kind)?;
                dict.set_item("inputs", d.inputs)?;
                dict.set_item("input_shapes", d.input_shapes)?;
                dict.set_item("output_shape", d.output_shape)?;
                dict.set_item("params", d.params)?;
                dict.set_item("shares", d.shares)?;
                dict.set_item("live", d.live)?;
                dict.set_item("sequence", d.sequence)?;
                Ok(dict)
            })
            .collect()
    }

    /// Number of learnable scalars (shared parameters counted once).
    ///
    /// :rtype: int
    fn parameter_count(&self, py: Python<'_>) -> PyResult<usize> {
        self.with_net(py, |net, _| Ok(net.parameter_count()))
    }

    /// Inference (training off, no dropout) on one batch: one array per
    /// input, uploaded to the network's device, the outputs downloaded.
    ///
    /// Each input is ``[batch, *unit_shape]``; a C-contiguous float32 array is
    /// read without a copy, other float arrays and non-contiguous ones are
    /// converted, and anything else is a ``TypeError``.
    ///
    /// :param Sequence[npt.ArrayLike] inputs: one array per network input
    /// :return: one float32 array per output
    /// :rtype: list[npt.NDArray[np.float32]]
    fn forward<'py>(
        &self,
        py: Python<'py>,
        inputs: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        if inputs.cast::<numpy::PyUntypedArray>().is_ok() {
            return Err(PyTypeError::new_err(
                "forward takes a sequence with one array per network input, got a single array \
                 (wrap it in a list: forward([x]))",
            ));
        }
        let arrays: Vec<Borrowed<'py, f32>> = inputs
            .try_iter()
            .map_err(|_| {
                PyTypeError::new_err(format!(
                    "forward takes a sequence of arrays, got {}",
                    inputs.get_type()
                ))
            })?
            .enumerate()
            .map(|(i, obj)| convert::floats(&format!("input {i}"), &obj?))
            .collect::<PyResult<_>>()?;
        let views = arrays
            .iter()
            .map(Borrowed::view)
            .collect::<PyResult<Vec<_>>>()?;
        let outputs = self.with_net(py, |net, be| {
            let refs: Vec<&Tensor> = views.iter().map(|v| &**v).collect();
            device::on_device(be, &refs, |inputs| net.transform(&**be, inputs)).map_err(to_py_err)
        })?;
        let list = PyList::empty(py);
        for t in outputs {
            list.append(convert::to_numpy(py, t)?)?;
        }
        Ok(list)
    }

    /// Inference on a batch of sequences: one array per input (token ids
    /// ``[batch, T]`` for an int32 input, frames ``[batch, T, ...]`` for a
    /// float one, ``[batch, ...]`` for an input without a time axis) and
    /// optionally each example's length (int32 ``[batch]``, each in
    /// ``0..=T``). Sequence outputs come back batch-major ``[batch, T, ...]``
    /// (frames past a length hold what the per-frame layers make of padding).
    ///
    /// :param Sequence[npt.ArrayLike] inputs: one array per network input
    /// :param npt.ArrayLike | None lengths: each example's length
    /// :return: one float32 array per output
    /// :rtype: list[npt.NDArray[np.float32]]
    #[pyo3(signature = (inputs, lengths = None))]
    fn forward_sequences<'py>(
        &self,
        py: Python<'py>,
        inputs: &Bound<'py, PyAny>,
        lengths: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let sig = self.with_net(py, |net, _| Ok(Signature::of(net)))?;
        let arrays = sig.convert("forward", inputs)?;
        let lengths = sequences::lengths("forward", lengths)?;
        let views = arrays
            .iter()
            .map(Input::view)
            .collect::<PyResult<Vec<_>>>()?;
        let lengths = lengths.as_ref().map(Borrowed::view).transpose()?;
        let outputs = self.with_net(py, |net, be| {
            let refs: Vec<&Tensor> = views.iter().map(|v| &**v).collect();
            let batch = refs.first().and_then(|t| t.dims().first().copied());
            let outputs = device::on_device(be, &refs, |inputs| {
                net.transform_with_lengths(&**be, inputs, lengths.as_deref())
            })
            .map_err(to_py_err)?;
            sig.batch_major(outputs, batch.unwrap_or(0))
        })?;
        let list = PyList::empty(py);
        for t in outputs {
            list.append(convert::to_numpy(py, t)?)?;
        }
        Ok(list)
    }

    /// ``(name, copy of the value)`` per parameter, in parameter order
    /// (``fc1.weight``...).
    ///
    /// :rtype: list[tuple[str, npt.NDArray[np.float32]]]
    fn state_dict<'py>(&self, py: Python<'py>) -> PyResult<Vec<(String, Bound<'py, PyAny>)>> {
        let named = self.with_net(py, |net, be| {
            net.named_parameters_host(&**be).map_err(to_py_err)
        })?;
        named
            .into_iter()
            .map(|(name, t)| Ok((name, convert::to_numpy(py, t)?)))
            .collect()
    }

    /// Replaces parameters by name. Every name and shape is checked before any
    /// value changes: an unknown name, a wrong shape, or (when ``strict``) a
    /// missing name is a ``ValueError`` naming the parameter and both shapes.
    ///
    /// :param Mapping[str, npt.ArrayLike] values: parameter name to value
    /// :param bool strict: require every parameter
    #[pyo3(signature = (values, strict = true))]
    fn load_state_dict(
        &self,
        py: Python<'_>,
        values: &Bound<'_, PyAny>,
        strict: bool,
    ) -> PyResult<()> {
        let items = values.call_method0("items").map_err(|_| {
            PyTypeError::new_err(format!(
                "load_state_dict takes a mapping of parameter names to arrays, got {}",
                values.get_type()
            ))
        })?;
        let mut named = Vec::new();
        for item in items.try_iter()? {
            let (name, value): (String, Bound<'_, PyAny>) = item?.extract().map_err(|_| {
                PyTypeError::new_err("load_state_dict: keys must be str (parameter names)")
            })?;
            let tensor = convert::floats(&format!("parameter {name:?}"), &value)?.to_tensor()?;
            named.push((name, tensor));
        }
        self.load_named(py, named, strict, None)
    }

    /// Loads a network folder (``save``'s, or a training checkpoint) onto
    /// ``device``: definition, seed and weights, each file checked against
    /// ``checkpoint.json`` before anything is built. File problems are
    /// ``OSError``, a definition or weights that do not fit ``ValueError``; both
    /// name the file.
    ///
    /// :param str folder: the folder
    /// :param str device: where the network lives
    /// :rtype: Network
    #[staticmethod]
    #[pyo3(signature = (folder, device = "cpu"))]
    fn load(py: Python<'_>, folder: PathBuf, device: &str) -> PyResult<Network> {
        let be = device::backend(device)?;
        let net = py
            .detach(|| verjus::nn::Network::load(&folder, &*be))
            .map_err(to_py_err)?;
        Ok(Network {
            model: shared::new_shared(net, be),
        })
    }

    /// Saves ``network.json``, ``weights.safetensors`` and ``checkpoint.json``
    /// as the folder ``folder``, replacing it atomically; other files in it
    /// are kept.
    ///
    /// :param str folder: the folder
    fn save(&self, py: Python<'_>, folder: PathBuf) -> PyResult<()> {
        self.with_net(py, |net, be| net.save(&folder, &**be).map_err(to_py_err))
    }

    /// Writes the parameters as safetensors (names are parameter names),
    /// atomically: a temporary file in the same folder, fsync, then rename.
    ///
    /// :param str path: the file
    fn save_weights(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        self.with_net(py, |net, be| {
            net.save_weights(&**be, &path).map_err(to_py_err)
        })
    }

    /// Reads a safetensors file and loads it like ``load_state_dict``; nothing
    /// changes unless the whole file is valid. File problems are ``OSError``.
    ///
    /// :param str path: the file
    /// :param bool strict: require every parameter
    #[pyo3(signature = (path, strict = true))]
    fn load_weights(&self, py: Python<'_>, path: PathBuf, strict: bool) -> PyResult<()> {
        // Read and check the file before taking the lock.
        let named = py.detach(|| weights::load_file(&path)).map_err(to_py_err)?;
        self.load_named(py, named, strict, Some(&path))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        self.with_net(py, |net, be| {
            let outputs: Vec<String> = net.output_shapes().into_iter().map(|(n, _)| n).collect();
            Ok(format!(
                "Network(inputs={:?}, outputs={:?}, parameters={}, device={:?})",
                net.inputs().iter().map(|i| &i.name).collect::<Vec<_>>(),
                outputs,
                net.parameter_count(),
                be.device().to_string()
            ))
        })
    }
}
