//! Sequence inputs and outputs at the Python boundary.
//!
//! A network with sequence inputs takes token ids (int32) or float frames per
//! input, as its definition says, and optionally each example's length; its
//! sequence outputs come out of the core time-major (`[T * batch] + unit`)
//! and go back to Python batch-major (`[batch, T] + unit`), the layout the
//! inputs came in. `Network.forward_sequences`, `Runner.infer_sequences`,
//! `Trainer.train_sequences` and `Stepper` share these conversions.

use crate::convert::{self, Borrowed};
use crate::error::to_py_err;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use verjus::core::HostView;
use verjus::nn::{InputDType, Network as NnNetwork};
use verjus::{BackendRef, Tensor};

/// One input array, read as its network input's element type.
pub(crate) enum Input<'py> {
    Floats(Borrowed<'py, f32>),
    Ids(Borrowed<'py, i32>),
}

impl Input<'_> {
    /// A read-only tensor over the array's memory.
    pub(crate) fn view(&self) -> PyResult<HostView<'_>> {
        match self {
            Input::Floats(b) => b.view(),
            Input::Ids(b) => b.view(),
        }
    }
}

/// What the conversions need to know of a network: its inputs' element
/// types and which outputs are sequences.
pub(crate) struct Signature {
    pub(crate) inputs: Vec<(String, InputDType)>,
    pub(crate) sequence_outputs: Vec<bool>,
}

impl Signature {
    pub(crate) fn of(net: &NnNetwork) -> Signature {
        Signature {
            inputs: net
                .inputs()
                .iter()
                .map(|i| (i.name.clone(), i.dtype))
                .collect(),
            sequence_outputs: (0..net.output_shapes().len())
                .map(|i| net.output_is_sequence(i))
                .collect(),
        }
    }

    /// `inputs` (a sequence of arrays), each converted to its input's type.
    pub(crate) fn convert<'py>(
        &self,
        op: &str,
        inputs: &Bound<'py, PyAny>,
    ) -> PyResult<Vec<Input<'py>>> {
        let items: Vec<Bound<'py, PyAny>> = inputs
            .try_iter()
            .map_err(|_| PyTypeError::new_err(format!("{op} takes a sequence of arrays")))?
            .collect::<PyResult<_>>()?;
        if items.len() != self.inputs.len() {
            let names: Vec<&str> = self.inputs.iter().map(|(n, _)| n.as_str()).collect();
            return Err(PyTypeError::new_err(format!(
                "{op}: the network has {} input(s) {names:?}, got {} array(s)",
                self.inputs.len(),
                items.len()
            )));
        }
        items
            .iter()
            .zip(&self.inputs)
            .map(|(obj, (name, dtype))| {
                let what = format!("{op}: input {name:?}");
                Ok(match dtype {
                    InputDType::F32 => Input::Floats(convert::floats(&what, obj)?),
                    InputDType::I32 => Input::Ids(convert::ids(&what, obj)?),
                })
            })
            .collect()
    }

    /// The host outputs `outputs` of a call on `batch` examples, each sequence
    /// output made batch-major.
    pub(crate) fn batch_major(&self, outputs: Vec<Tensor>, batch: usize) -> PyResult<Vec<Tensor>> {
        outputs
            .into_iter()
            .zip(&self.sequence_outputs)
            .map(|(t, &seq)| if seq { to_batch_major(t, batch) } else { Ok(t) })
            .collect()
    }
}

/// Optional lengths: int32 `[batch]`.
pub(crate) fn lengths<'py>(
    op: &str,
    lengths: Option<&Bound<'py, PyAny>>,
) -> PyResult<Option<Borrowed<'py, i32>>> {
    lengths
        .map(|l| convert::ids(&format!("{op}: lengths"), l))
        .transpose()
}

/// A host copy of `t` (downloaded from a device).
pub(crate) fn host_copy(be: &BackendRef, t: &Tensor) -> verjus::Result<Tensor> {
    if t.device() == verjus::Device::Cpu {
        t.try_clone_host()
    } else {
        verjus::ops::download(&**be, t)
    }
}

/// `[T * batch] + unit` (time-major) to `[batch, T] + unit`.
fn to_batch_major(t: Tensor, batch: usize) -> PyResult<Tensor> {
    let dims = t.dims().to_vec();
    let rows = dims.first().copied().unwrap_or(0);
    let batch = batch.max(1);
    let time = rows / batch;
    let width: usize = dims[1..].iter().product();
    let src = t.as_slice::<f32>().map_err(to_py_err)?;
    let mut out = vec![0.0f32; src.len()];
    for tt in 0..time {
        for b in 0..batch {
            let from = (tt * batch + b) * width;
            let to = (b * time + tt) * width;
            out[to..to + width].copy_from_slice(&src[from..from + width]);
        }
    }
    let mut shape = vec![batch, time];
    shape.extend_from_slice(&dims[1..]);
    Tensor::from_vec(shape, out).map_err(to_py_err)
}
