//! The fused softmax cross-entropy loss, after the deferred device-side check
//! that every label is a class (`deferred/`: reported at the next read).

use crate::backend::CudaBackend;
use crate::deferred::Range;
use crate::device::arg;
use crate::kernels::Module;
use crate::launch::block_per_row;
use crate::storage::{ptr, ptr_mut};
use verjus_core::ops::CrossEntropyPlan;
use verjus_core::{DType, Result, Tensor};

pub(crate) fn softmax_cross_entropy(
    be: &CudaBackend,
    plan: &CrossEntropyPlan,
    logits: &Tensor,
    labels: &Tensor,
    grad_scale: f32,
    losses: &mut Tensor,
    dlogits: Option<&mut Tensor>,
) -> Result<()> {
    let name = "softmax_cross_entropy";
    be.enter(name)?;
    if plan.n == 0 {
        return Ok(());
    }
    be.deferred
        .check(be, name, labels, Range::Classes(plan.classes))?;
    let kernel = match labels.dtype() {
        DType::I64 => "cross_entropy_i64",
        _ => "cross_entropy_i32",
    };
    let (lp, labp, lossp) = (
        ptr(name, logits)?,
        ptr(name, labels)?,
        ptr_mut(name, losses)?,
    );
    let dp = match dlogits {
        Some(d) => ptr_mut(name, d)?,
        None => 0,
    };
    let (n, c, pb) = (
        plan.n as i64,
        plan.classes as i64,
        i32::from(block_per_row(plan.classes)),
    );
    be.launch_rows(
        name,
        Module::Loss,
        kernel,
        plan.n,
        plan.classes,
        &mut [
            arg(&lp),
            arg(&labp),
            arg(&lossp),
            arg(&dp),
            arg(&n),
            arg(&c),
            arg(&plan.smoothing),
            arg(&grad_scale),
            arg(&pb),
        ],
    )
}
