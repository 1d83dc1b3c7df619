//! Safetensors files for `verjus.rf` (`save_state`, `read_state`): the static
//! graph's reader and writer (`verjus::nn::weights`), so that both frontends
//! check a file alike (header, offsets, dtypes, shapes; every problem an
//! `OSError` naming the file) and write it atomically.

use crate::convert::{self, to_numpy};
use crate::error::to_py_err;
use pyo3::prelude::*;
use std::path::PathBuf;
use verjus::nn::weights;

/// Writes float32 arrays under their names to a safetensors file, atomically.
///
/// :param str path: the file (replaced if it exists)
/// :param list[str] names: the tensors' names
/// :param list[npt.NDArray[np.float32]] arrays: the values, one per name
#[pyfunction]
pub(crate) fn safetensors_save(
    py: Python<'_>,
    path: PathBuf,
    names: Vec<String>,
    arrays: Vec<Bound<'_, PyAny>>,
) -> PyResult<()> {
    let named = names
        .into_iter()
        .zip(&arrays)
        .map(|(name, array)| {
            let tensor = convert::floats(&name, array)?.to_tensor()?;
            Ok((name, tensor))
        })
        .collect::<PyResult<Vec<_>>>()?;
    py.detach(|| weights::save_file(&path, &named))
        .map_err(to_py_err)
}

/// The tensors of a safetensors file (F32, BF16 or F16) by name, in name
/// order, each as a numpy array of its file's dtype (bfloat16 as
/// ``verjus.rf.Tensor.numpy`` gives it).
///
/// :param str path: the file
/// :rtype: list[tuple[str, npt.NDArray[Any]]]
#[pyfunction]
pub(crate) fn safetensors_load(
    py: Python<'_>,
    path: PathBuf,
) -> PyResult<Vec<(String, Bound<'_, PyAny>)>> {
    let named = py.detach(|| weights::load_file(&path)).map_err(to_py_err)?;
    named
        .into_iter()
        .map(|(name, tensor)| Ok((name, to_numpy(py, tensor)?)))
        .collect()
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(safetensors_save, m)?)?;
    m.add_function(wrap_pyfunction!(safetensors_load, m)?)
}
