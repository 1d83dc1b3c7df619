//! Index-select (gather of slices along an axis) and index-add (scatter-add).
//!
//! Tensors are viewed as `[outer, len, inner]` around the indexed axis, so each
//! index moves a contiguous run of `inner` elements. All indices are checked
//! before anything is written: a bad index leaves the output untouched and the
//! error names the index and its position. index_add parallelises over `outer`
//! only, because repeated indices make rows of one `outer` slab collide.

use rayon::prelude::*;
use verjus_core::ops::IndexPlan;
use verjus_core::{DType, Error, Result, Tensor};

/// Below this many elements an op runs on the calling thread.
const MIN_PARALLEL: usize = 1 << 15;

/// The indices as offsets, each checked to lie in `0..len`.
fn checked_indices(op: &str, plan: &IndexPlan, indices: &Tensor) -> Result<Vec<usize>> {
    let values: Vec<i64> = match indices.dtype() {
        DType::I64 => indices.to_vec::<i64>()?,
        DType::I32 => indices
            .as_slice::<i32>()?
            .iter()
            .map(|&v| v.into())
            .collect(),
        other => {
            return Err(Error::invalid(
                op,
                format!("indices must be int64 or int32, got {other}"),
            ))
        }
    };
    values
        .iter()
        .enumerate()
        .map(|(j, &v)| {
            usize::try_from(v)
                .ok()
                .filter(|&i| i < plan.len)
                .ok_or_else(|| {
                    Error::invalid(
                        op,
                        format!(
                            "index {v} at position {j} is out of range for axis {} of length {}",
                            plan.axis, plan.len
                        ),
                    )
                })
        })
        .collect()
}

/// `y[o, j, :] = x[o, indices[j], :]`.
pub(crate) fn index_select(
    plan: &IndexPlan,
    x: &Tensor,
    indices: &Tensor,
    y: &mut Tensor,
) -> Result<()> {
    let idx = checked_indices("index_select", plan, indices)?;
    let x = x.as_slice::<f32>()?;
    let y = y.as_mut_slice::<f32>()?;
    let (len, inner, count) = (plan.len, plan.inner, plan.count);
    if y.is_empty() {
        return Ok(());
    }
    // Slab o of y (count * inner elements) gathers from slab o of x. Rows of
    // one element (a gather along the last axis) go element by element: a
    // division per element to find its slab cost more than the copy.
    let gather = |o: usize, out: &mut [f32], rows: std::ops::Range<usize>| {
        let base = o * len;
        if inner == 1 {
            for (v, &i) in out.iter_mut().zip(&idx[rows]) {
                *v = x[base + i];
            }
        } else {
            for (row, &i) in out.chunks_exact_mut(inner).zip(&idx[rows]) {
                let src = (base + i) * inner;
                row.copy_from_slice(&x[src..src + inner]);
            }
        }
    };
    let slab = count * inner;
    if y.len() < MIN_PARALLEL {
        y.chunks_exact_mut(slab)
            .enumerate()
            .for_each(|(o, out)| gather(o, out, 0..count));
    } else if plan.outer > 1 {
        let min_slabs = (MIN_PARALLEL / 4 / slab).max(1);
        y.par_chunks_exact_mut(slab)
            .enumerate()
            .with_min_len(min_slabs)
            .for_each(|(o, out)| gather(o, out, 0..count));
    } else {
        // One slab (an embedding lookup): its rows in parallel.
        let per = (MIN_PARALLEL / 4 / inner).max(1);
        y.par_chunks_mut(per * inner)
            .enumerate()
            .for_each(|(c, out)| gather(0, out, c * per..(c * per + out.len() / inner)));
    }
    Ok(())
}

