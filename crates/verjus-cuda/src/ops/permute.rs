//! Axis permutation: a copy into the permuted layout, by element size.

use crate::backend::CudaBackend;
use crate::device::arg;
use crate::kernels::Module;
use crate::layout::Permutation;
use crate::storage::{ptr, ptr_mut};
use verjus_core::ops::PermutePlan;
use verjus_core::{Error, Result, Tensor};

pub(crate) fn permute(
    be: &CudaBackend,
    plan: &PermutePlan,
    x: &Tensor,
    y: &mut Tensor,
) -> Result<()> {
    let op = "permute";
    be.enter(op)?;
    let n = x.numel();
    let kernel = match x.dtype().size_in_bytes() {
        4 => "permute_4",
        8 => "permute_8",
        _ => {
            return Err(Error::unsupported(
                format!("permute of {}", x.dtype()),
                "cuda",
            ))
        }
    };
    let layout = Permutation::new(plan.input.dims(), &plan.perm);
    let (xp, yp, count) = (ptr(op, x)?, ptr_mut(op, y)?, n as i64);
    be.launch_n(
        op,
        Module::Permute,
        kernel,
        n,
        &mut [arg(&xp), arg(&yp), arg(&count), arg(&layout)],
    )
}
