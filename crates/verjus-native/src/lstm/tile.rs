//! The register tile of the fused step kernel: `R` rows by `NQ` vectors of a
//! product `A B`, accumulated in vector registers.
//!
//! A step's product is small (`[B, H] x [H, 4H]`) and the `gemm` crate packs
//! its operands again at every call. Here the right-hand side is read in place
//! (the weights, already in the gate order of `layout`) and the tile stays in
//! registers for the gate loop that follows it in `fused`, so a step's gates
//! never go to memory between the product and the nonlinearities. With
//! `NQ = 4` and `R = S::ROWS` the tile takes 24 of AVX-512's 32 registers (12
//! of AVX2's 16), and each step of `k` loads four vectors of `B` and
//! broadcasts `R` values of `A` for `4 R` multiply-adds. The tile passes by
//! value: through a `&mut` LLVM kept a tile that two products added to in
//! memory (2.4x slower).

use super::isa::Simd;

/// An `R x NQ` tile of vectors.
pub(super) type Tile<S, const R: usize, const NQ: usize> = [[<S as Simd>::V; NQ]; R];

/// A zero tile.
#[inline(always)]
pub(super) fn zeros<S: Simd, const R: usize, const NQ: usize>(s: S) -> Tile<S, R, NQ> {
    [[s.zero(); NQ]; R]
}

/// A left-hand side: element `(r, p)` at `ptr + r * rs + p * cs`.
#[derive(Clone, Copy)]
pub(super) struct Lhs {
    pub ptr: *const f32,
    pub rs: usize,
    pub cs: usize,
}

/// The lanes of one vector an access touches: all, or only those of a mask.
pub(super) struct Lanes<S: Simd>(Option<S::Mask>);

impl<S: Simd> Clone for Lanes<S> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<S: Simd> Copy for Lanes<S> {}

impl<S: Simd> Lanes<S> {
    /// The first `n` lanes (`0 < n`; all of them from `S::LANES` on).
    #[inline(always)]
    pub(super) fn first(s: S, n: usize) -> Self {
        Lanes((n < S::LANES).then(|| s.first_lanes(n)))
    }

    /// The vector at `p`, the lanes outside 0.
    ///
    /// # Safety
    /// These lanes from `p` must be readable.
    #[inline(always)]
    pub(super) unsafe fn load(self, s: S, p: *const f32) -> S::V {
        // SAFETY: the caller's contract; a masked load touches no other lane.
        unsafe {
            match self.0 {
                None => s.load(p),
                Some(m) => s.load_masked(m, p),
            }
        }
    }

    /// The vector at `at` of `src`, or zeros without a source.
    ///
    /// # Safety
    /// These lanes from `at` must lie inside `src`.
    #[inline(always)]
    pub(super) unsafe fn load_or_zero(self, s: S, src: Option<&[f32]>, at: usize) -> S::V {
        match src {
            // SAFETY: the caller's contract.
            Some(src) => unsafe { self.load(s, src.as_ptr().add(at)) },
            None => s.zero(),
        }
    }

    /// Writes these lanes of `v` at `p`.
    ///
    /// # Safety
    /// These lanes from `p` must be writable, and no other thread may touch
    /// them meanwhile.
    #[inline(always)]
    pub(super) unsafe fn store(self, s: S, p: *mut f32, v: S::V) {
        // SAFETY: the caller's contract; a masked store touches no other lane.
        unsafe {
            match self.0 {
                None => s.store(p, v),
                Some(m) => s.store_masked(m, p, v),
            }
        }
    }
}

/// Where the vectors of a tile's rows lie: vector `q` of row `r` at
/// `ptr + r * ld + stride * q`; with a `tail`, the vectors from its first
/// index have only its lanes (the others read as 0 and are never written).
pub(super) struct Rows<S: Simd> {
    pub ptr: *const f32,
    pub ld: usize,
    pub stride: usize,
    pub tail: Option<(usize, Lanes<S>)>,
}

