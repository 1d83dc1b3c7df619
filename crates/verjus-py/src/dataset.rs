//! `verjus._verjus.Dataset`: examples and targets held in Rust.
//!
//! `Trainer.train_epoch` cuts minibatches from it without touching Python
//! objects per batch. The arrays are copied once, when the dataset is made; a
//! dataset never changes afterwards, so it needs no lock.

use crate::convert;
use crate::error::to_py_err;
use pyo3::prelude::*;

/// Examples and targets held in Rust, for ``Trainer.train_epoch`` /
/// ``evaluate_dataset``.
///
/// The arrays are copied once, when the dataset is made.
///
/// :param npt.ArrayLike x: examples ``[N, ...]``, float32 (converted from other
///   float arrays)
/// :param npt.ArrayLike y: ``[N]`` integer class labels (stored as int64) or
///   ``[N, ...]`` float32 targets
#[pyclass(frozen, module = "verjus._verjus")]
pub(crate) struct Dataset {
    pub(crate) inner: verjus::nn::data::Dataset,
}

#[pymethods]
impl Dataset {
    #[new]
    fn new(py: Python<'_>, x: &Bound<'_, PyAny>, y: &Bound<'_, PyAny>) -> PyResult<Self> {
        let x = convert::floats("Dataset: x", x)?;
        let y = convert::targets("Dataset: y", y)?;
        let (x, y) = (x.view()?, y.view()?);
        let inner = py.detach(|| {
            let x = x.try_clone_host()?;
            let y = y.try_clone_host()?;
            verjus::nn::data::Dataset::new(x, y)
        });
        Ok(Dataset {
            inner: inner.map_err(to_py_err)?,
        })
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "Dataset(x={}, y={} {})",
            self.inner.examples().shape(),
            self.inner.labels().shape(),
            self.inner.labels().dtype()
        )
    }
}
