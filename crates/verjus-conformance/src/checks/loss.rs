//! Check of the fused softmax cross-entropy: losses and the scaled logits
//! gradient, with label smoothing, int64 and int32 labels, one class, an empty
//! batch and logits near ±100 (where a naive float32 `exp` overflows or
//! underflows). Tolerance: `Tolerance::REDUCTION`.

use crate::compare::{close, every_case, Tolerance};
use crate::inputs::{indices, uniform};
use crate::reference::loss::softmax_cross_entropy as reference;
use crate::transfer::{get, put, put_int, zeros, Context};
use verjus_core::{ops, Backend, DType};

/// One call: batch, classes, smoothing, label dtype, gradient scale, whether the
/// gradient is asked for, and the centre of the logits.
type Case = (usize, usize, f32, DType, f32, bool, f32);

const CASES: [Case; 7] = [
    (1, 1, 0.0, DType::I64, 1.0, true, 0.0),
    (7, 2, 0.0, DType::I64, 1.0 / 7.0, true, 0.0),
    (13, 17, 0.1, DType::I32, 1.0, true, 0.0),
    (0, 5, 0.1, DType::I64, 1.0, true, 0.0),
    (4, 33, 0.0, DType::I64, 0.25, false, 0.0),
    (3, 65, 0.2, DType::I32, 1.0, true, 100.0),
    (31, 7, 0.05, DType::I64, 2.0, true, -100.0),
];

/// `ops::softmax_cross_entropy`.
pub fn softmax_cross_entropy(be: &dyn Backend) -> Result<(), String> {
    every_case(
        CASES.into_iter().enumerate(),
        |(i, (n, classes, smoothing, dtype, scale, with_grad, centre))| {
            let what = format!(
            "softmax_cross_entropy [{n}, {classes}] smoothing {smoothing} {dtype} labels grad_scale {scale} (logits around {centre})"
        );
            let dims = [n, classes];
            let logits = uniform(i as u64, &dims, centre - 5.0, centre + 5.0);
            let labels = indices(i as u64 + 7, n, classes);
            let (losses, dlogits) = reference(&logits, &labels, smoothing, scale);
            let (tl, tlab) = (
                put(be, &what, &logits)?,
                put_int(be, &what, &labels, dtype)?,
            );
            let mut tloss = zeros(be, &what, &[n], DType::F32)?;
            let mut tgrad = zeros(be, &what, &dims, DType::F32)?;
            ops::softmax_cross_entropy(
                be,
                &tl,
                &tlab,
                smoothing,
                scale,
                &mut tloss,
                with_grad.then_some(&mut tgrad),
            )
            .context(&what)?;
            let tol = Tolerance::REDUCTION;
            close(
                &format!("{what} losses"),
                &[n],
                &losses,
                &get(be, &what, &tloss)?,
                tol,
            )?;
            if with_grad {
                close(
                    &format!("{what} dlogits"),
                    &dims,
                    &dlogits.data,
                    &get(be, &what, &tgrad)?,
                    tol,
                )?;
            }
            Ok(())
        },
    )
}