impl<S: Simd> Clone for Rows<S> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<S: Simd> Copy for Rows<S> {}

impl<S: Simd> Rows<S> {
    /// Contiguous vectors (`stride` one vector) of which the last has `width`
    /// columns' lanes in all (`0 < width <= NQ * LANES`).
    #[inline(always)]
    pub(super) fn contiguous(s: S, ptr: *const f32, ld: usize, nq: usize, width: usize) -> Self {
        let last = width - (nq - 1) * S::LANES;
        Rows {
            ptr,
            ld,
            stride: S::LANES,
            tail: (last < S::LANES).then(|| (nq - 1, Lanes::first(s, last))),
        }
    }

    /// Vectors `stride` apart, each with `lanes`.
    #[inline(always)]
    pub(super) fn strided(ptr: *const f32, ld: usize, stride: usize, lanes: Lanes<S>) -> Self {
        Rows {
            ptr,
            ld,
            stride,
            tail: lanes.0.map(|_| (0, lanes)),
        }
    }

    /// Vector `q` of row `r`.
    ///
    /// # Safety
    /// Its lanes must be readable.
    #[inline(always)]
    pub(super) unsafe fn load(self, s: S, r: usize, q: usize) -> S::V {
        // SAFETY: the caller's contract.
        unsafe {
            let p = self.ptr.add(r * self.ld + self.stride * q);
            match self.tail {
                Some((from, lanes)) if q >= from => lanes.load(s, p),
                _ => s.load(p),
            }
        }
    }

    /// Writes vector `q` of row `r`.
    ///
    /// # Safety
    /// Its lanes must be writable, and no other thread may touch them meanwhile.
    #[inline(always)]
    pub(super) unsafe fn store(self, s: S, r: usize, q: usize, v: S::V) {
        // SAFETY: the caller's contract.
        unsafe {
            let p = self.ptr.add(r * self.ld + self.stride * q).cast_mut();
            match self.tail {
                Some((from, lanes)) if q >= from => lanes.store(s, p, v),
                _ => s.store(p, v),
            }
        }
    }
}

/// The tile of `R` rows at `src`.
///
/// # Safety
/// As [`Rows::load`], for every vector of the tile.
#[inline(always)]
pub(super) unsafe fn load_tile<S: Simd, const R: usize, const NQ: usize>(
    s: S,
    src: Rows<S>,
) -> Tile<S, R, NQ> {
    let mut tile: Tile<S, R, NQ> = zeros(s);
    for (r, row) in tile.iter_mut().enumerate() {
        for (q, v) in row.iter_mut().enumerate() {
            // SAFETY: the caller's contract.
            *v = unsafe { src.load(s, r, q) };
        }
    }
    tile
}

/// Stores `tile` at `dst`.
///
/// # Safety
/// As [`Rows::store`], for every vector of the tile.
#[inline(always)]
pub(super) unsafe fn store_tile<S: Simd, const R: usize, const NQ: usize>(
    s: S,
    tile: &Tile<S, R, NQ>,
    dst: Rows<S>,
) {
    for (r, row) in tile.iter().enumerate() {
        for (q, &v) in row.iter().enumerate() {
            // SAFETY: the caller's contract.
            unsafe { dst.store(s, r, q, v) };
        }
    }
}

/// `acc + A[0..R, 0..k] B[0..k, vectors]`, row `p` of `B` as row `p` of `b`.
///
/// # Safety
/// Every element of `A` named above and every vector of `b`'s `k` rows must
/// be readable.
#[inline(always)]
pub(super) unsafe fn accumulate<S: Simd, const R: usize, const NQ: usize>(
    s: S,
    acc: Tile<S, R, NQ>,
    k: usize,
    a: Lhs,
    b: Rows<S>,
) -> Tile<S, R, NQ> {
    // Two loops, so that the common one loads without masks.
    // SAFETY: the caller's contract.
    unsafe {
        match b.tail {
            None => accumulate_with(s, acc, k, a, |p, q| {
                s.load(b.ptr.add(p * b.ld + b.stride * q))
            }),
            Some(_) => accumulate_with(s, acc, k, a, |p, q| b.load(s, p, q)),
        }
    }
}

