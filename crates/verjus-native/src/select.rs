//! `select` (`where`) on host memory: one pass over the output, walking each
//! operand by its broadcast strides; parallel over rows of the last axis. A
//! row whose condition is constant (a sequence mask broadcast over the last
//! axis, the common masking case) is one copy or fill.

use crate::parallel::for_rows;
use verjus_core::ops::SelectPlan;
use verjus_core::{Result, Tensor};

/// `out = where(cond != 0, x, y)` for a validated plan.
pub(crate) fn select(
    plan: &SelectPlan,
    cond: &Tensor,
    x: &Tensor,
    y: &Tensor,
    out: &mut Tensor,
) -> Result<()> {
    let (c, xs, ys) = (
        cond.as_slice::<f32>()?,
        x.as_slice::<f32>()?,
        y.as_slice::<f32>()?,
    );
    let dims = plan.out.dims();
    let Some((&inner, outer_dims)) = dims.split_last() else {
        let v = out.as_mut_slice::<f32>()?;
        v[0] = if c[0] != 0.0 { xs[0] } else { ys[0] };
        return Ok(());
    };
    let strides = [&plan.cond_strides, &plan.x_strides, &plan.y_strides];
    let last = |s: &Vec<usize>| s.last().copied().unwrap_or(0);
    let (sc, sx, sy) = (last(strides[0]), last(strides[1]), last(strides[2]));
    // An empty output (inner == 0) never reaches the closure.
    for_rows(out.as_mut_slice::<f32>()?, inner, inner, |first, rows| {
        for (r, row) in rows.chunks_mut(inner).enumerate() {
            // The row's offset in each operand, from its index over the outer axes.
            let mut index = first + r;
            let mut offsets = [0usize; 3];
            for (axis, &d) in outer_dims.iter().enumerate().rev() {
                let i = index % d;
                index /= d;
                for (o, s) in offsets.iter_mut().zip(strides) {
                    *o += i * s[axis];
                }
            }
            let [oc, ox, oy] = offsets;
            if sc == 0 {
                // The condition is constant along the row (a sequence mask
                // broadcast over the features): copy or fill the whole row.
                let (src, off, stride) = if c[oc] != 0.0 {
                    (xs, ox, sx)
                } else {
                    (ys, oy, sy)
                };
                match stride {
                    0 => row.fill(src[off]),
                    1 => row.copy_from_slice(&src[off..off + inner]),
                    _ => row
                        .iter_mut()
                        .enumerate()
                        .for_each(|(j, v)| *v = src[off + j * stride]),
                }
                continue;
            }
            for (j, v) in row.iter_mut().enumerate() {
                *v = if c[oc + j * sc] != 0.0 {
                    xs[ox + j * sx]
                } else {
                    ys[oy + j * sy]
                };
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use verjus_core::Shape;

    fn t(dims: &[usize], v: Vec<f32>) -> Tensor {
        Tensor::from_vec(dims.to_vec(), v).unwrap()
    }

    #[test]
    fn broadcasts_and_never_reads_the_unchosen_value() {
        // cond [2, 1] picks row-wise; x [2, 3] holds NaN where y is chosen; y a scalar.
        let cond = t(&[2, 1], vec![1.0, 0.0]);
        let x = t(&[2, 3], vec![1.0, 2.0, 3.0, f32::NAN, f32::INFINITY, 6.0]);
        let y = t(&[], vec![-1.0]);
        let plan = SelectPlan::new(cond.shape(), x.shape(), y.shape()).unwrap();
        assert_eq!(plan.out, Shape::new([2, 3]).unwrap());
        let mut out = Tensor::zeros_host(&plan.out, verjus_core::DType::F32).unwrap();
        select(&plan, &cond, &x, &y, &mut out).unwrap();
        assert_eq!(
            out.to_vec::<f32>().unwrap(),
            [1.0, 2.0, 3.0, -1.0, -1.0, -1.0]
        );
    }

    #[test]
    fn rows_with_a_constant_condition_copy_or_fill() {
        // cond [2, 1, 1] broadcast over [2, 2, 3]; x full, y [1, 1, 3] (strided rows).
        let cond = t(&[2, 1, 1], vec![0.0, 1.0]);
        let x: Vec<f32> = (0..12).map(|v| v as f32).collect();
        let x = t(&[2, 2, 3], x);
        let y = t(&[1, 1, 3], vec![-1.0, -2.0, f32::NAN]);
        let plan = SelectPlan::new(cond.shape(), x.shape(), y.shape()).unwrap();
        let mut out = Tensor::zeros_host(&plan.out, verjus_core::DType::F32).unwrap();
        select(&plan, &cond, &x, &y, &mut out).unwrap();
        let got = out.to_vec::<f32>().unwrap();
        assert_eq!(got[..2], [-1.0, -2.0]);
        assert!(got[2].is_nan() && got[5].is_nan());
        assert_eq!(got[6..], [6.0, 7.0, 8.0, 9.0, 10.0, 11.0]);
        // A scalar fill: the whole masked row takes it.
        let zero = t(&[], vec![0.0]);
        let plan = SelectPlan::new(cond.shape(), x.shape(), zero.shape()).unwrap();
        select(&plan, &cond, &x, &zero, &mut out).unwrap();
        let got = out.to_vec::<f32>().unwrap();
        assert_eq!(got[..6], [0.0; 6]);
        assert_eq!(got[6..], [6.0, 7.0, 8.0, 9.0, 10.0, 11.0]);
    }

    #[test]
    fn scalar_output() {
        let (c, x, y) = (t(&[], vec![0.0]), t(&[], vec![1.0]), t(&[], vec![2.0]));
        let plan = SelectPlan::new(c.shape(), x.shape(), y.shape()).unwrap();
        let mut out = t(&[], vec![0.0]);
        select(&plan, &c, &x, &y, &mut out).unwrap();
        assert_eq!(out.to_vec::<f32>().unwrap(), [2.0]);
    }
}
