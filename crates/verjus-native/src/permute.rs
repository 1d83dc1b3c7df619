//! Axis permutation of any dtype (a copy into the permuted layout).
//!
//! The permutation is first simplified: size-1 axes are dropped and output
//! neighbours that are also neighbours, in order, in the input are merged. What
//! remains is copied as a stack of 2-D `[rows, cols]` slabs read with the input's
//! strides. When the last output axis is contiguous in the input (the identity
//! included, which collapses to one axis) rows are plain `memcpy`s; otherwise
//! (2-D transposes, batched transposes, general permutations) the slab is copied
//! in tiles, so that reads and writes both stay within a few cache lines; a
//! plain 2-D transpose (rows contiguous in the input) goes to `transpose.rs`.

use rayon::prelude::*;
use verjus_core::ops::PermutePlan;
use verjus_core::{DType, Error, Result, Tensor};

/// Output rows per tile, and per rayon task.
const TILE: usize = 32;

/// Output columns per tile of a strided copy. Narrow, because the input lines a
/// tile reads are often a power-of-two stride apart and then compete for one
/// cache set; eight of them fit (measured on a 2048x2048 transpose: 8 columns
/// are twice as fast as 32).
const TILE_COLS: usize = 8;

/// Below this many elements the copy runs on the calling thread.
const MIN_PARALLEL: usize = 1 << 15;

/// One output axis: its length and the input stride along it.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Axis {
    len: usize,
    stride: usize,
}

/// The simplified permutation: outer axes, then the rows and columns of each slab.
#[derive(Debug)]
struct Layout {
    outer: Vec<Axis>,
    rows: Axis,
    cols: Axis,
}

impl Layout {
    fn new(plan: &PermutePlan) -> Self {
        let (dims, strides) = (plan.input.dims(), plan.input.strides());
        let mut axes: Vec<Axis> = Vec::with_capacity(dims.len());
        for &p in &plan.perm {
            let a = Axis {
                len: dims[p],
                stride: strides[p],
            };
            match axes.last_mut() {
                _ if a.len == 1 => {}
                Some(last) if last.stride == a.len * a.stride => {
                    last.len *= a.len;
                    last.stride = a.stride;
                }
                _ => axes.push(a),
            }
        }
        let unit = Axis { len: 1, stride: 1 };
        let cols = axes.pop().unwrap_or(unit);
        let rows = axes.pop().unwrap_or(unit);
        Layout {
            outer: axes,
            rows,
            cols,
        }
    }

    /// Elements of one slab.
    fn slab(&self) -> usize {
        self.rows.len * self.cols.len
    }

    /// Input offset of slab `o` (row-major over the outer axes).
    fn base(&self, mut o: usize) -> usize {
        let mut base = 0;
        for a in self.outer.iter().rev() {
            base += (o % a.len) * a.stride;
            o /= a.len;
        }
        base
    }

    /// Copies rows `r0..` of the slab at input offset `base` into `out` (whole rows).
    fn copy_rows<T: Copy>(&self, x: &[T], base: usize, r0: usize, out: &mut [T]) {
        let (rs, cs, cl) = (self.rows.stride, self.cols.stride, self.cols.len);
        if cs == 1 {
            for (r, row) in out.chunks_exact_mut(cl).enumerate() {
                let start = base + (r0 + r) * rs;
                row.copy_from_slice(&x[start..start + cl]);
            }
            return;
        }
        if rs == 1 {
            // A plain transpose: output row r is input column r.
            let rows = out.len() / cl;
            crate::transpose::transpose(&x[base + r0..], cs, out, cl, rows, cl);
            return;
        }
        for c0 in (0..cl).step_by(TILE_COLS) {
            let c1 = (c0 + TILE_COLS).min(cl);
            for (r, row) in out.chunks_exact_mut(cl).enumerate() {
                let start = base + (r0 + r) * rs;
                for (c, v) in row[c0..c1].iter_mut().enumerate() {
                    *v = x[start + (c0 + c) * cs];
                }
            }
        }
    }
}

