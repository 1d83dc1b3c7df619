//! Invalid calls must fail cleanly: an `Err` whose message names the op (and,
//! where documented, the offending value), never a panic and never
//! `Error::Unsupported` (which would mean the backend did not even look).
//!
//! Most of these are rejected by the validation in `verjus_core::ops` before a
//! backend runs; out-of-range indices and labels are documented as the
//! backend's to detect. Either way the user sees the same contract, so the
//! suite checks it for every backend.
//!
//! Where the core builds a forward op's plan inside a backward op
//! (`conv2d_backward_*`, `*_pool2d_backward`, `reduce_*_backward`), its plan errors
//! name the forward op; those cases accept the forward op's name.

mod arguments;
mod attention;
mod axes;
mod ctc;
mod depthwise;
mod devices;
mod dtypes;
mod indices;
mod layer_norm;
mod lstm;
mod shapes;

pub use arguments::invalid_arguments;
pub use attention::attention;
pub use axes::bad_axes;
pub use ctc::ctc;
pub use depthwise::depthwise;
pub use devices::foreign_devices;
pub use dtypes::wrong_dtypes;
pub use indices::out_of_range_indices;
pub use layer_norm::layer_norm;
pub use lstm::lstm;
pub use shapes::wrong_shapes;

use crate::transfer::zeros;
use std::panic::{catch_unwind, AssertUnwindSafe};
use verjus_core::{Backend, DType, Error, Tensor};

/// `Ok` when `call` returns an error (not `Unsupported`) whose message contains
/// every needle; otherwise a message naming the case.
pub(crate) fn expect_error(
    what: &str,
    needles: &[&str],
    call: impl FnOnce() -> verjus_core::Result<()>,
) -> Result<(), String> {
    match catch_unwind(AssertUnwindSafe(call)) {
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "<non-string panic>".into());
            Err(format!(
                "{what}: panicked instead of returning an error: {msg}"
            ))
        }
        Ok(Ok(())) => Err(format!("{what}: accepted the invalid call")),
        Ok(Err(e @ Error::Unsupported { .. })) => Err(format!(
            "{what}: answered `{e}` instead of rejecting the arguments"
        )),
        Ok(Err(e)) => {
            let msg = e.to_string();
            match needles.iter().find(|n| !msg.contains(*n)) {
                Some(n) => Err(format!("{what}: the error `{msg}` does not mention {n:?}")),
                None => Ok(()),
            }
        }
    }
}

/// A zero-filled float32 tensor on the backend.
pub(crate) fn f32s(be: &dyn Backend, dims: &[usize]) -> Result<Tensor, String> {
    zeros(be, "error check setup", dims, DType::F32)
}

/// A zero-filled tensor of `dtype` on the backend.
pub(crate) fn typed(be: &dyn Backend, dims: &[usize], dtype: DType) -> Result<Tensor, String> {
    zeros(be, "error check setup", dims, dtype)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expect_error_classifies_outcomes() {
        let invalid = || Err(Error::invalid("gemm", "bad"));
        assert!(expect_error("case", &["gemm"], invalid).is_ok());
        assert!(expect_error("case", &["conv2d"], invalid)
            .unwrap_err()
            .contains("does not mention"));
        assert!(expect_error("case", &[], || Ok(()))
            .unwrap_err()
            .contains("accepted"));
        let unsupported = || Err(Error::unsupported("gemm", "test"));
        assert!(expect_error("case", &["gemm"], unsupported)
            .unwrap_err()
            .contains("instead of rejecting"));
        let panics = || -> verjus_core::Result<()> { panic!("boom") };
        assert!(expect_error("case", &[], panics)
            .unwrap_err()
            .contains("panicked"));
    }
}
