//! The RF frontend's handles: `Dim` and `Tensor` (`dim.rs`, `tensor.rs`,
//! the operators in `operators.rs`), `RfOptimizer` (`optim.rs`), the ops
//! as `rf_*` functions (`ops.rs`; slice, split, conv, pool in
//! `window_ops.rs`; the LSTM in `lstm.rs`), and the default device that tensors are created on.
//!
//! [`register`] lists every binding once: `verjus.rf` re-exports the
//! `exported` ones under RETURNN's names through the dict `rf_exports`, so a
//! new op needs its binding (with its docstring, which is its Python doc and,
//! through `scripts/gen_stub.py`, its type stub) and one line there.
//!
//! Everything here only converts arguments and calls `verjus::rf`, where
//! the dim logic lives; ops compute with the GIL released, except tiny ops
//! on the CPU (see [`compute`]).

mod attention;
mod ctc;
mod dim;
mod lstm;
mod operators;
mod ops;
mod optim;
mod state;
mod tensor;
mod window_ops;

pub(crate) use dim::PyDim;
pub(crate) use tensor::PyTensor;

use crate::error::to_py_err;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::{Mutex, PoisonError};
use verjus::rf::RfTensor;
use verjus::{BackendRef, Device};

/// Input elements below which an op on CPU tensors keeps the GIL. Releasing
/// and re-taking it costs about 0.15 us (measured: `rf.relu` on 256 elements
/// took 0.62 us with the release, of which the op itself 0.22 us), more than
/// such an op computes, and it holds other Python threads up far less than
/// the interpreter's 5 ms switch interval.
const KEEP_GIL_BELOW: usize = 4096;

/// Runs the op `f` on `inputs`: with the GIL released, unless every input
/// is a CPU tensor of fewer than [`KEEP_GIL_BELOW`] elements.
pub(crate) fn compute<T: Send>(
    py: Python<'_>,
    inputs: &[&RfTensor],
    f: impl FnOnce() -> T + Send,
) -> T {
    let tiny = inputs
        .iter()
        .all(|t| t.backend().device() == Device::Cpu && t.var().value().numel() < KEEP_GIL_BELOW);
    if tiny {
        f()
    } else {
        py.detach(f)
    }
}

/// The default device's backend, once chosen (the CPU until then).
static DEFAULT: Mutex<Option<BackendRef>> = Mutex::new(None);

/// The backend RF tensors made from Python are created on (the default
/// device's); ops then run on whichever backend holds their operands.
/// Every creation goes through here, so a device that `verjus::backend`
/// can select works without changes here.
pub(crate) fn backend() -> PyResult<BackendRef> {
    let mut slot = DEFAULT.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(be) = &*slot {
        return Ok(be.clone());
    }
    let be = verjus::backend(Device::Cpu).map_err(to_py_err)?;
    *slot = Some(be.clone());
    Ok(be)
}

/// Makes ``device`` the default device: RF tensors made from Python
/// (``convert_to_tensor``, ``full``, ``random_*``, ``range_over_dim``,
/// ``Parameter``) are created there from now on; ops run where their operands
/// are. A bad name is a ValueError, a device that cannot be used here a
/// RuntimeError, and the default stays.
///
/// :param str device: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``
#[pyfunction]
fn rf_set_default_device(device: &str) -> PyResult<()> {
    let be = crate::device::backend(device)?;
    *DEFAULT.lock().unwrap_or_else(PoisonError::into_inner) = Some(be);
    Ok(())
}

/// The default device's name.
///
/// :return: ``"cpu"``, ``"cuda:0"``, ...
/// :rtype: str
#[pyfunction]
fn rf_get_default_device() -> PyResult<String> {
    Ok(backend()?.device().to_string())
}