/// `y = x` with axes reordered: `y.dims[i] = x.dims[perm[i]]`.
pub(crate) fn permute(plan: &PermutePlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
    match x.dtype() {
        DType::F32 => permute_as(plan, x.as_slice::<f32>()?, y.as_mut_slice::<f32>()?),
        DType::I64 => permute_as(plan, x.as_slice::<i64>()?, y.as_mut_slice::<i64>()?),
        DType::I32 => permute_as(plan, x.as_slice::<i32>()?, y.as_mut_slice::<i32>()?),
        other => return Err(Error::unsupported(format!("permute of {other}"), "native")),
    }
    Ok(())
}

/// The permutation on slices (`y.len()` elements of the plan's output).
pub(crate) fn permute_as<T: Copy + Send + Sync>(plan: &PermutePlan, x: &[T], y: &mut [T]) {
    if y.is_empty() {
        return;
    }
    let l = Layout::new(plan);
    let block = TILE * l.cols.len;
    if y.len() < MIN_PARALLEL {
        for (o, slab) in y.chunks_exact_mut(l.slab()).enumerate() {
            let base = l.base(o);
            for (b, out) in slab.chunks_mut(block).enumerate() {
                l.copy_rows(x, base, b * TILE, out);
            }
        }
        return;
    }
    y.par_chunks_exact_mut(l.slab())
        .enumerate()
        .for_each(|(o, slab)| {
            let base = l.base(o);
            slab.par_chunks_mut(block)
                .enumerate()
                .for_each(|(b, out)| l.copy_rows(x, base, b * TILE, out));
        });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NativeBackend;
    use verjus_core::{ops, Element, Shape};

    /// The permutation by its definition: output multi-index `i` reads input
    /// index `j` with `j[perm[a]] = i[a]`.
    fn naive<T: Copy>(dims: &[usize], perm: &[usize], x: &[T]) -> Vec<T> {
        let strides = Shape::new(dims.to_vec()).unwrap().strides();
        let out: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
        (0..x.len())
            .map(|mut flat| {
                let mut src = 0;
                for a in (0..out.len()).rev() {
                    src += (flat % out[a]) * strides[perm[a]];
                    flat /= out[a];
                }
                x[src]
            })
            .collect()
    }

    fn run<T: Element>(dims: &[usize], perm: &[usize], x: Vec<T>) -> Vec<T> {
        let out: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
        let mut y = Tensor::from_vec(out, vec![T::default(); x.len()]).unwrap();
        let x = Tensor::from_vec(dims.to_vec(), x).unwrap();
        ops::permute(&NativeBackend, &x, perm, &mut y).unwrap();
        y.to_vec().unwrap()
    }

    #[test]
    fn small_permutation_by_hand() {
        // x [2, 3]: a transpose.
        let y = run(&[2, 3], &[1, 0], vec![1i32, 2, 3, 4, 5, 6]);
        assert_eq!(y, [1, 4, 2, 5, 3, 6]);
    }

    #[test]
    fn round_trip_with_the_inverse() {
        let dims = [3, 1, 5, 4, 2];
        let perm = [2, 4, 0, 1, 3];
        let x: Vec<i64> = (0..120).collect();
        let y = run(&dims, &perm, x.clone());
        assert_eq!(y, naive(&dims, &perm, &x));
        let plan = PermutePlan::new(&Shape::new(dims.to_vec()).unwrap(), &perm).unwrap();
        let back = run(plan.output.dims(), &plan.inverse(), y);
        assert_eq!(back, x);
    }

    #[test]
    fn large_transposes_and_identity() {
        let x: Vec<f32> = (0..300 * 170).map(|i| i as f32).collect();
        for (dims, perm) in [
            (vec![300, 170], vec![1, 0]),
            (vec![3, 100, 170], vec![0, 2, 1]),
            (vec![10, 30, 170], vec![2, 0, 1]),
            (vec![30, 10, 170], vec![0, 1, 2]),
        ] {
            assert_eq!(
                run(&dims, &perm, x.clone()),
                naive(&dims, &perm, &x),
                "{perm:?}"
            );
        }
    }

    #[test]
    fn merging_keeps_contiguous_axes_together() {
        // [a, b, c] -> [c, a, b]: a and b merge into one axis of stride c.
        let plan = PermutePlan::new(&Shape::new([4, 5, 6]).unwrap(), &[2, 0, 1]).unwrap();
        let l = Layout::new(&plan);
        assert!(l.outer.is_empty());
        assert_eq!(l.rows, Axis { len: 6, stride: 1 });
        assert_eq!(l.cols, Axis { len: 20, stride: 6 });
    }
}