/// [`accumulate`] with `load(p, q)` giving vector `q` of row `p` of `B`.
///
/// # Safety
/// As [`accumulate`]; `load` reads in bounds for `p < k`.
#[inline(always)]
unsafe fn accumulate_with<S: Simd, const R: usize, const NQ: usize>(
    s: S,
    mut acc: Tile<S, R, NQ>,
    k: usize,
    a: Lhs,
    load: impl Fn(usize, usize) -> S::V,
) -> Tile<S, R, NQ> {
    // SAFETY (both loops): A(r, p) is readable (the caller's contract).
    let a_at = |r: usize, p: usize| s.splat(unsafe { *a.ptr.add(r * a.rs + p * a.cs) });
    if S::B_ROW_AT_ONCE {
        for p in 0..k {
            let mut bv = [s.zero(); NQ];
            for (q, v) in bv.iter_mut().enumerate() {
                *v = load(p, q);
            }
            for (r, row) in acc.iter_mut().enumerate() {
                let av = a_at(r, p);
                for (v, &bq) in row.iter_mut().zip(&bv) {
                    *v = s.fmadd(av, bq, *v);
                }
            }
        }
    } else {
        for p in 0..k {
            let mut av = [s.zero(); R];
            for (r, v) in av.iter_mut().enumerate() {
                *v = a_at(r, p);
            }
            for q in 0..NQ {
                let bq = load(p, q);
                for (row, &ar) in acc.iter_mut().zip(&av) {
                    row[q] = s.fmadd(ar, bq, row[q]);
                }
            }
        }
    }
    acc
}

/// Calls `$run::<S, R, NQ>($args)` for the runtime `$r` (1..=6) and `$nq`
/// (1..=4): the tile sizes are constants inside, so that the tile lives in
/// registers.
macro_rules! dispatch_tile {
    ($s:ty, $r:expr, $nq:expr, $run:ident($($arg:expr),*)) => {
        match ($r, $nq) {
            (6, 4) => $run::<$s, 6, 4>($($arg),*),
            (5, 4) => $run::<$s, 5, 4>($($arg),*),
            (4, 4) => $run::<$s, 4, 4>($($arg),*),
            (3, 4) => $run::<$s, 3, 4>($($arg),*),
            (2, 4) => $run::<$s, 2, 4>($($arg),*),
            (1, 4) => $run::<$s, 1, 4>($($arg),*),
            (6, 3) => $run::<$s, 6, 3>($($arg),*),
            (5, 3) => $run::<$s, 5, 3>($($arg),*),
            (4, 3) => $run::<$s, 4, 3>($($arg),*),
            (3, 3) => $run::<$s, 3, 3>($($arg),*),
            (2, 3) => $run::<$s, 2, 3>($($arg),*),
            (1, 3) => $run::<$s, 1, 3>($($arg),*),
            (6, 2) => $run::<$s, 6, 2>($($arg),*),
            (5, 2) => $run::<$s, 5, 2>($($arg),*),
            (4, 2) => $run::<$s, 4, 2>($($arg),*),
            (3, 2) => $run::<$s, 3, 2>($($arg),*),
            (2, 2) => $run::<$s, 2, 2>($($arg),*),
            (1, 2) => $run::<$s, 1, 2>($($arg),*),
            (6, 1) => $run::<$s, 6, 1>($($arg),*),
            (5, 1) => $run::<$s, 5, 1>($($arg),*),
            (4, 1) => $run::<$s, 4, 1>($($arg),*),
            (3, 1) => $run::<$s, 3, 1>($($arg),*),
            (2, 1) => $run::<$s, 2, 1>($($arg),*),
            (1, 1) => $run::<$s, 1, 1>($($arg),*),
            (r, nq) => unreachable!("tile {r} x {nq} out of range"),
        }
    };
}
pub(super) use dispatch_tile;
