//! Host-side index layouts passed to kernels by value, and the arithmetic that
//! fills them.
//!
//! Kernels see tensors as a list of dimensions with one stride per operand.
//! Before a launch, [`collapse`] drops unit axes and merges neighbouring axes
//! that are contiguous for every operand, so a broadcast bias add over
//! `[batch, seq, features]` becomes a rank-2 loop. The structs are `repr(C)`
//! mirrors of the ones in `kernels/*.cu` (rank last, so neither side pads
//! differently).

use verjus_core::MAX_RANK;

/// Up to three operands broadcast over `dims` (`Strided3` in elementwise.cu).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Strided3 {
    pub dims: [i64; MAX_RANK],
    pub s: [[i64; MAX_RANK]; 3],
    pub rank: i32,
}

/// Kept and reduced axes with input strides (`Reduction` in reduce.cu).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Reduction {
    pub kdims: [i64; MAX_RANK],
    pub kstrides: [i64; MAX_RANK],
    pub rdims: [i64; MAX_RANK],
    pub rstrides: [i64; MAX_RANK],
    pub krank: i32,
    pub rrank: i32,
}

/// Output dims and the input stride of each (`Permutation` in permute.cu).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Permutation {
    pub dims: [i64; MAX_RANK],
    pub strides: [i64; MAX_RANK],
    pub rank: i32,
}

/// Row-major strides of `dims`.
pub(crate) fn contiguous_strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

/// Drops unit axes and merges axis `i` into `i + 1` where every operand's
/// stride on `i` is its stride on `i + 1` times that axis' length. Returns the
/// new dims and one stride list per operand; the element order is unchanged.
pub(crate) fn collapse(dims: &[usize], strides: &[&[usize]]) -> (Vec<usize>, Vec<Vec<usize>>) {
    let mut out_dims: Vec<usize> = Vec::new();
    let mut out_strides: Vec<Vec<usize>> = vec![Vec::new(); strides.len()];
    for (axis, &d) in dims.iter().enumerate() {
        if d == 1 {
            continue;
        }
        let mergeable = out_dims.last().is_some_and(|_| {
            strides
                .iter()
                .zip(&out_strides)
                .all(|(s, o)| o.last() == Some(&(s[axis] * d)))
        });
        if mergeable {
            *out_dims.last_mut().expect("checked") *= d;
            for (s, o) in strides.iter().zip(&mut out_strides) {
                *o.last_mut().expect("checked") = s[axis];
            }
        } else {
            out_dims.push(d);
            for (s, o) in strides.iter().zip(&mut out_strides) {
                o.push(s[axis]);
            }
        }
    }
    (out_dims, out_strides)
}

fn fixed(v: &[usize]) -> [i64; MAX_RANK] {
    let mut a = [0i64; MAX_RANK];
    for (x, &y) in a.iter_mut().zip(v) {
        *x = y as i64;
    }
    a
}

impl Strided3 {
    /// The layout of up to three operands (missing ones get zero strides).
    pub fn new(dims: &[usize], strides: &[&[usize]]) -> Self {
        let (d, s) = collapse(dims, strides);
        let mut all = [[0i64; MAX_RANK]; 3];
        for (a, s) in all.iter_mut().zip(&s) {
            *a = fixed(s);
        }
        Strided3 {
            dims: fixed(&d),
            s: all,
            rank: d.len() as i32,
        }
    }
}

impl Reduction {
    /// Splits `dims` (contiguous) into kept and reduced axes.
    pub fn new(dims: &[usize], reduced: &[bool]) -> Self {
        let strides = contiguous_strides(dims);
        let pick = |want: bool| {
            let (d, s): (Vec<usize>, Vec<usize>) = dims
                .iter()
                .zip(&strides)
                .zip(reduced)
                .filter(|(_, &r)| r == want)
                .map(|((&d, &s), _)| (d, s))
                .unzip();
            let (d, s) = collapse(&d, &[&s]);
            let s = s.into_iter().next().unwrap_or_default();
            (d, s)
        };
        let (kd, ks) = pick(false);
        let (rd, rs) = pick(true);
        Reduction {
            kdims: fixed(&kd),
            kstrides: fixed(&ks),
            rdims: fixed(&rd),
            rstrides: fixed(&rs),
            krank: kd.len() as i32,
            rrank: rd.len() as i32,
        }
    }
}