/// `dst[o, indices[j], :] += src[o, j, :]` (accumulates; repeated indices add up).
pub(crate) fn index_add(
    plan: &IndexPlan,
    src: &Tensor,
    indices: &Tensor,
    dst: &mut Tensor,
) -> Result<()> {
    let idx = checked_indices("index_add", plan, indices)?;
    let src = src.as_slice::<f32>()?;
    let dst = dst.as_mut_slice::<f32>()?;
    let (slab_dst, slab_src) = (plan.len * plan.inner, plan.count * plan.inner);
    if slab_dst == 0 || slab_src == 0 {
        return Ok(());
    }
    let add_slab = |(d, s): (&mut [f32], &[f32])| {
        if plan.inner == 1 {
            for (&v, &i) in s.iter().zip(&idx) {
                d[i] += v;
            }
            return;
        }
        for (row, &i) in s.chunks_exact(plan.inner).zip(&idx) {
            let out = &mut d[i * plan.inner..(i + 1) * plan.inner];
            out.iter_mut().zip(row).for_each(|(o, v)| *o += v);
        }
    };
    if src.len() < MIN_PARALLEL || plan.outer == 1 {
        dst.chunks_exact_mut(slab_dst)
            .zip(src.chunks_exact(slab_src))
            .for_each(add_slab);
    } else {
        dst.par_chunks_exact_mut(slab_dst)
            .zip(src.par_chunks_exact(slab_src))
            .for_each(add_slab);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::NativeBackend;
    use verjus_core::{ops, Tensor};

    fn t(dims: &[usize], v: Vec<f32>) -> Tensor {
        Tensor::from_vec(dims.to_vec(), v).unwrap()
    }

    #[test]
    fn select_gathers_slices_along_the_middle_axis() {
        // x [2, 3, 2]: x[o, l, i] = 100 o + 10 l + i.
        let v = (0..12).map(|e| (e / 6 * 100 + e / 2 % 3 * 10 + e % 2) as f32);
        let x = t(&[2, 3, 2], v.collect());
        let idx = Tensor::from_vec([3], vec![2i32, 0, 2]).unwrap();
        let mut y = t(&[2, 3, 2], vec![0.0; 12]);
        ops::index_select(&NativeBackend, &x, 1, &idx, &mut y).unwrap();
        let expect = [20, 21, 0, 1, 20, 21, 120, 121, 100, 101, 120, 121];
        assert_eq!(y.to_vec::<f32>().unwrap(), expect.map(|e| e as f32));
    }

    #[test]
    fn add_accumulates_repeated_indices() {
        let src = t(&[4, 2], vec![1.0, 2.0, 10.0, 20.0, 100.0, 200.0, 5.0, 5.0]);
        let idx = Tensor::from_vec([4], vec![1i64, 0, 1, 1]).unwrap();
        let mut dst = t(&[3, 2], vec![0.5; 6]);
        ops::index_add(&NativeBackend, &src, 0, &idx, &mut dst).unwrap();
        let expect = [10.5, 20.5, 106.5, 207.5, 0.5, 0.5];
        assert_eq!(dst.to_vec::<f32>().unwrap(), expect);
    }

    #[test]
    fn bad_indices_are_named_and_nothing_is_written() {
        let src = t(&[3, 1], vec![1.0, 2.0, 3.0]);
        let mut dst = t(&[2, 1], vec![0.0; 2]);
        let cases = [
            (vec![0i64, 1, 2], "index 2 at position 2"),
            (vec![0, -1, 1], "index -1 at position 1"),
        ];
        for (bad, named) in cases {
            let idx = Tensor::from_vec([3], bad).unwrap();
            let err = ops::index_add(&NativeBackend, &src, 0, &idx, &mut dst).unwrap_err();
            assert!(err.to_string().contains(named), "{err}");
            assert_eq!(dst.to_vec::<f32>().unwrap(), [0.0, 0.0]);
        }
        let idx = Tensor::from_vec([1], vec![7i32]).unwrap();
        let mut y = t(&[1, 1], vec![0.0]);
        let err = ops::index_select(&NativeBackend, &dst, 0, &idx, &mut y).unwrap_err();
        assert!(err.to_string().contains("index 7 at position 0"), "{err}");
    }
}
