//! Datasets from disk: Fashion-MNIST from its IDX files.
//!
//! Decoding the 47 MB of images runs in Rust with the GIL released, and the
//! decoded buffers become the numpy arrays without another copy.

use crate::convert::to_numpy;
use crate::error::to_py_err;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::path::PathBuf;
use verjus::nn::data::{load_fashion_mnist, Split};

/// One split of Fashion-MNIST from the IDX ``.gz`` files.
///
/// The folder is ``data_dir``, else ``$VERJUS_FASHION_MNIST``, else
/// ``/usr/share/datasets/fashion-mnist``. A missing file is an ``OSError``
/// whose message says to ``apt-get install dataset-fashion-mnist``; a
/// malformed one an ``OSError`` naming the file and the byte offset.
///
/// :param str split: ``"train"`` or ``"test"``
/// :param str | None data_dir: the folder of the files
/// :return: images ``[N, 1, 28, 28]`` float32 scaled to ``[0, 1]``, labels
///   ``[N]`` int64
/// :rtype: tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]
#[pyfunction]
#[pyo3(signature = (split, data_dir = None))]
pub(crate) fn fashion_mnist<'py>(
    py: Python<'py>,
    split: &str,
    data_dir: Option<PathBuf>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let split = match split {
        "train" => Split::Train,
        "test" => Split::Test,
        other => {
            return Err(PyValueError::new_err(format!(
                "fashion_mnist: split must be \"train\" or \"test\", got {other:?}"
            )))
        }
    };
    let data = py
        .detach(|| load_fashion_mnist(split, data_dir.as_deref()))
        .map_err(to_py_err)?;
    // A Ctrl-C during the load surfaces here as KeyboardInterrupt.
    py.check_signals()?;
    let (images, labels) = data.into_parts();
    Ok((to_numpy(py, images)?, to_numpy(py, labels)?))
}
