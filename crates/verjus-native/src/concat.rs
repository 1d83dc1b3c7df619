//! Concatenation along an axis and its inverse, split.
//!
//! Viewing every tensor as `[outer, axis, inner]`, each outer slab of the whole
//! is the parts' slabs laid end to end, so both ops are runs of `memcpy`; slabs
//! are independent and copied in parallel when the tensor is large.

use rayon::prelude::*;
use verjus_core::ops::ConcatPlan;
use verjus_core::{Result, Tensor};

/// Below this many elements the copy runs on the calling thread.
const MIN_PARALLEL: usize = 1 << 16;

/// Runs `f(o, slab)` for every outer slab `o` of `whole` (`slab` elements each).
fn for_each_slab(whole: &mut [f32], slab: usize, f: impl Fn(usize, &mut [f32]) + Sync) {
    if slab == 0 {
        return;
    }
    if whole.len() < MIN_PARALLEL {
        whole
            .chunks_exact_mut(slab)
            .enumerate()
            .for_each(|(o, s)| f(o, s));
    } else {
        let min_slabs = (MIN_PARALLEL / 4 / slab).max(1);
        let slabs = whole.par_chunks_exact_mut(slab).enumerate();
        slabs.with_min_len(min_slabs).for_each(|(o, s)| f(o, s));
    }
}

/// `y = concat(parts)` along the plan's axis.
pub(crate) fn concat(plan: &ConcatPlan, parts: &[&Tensor], y: &mut Tensor) -> Result<()> {
    let parts = parts
        .iter()
        .map(|p| p.as_slice::<f32>())
        .collect::<Result<Vec<_>>>()?;
    let runs: Vec<usize> = plan.sizes.iter().map(|s| s * plan.inner).collect();
    let y = y.as_mut_slice::<f32>()?;
    for_each_slab(y, runs.iter().sum(), |o, slab| {
        let mut at = 0;
        for (part, &run) in parts.iter().zip(&runs) {
            slab[at..at + run].copy_from_slice(&part[o * run..(o + 1) * run]);
            at += run;
        }
    });
    Ok(())
}

/// Splits `x` along the plan's axis into `parts`.
pub(crate) fn split(plan: &ConcatPlan, x: &Tensor, parts: &mut [&mut Tensor]) -> Result<()> {
    let x = x.as_slice::<f32>()?;
    let whole: usize = plan.sizes.iter().sum::<usize>() * plan.inner;
    let mut at = 0;
    for (part, size) in parts.iter_mut().zip(&plan.sizes) {
        let run = size * plan.inner;
        for_each_slab(part.as_mut_slice::<f32>()?, run, |o, slab| {
            slab.copy_from_slice(&x[o * whole + at..o * whole + at + run]);
        });
        at += run;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::NativeBackend;
    use verjus_core::{ops, Tensor};

    #[test]
    fn concat_then_split_along_the_last_axis() {
        let a = Tensor::from_vec([2, 1], vec![1.0f32, 2.0]).unwrap();
        let b = Tensor::from_vec([2, 2], vec![3.0f32, 4.0, 5.0, 6.0]).unwrap();
        let mut y = Tensor::from_vec([2, 3], vec![0f32; 6]).unwrap();
        ops::concat(&NativeBackend, &[&a, &b], 1, &mut y).unwrap();
        assert_eq!(y.to_vec::<f32>().unwrap(), [1.0, 3.0, 4.0, 2.0, 5.0, 6.0]);

        let mut a2 = Tensor::from_vec([2, 1], vec![0f32; 2]).unwrap();
        let mut b2 = Tensor::from_vec([2, 2], vec![0f32; 4]).unwrap();
        ops::split(&NativeBackend, &y, 1, &mut [&mut a2, &mut b2]).unwrap();
        assert_eq!(a2.to_vec::<f32>().unwrap(), a.to_vec::<f32>().unwrap());
        assert_eq!(b2.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
    }

    #[test]
    fn large_concat_with_an_empty_part() {
        let n = 1 << 16;
        let a = Tensor::from_vec([n, 1], (0..n).map(|i| i as f32).collect()).unwrap();
        let b = Tensor::from_vec([n, 2], vec![-1f32; 2 * n]).unwrap();
        let e = Tensor::from_vec([n, 0], Vec::<f32>::new()).unwrap();
        let mut y = Tensor::from_vec([n, 3], vec![0f32; 3 * n]).unwrap();
        ops::concat(&NativeBackend, &[&b, &e, &a], 1, &mut y).unwrap();
        let y = y.to_vec::<f32>().unwrap();
        assert!(y
            .chunks(3)
            .enumerate()
            .all(|(i, r)| r == [-1.0, -1.0, i as f32]));
    }
}