impl Permutation {
    /// `y.dims[i] = x.dims[perm[i]]`, reading `x` with its own strides.
    pub fn new(input: &[usize], perm: &[usize]) -> Self {
        let strides = contiguous_strides(input);
        let out: Vec<usize> = perm.iter().map(|&p| input[p]).collect();
        let src: Vec<usize> = perm.iter().map(|&p| strides[p]).collect();
        let dst = contiguous_strides(&out);
        let (d, s) = collapse(&out, &[&src, &dst]);
        Permutation {
            dims: fixed(&d),
            strides: fixed(&s[0]),
            rank: d.len() as i32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The offsets a kernel computes for output element `i`.
    fn offsets(dims: &[i64], strides: &[i64], rank: i32, mut i: i64) -> i64 {
        let mut off = 0;
        for d in (0..rank as usize).rev() {
            off += (i % dims[d]) * strides[d];
            i /= dims[d];
        }
        off
    }

    #[test]
    fn collapse_merges_contiguous_axes() {
        let (d, s) = collapse(&[2, 3, 4], &[&[12, 4, 1], &[0, 0, 1]]);
        assert_eq!(d, vec![6, 4]);
        assert_eq!(s, vec![vec![4, 1], vec![0, 1]]);
        let (d, s) = collapse(&[2, 1, 5], &[&[5, 5, 1]]);
        assert_eq!((d, s), (vec![10], vec![vec![1]]));
        let (d, _) = collapse(&[1, 1], &[&[1, 1]]);
        assert!(d.is_empty(), "a scalar has rank 0");
    }

    #[test]
    fn strided3_broadcast_offsets() {
        // a [2, 3, 4] + b [3, 1]: b broadcast over axes 0 and 2.
        let l = Strided3::new(&[2, 3, 4], &[&[12, 4, 1], &[0, 1, 0]]);
        for i in 0..24i64 {
            let (n, r) = (i / 12, i % 12);
            let (j, k) = (r / 4, r % 4);
            assert_eq!(offsets(&l.dims, &l.s[0], l.rank, i), i);
            assert_eq!(offsets(&l.dims, &l.s[1], l.rank, i), j, "{n} {j} {k}");
        }
    }

    #[test]
    fn reduction_splits_axes() {
        // Reduce axes 0 and 2 of [2, 3, 4]: 3 outputs of 8 elements each.
        let r = Reduction::new(&[2, 3, 4], &[true, false, true]);
        assert_eq!((r.krank, r.rrank), (1, 2));
        for o in 0..3 {
            let base = offsets(&r.kdims, &r.kstrides, r.krank, o);
            let mut got: Vec<i64> = (0..8)
                .map(|g| base + offsets(&r.rdims, &r.rstrides, r.rrank, g))
                .collect();
            got.sort();
            let mut want: Vec<i64> = (0..2)
                .flat_map(|n| (0..4).map(move |k| n * 12 + o * 4 + k))
                .collect();
            want.sort();
            assert_eq!(got, want, "output {o}");
        }
    }

    #[test]
    fn permutation_offsets() {
        // [2, 3, 4] permuted (2, 0, 1) -> [4, 2, 3].
        let p = Permutation::new(&[2, 3, 4], &[2, 0, 1]);
        let mut i = 0;
        for k in 0..4 {
            for n in 0..2 {
                for j in 0..3 {
                    let want = n * 12 + j * 4 + k;
                    assert_eq!(offsets(&p.dims, &p.strides, p.rank, i), want);
                    i += 1;
                }
            }
        }
        // The identity collapses to one axis.
        assert_eq!(Permutation::new(&[2, 3, 4], &[0, 1, 2]).rank, 1);
    }
}