/// Adds the RF classes and functions to `m`, and the dict `rf_exports`:
/// what `verjus.rf` re-exports as it is, by RETURNN's name (the function's
/// name without `rf_`). `combine` and `compare` carry RETURNN's names
/// natively: `verjus.rf` keeps them as the builtins they are (RETURNN's code
/// checks that they are), where it wraps the others (rf/_public_ops.py).
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDim>()?;
    m.add_class::<dim::DimTypes>()?;
    m.add_class::<PyTensor>()?;
    m.add_class::<optim::PyOptimizer>()?;
    m.add_class::<state::NoGradScope>()?;
    let batch_dim = Bound::new(m.py(), PyDim(verjus::rf::batch_dim()))?;
    m.add("rf_batch_dim", &batch_dim)?;
    let single_step_dim = Bound::new(m.py(), PyDim(verjus::rf::single_step_dim()))?;
    m.add("rf_single_step_dim", &single_step_dim)?;
    // `verjus.rf` re-exports these under their name without `rf_`.
    let exported = [
        wrap_pyfunction!(rf_set_default_device, m)?,
        wrap_pyfunction!(rf_get_default_device, m)?,
        wrap_pyfunction!(ops::rf_combine, m)?,
        wrap_pyfunction!(ops::rf_compare, m)?,
        wrap_pyfunction!(ops::rf_where, m)?,
        wrap_pyfunction!(ops::rf_matmul, m)?,
        wrap_pyfunction!(ops::rf_reduce_sum, m)?,
        wrap_pyfunction!(ops::rf_reduce_mean, m)?,
        wrap_pyfunction!(ops::rf_reduce_max, m)?,
        wrap_pyfunction!(ops::rf_reduce_min, m)?,
        wrap_pyfunction!(ops::rf_reduce_logsumexp, m)?,
        wrap_pyfunction!(ops::rf_reduce_argmax, m)?,
        wrap_pyfunction!(ops::rf_softmax, m)?,
        wrap_pyfunction!(ops::rf_log_softmax, m)?,
        wrap_pyfunction!(ops::rf_relu, m)?,
        wrap_pyfunction!(ops::rf_gelu, m)?,
        wrap_pyfunction!(ops::rf_sigmoid, m)?,
        wrap_pyfunction!(ops::rf_tanh, m)?,
        wrap_pyfunction!(ops::rf_silu, m)?,
        wrap_pyfunction!(ops::rf_exp, m)?,
        wrap_pyfunction!(ops::rf_sin, m)?,
        wrap_pyfunction!(ops::rf_cos, m)?,
        wrap_pyfunction!(ops::rf_log, m)?,
        wrap_pyfunction!(ops::rf_sqrt, m)?,
        wrap_pyfunction!(ops::rf_rsqrt, m)?,
        wrap_pyfunction!(ops::rf_abs, m)?,
        wrap_pyfunction!(ops::rf_square, m)?,
        wrap_pyfunction!(ops::rf_softplus, m)?,
        wrap_pyfunction!(ops::rf_log_sigmoid, m)?,
        wrap_pyfunction!(ops::rf_safe_log, m)?,
        wrap_pyfunction!(ops::rf_cast, m)?,
        wrap_pyfunction!(ops::rf_stop_gradient, m)?,
        wrap_pyfunction!(ops::rf_gradient, m)?,
        wrap_pyfunction!(ops::rf_sequence_mask, m)?,
        wrap_pyfunction!(ops::rf_range_over_dim, m)?,
        wrap_pyfunction!(ops::rf_one_hot, m)?,
        wrap_pyfunction!(ops::rf_cross_entropy, m)?,
        wrap_pyfunction!(ops::rf_concat, m)?,
        wrap_pyfunction!(ops::rf_pad, m)?,
        wrap_pyfunction!(ops::rf_full, m)?,
        wrap_pyfunction!(ops::rf_expand_dim, m)?,
        wrap_pyfunction!(ops::rf_merge_dims, m)?,
        wrap_pyfunction!(ops::rf_split_dims, m)?,
        wrap_pyfunction!(ops::rf_random_uniform, m)?,
        wrap_pyfunction!(ops::rf_random_normal, m)?,
        wrap_pyfunction!(ops::rf_set_random_seed, m)?,
        wrap_pyfunction!(window_ops::rf_slice, m)?,
        wrap_pyfunction!(lstm::rf_lstm, m)?,
        wrap_pyfunction!(ctc::rf_ctc_loss, m)?,
    ];
    // Called by the Python functions of python/verjus/rf/ that take
    // RETURNN's arguments (`convert_to_tensor`, `zeros_like`, `dropout`,
    // `gather`, `split`, `conv`, `pool`, ...).
    let wrapped = [
        wrap_pyfunction!(tensor::rf_from_numpy, m)?,
        wrap_pyfunction!(ops::rf_full_like, m)?,
        wrap_pyfunction!(ops::rf_dropout, m)?,
        wrap_pyfunction!(ops::rf_gather, m)?,
        wrap_pyfunction!(window_ops::rf_split, m)?,
        wrap_pyfunction!(window_ops::rf_conv, m)?,
        wrap_pyfunction!(window_ops::rf_pool, m)?,
        wrap_pyfunction!(attention::rf_fused_dot_attention, m)?,
        wrap_pyfunction!(ops::rf_layer_norm, m)?,
        wrap_pyfunction!(state::rf_random_state, m)?,
        wrap_pyfunction!(state::rf_restore_random_state, m)?,
    ];
    let exports = PyDict::new(m.py());
    exports.set_item("batch_dim", batch_dim)?;
    exports.set_item("single_step_dim", single_step_dim)?;
    for f in exported {
        let name: String = f.getattr(intern!(m.py(), "__name__"))?.extract()?;
        let returnn_name = name.strip_prefix("rf_").unwrap_or(&name);
        exports.set_item(returnn_name, &f)?;
        m.add_function(f)?;
    }
    for f in wrapped {
        m.add_function(f)?;
    }
    m.add("rf_exports", exports)
}
