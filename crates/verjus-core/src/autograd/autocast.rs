//! Autocast: the reduced-precision dtype that matrix products on this thread
//! run in (PyTorch's `torch.autocast`, RETURNN's `torch_amp`).
//!
//! Inside an [`autocast`] scope, [`Var::matmul_t`](super::Var::matmul_t),
//! [`Var::conv2d`](super::Var::conv2d) and
//! [`Var::depthwise_conv1d`](super::Var::depthwise_conv1d) round their float32
//! operands (input and weight) to the scope's dtype (bfloat16 or float16) and
//! compute with float32 accumulation into a float32 result; the tape keeps the
//! rounded operands, half the bytes. (The product multiplies the reduced
//! operands directly; the convolutions widen them again for their float32
//! kernels, the same numbers.) Every other op runs in
//! float32 as outside the scope, and gradients stay float32 (the cast's
//! backward hands them on unrounded), so parameters and optimizer state are
//! the float32 master copies and no loss scaling is needed to keep small
//! gradients from flushing to zero.
//!
//! The setting is thread-local and changed only through guards, like grad mode.

use super::Var;
use crate::{DType, Result};
use std::cell::Cell;
use std::marker::PhantomData;

thread_local! {
    static AUTOCAST: Cell<Option<DType>> = const { Cell::new(None) };
}

/// The dtype matrix products run in on this thread (`None`: float32).
pub fn autocast_dtype() -> Option<DType> {
    AUTOCAST.with(Cell::get)
}

/// Restores the previous autocast setting of this thread when dropped.
#[must_use = "autocast returns to its previous setting when the guard is dropped"]
#[derive(Debug)]
pub struct AutocastGuard {
    previous: Option<DType>,
    /// The guard restores a thread-local setting, so it must stay on its thread.
    _not_send: PhantomData<*const ()>,
}

impl Drop for AutocastGuard {
    fn drop(&mut self) {
        AUTOCAST.with(|setting| setting.set(self.previous));
    }
}

/// Runs matrix products on this thread in `dtype` (bfloat16 or float16;
/// `None`: float32) until the guard drops.
pub fn autocast(dtype: Option<DType>) -> Result<AutocastGuard> {
    if let Some(d) = dtype {
        d.mixed_precision("autocast")?;
    }
    let previous = AUTOCAST.with(|setting| setting.replace(dtype));
    Ok(AutocastGuard {
        previous,
        _not_send: PhantomData,
    })
}

/// `a` and `b` rounded to the autocast dtype when a scope is active and both
/// are float32 (the operands of a product or a convolution); `None` otherwise.
pub(crate) fn autocast_operands(a: &Var, b: &Var) -> Result<Option<(Var, Var)>> {
    match autocast_dtype() {
        Some(dtype) if a.dtype() == DType::F32 && b.dtype() == DType::F32 => {
            Ok(Some((a.cast_float(dtype)?, b.cast_float(dtype)?)))
        }
        _ => Ok(None),
    }
}
