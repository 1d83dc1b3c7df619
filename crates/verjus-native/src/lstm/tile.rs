//! The register tile of the fused step kernel: `R` rows by `NQ` vectors of
//! 16 columns of a product `A B`, accumulated in AVX-512 registers.
//!
//! A step's product is small (`[B, H] x [H, 4H]`) and the `gemm` crate packs
//! its operands again at every call. Here the right-hand side is read in place
//! (the weights, already in the gate order of `layout`, rows `ldb` apart) and
//! the tile stays in registers for the gate loop that follows it in
//! `fused`, so a step's gates never go to memory between the product and the
//! nonlinearities. With `R = 6` and `NQ = 4` the tile takes 24 of the 32
//! vector registers, and each step of `k` loads four vectors of `B` and
//! broadcasts six values of `A` for 24 multiply-adds. The tile passes by
//! value: through a `&mut` LLVM kept a tile that two products added to in
//! memory (2.4x slower).

use std::arch::x86_64::*;

/// Rows of a full tile.
pub(super) const ROWS: usize = 6;

/// Columns of one vector.
pub(super) const LANES: usize = 16;

/// An `R x NQ` tile of vectors.
pub(super) type Tile<const R: usize, const NQ: usize> = [[__m512; NQ]; R];

/// A zero tile.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn zeros<const R: usize, const NQ: usize>() -> Tile<R, NQ> {
    [[_mm512_setzero_ps(); NQ]; R]
}

/// The tile whose row `r` starts at `src + r * ld`.
///
/// # Safety
/// Those `R` rows of `16 NQ` floats must be readable.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn load_tile<const R: usize, const NQ: usize>(
    src: *const f32,
    ld: usize,
) -> Tile<R, NQ> {
    let mut tile: Tile<R, NQ> = zeros();
    for (r, row) in tile.iter_mut().enumerate() {
        for (q, v) in row.iter_mut().enumerate() {
            // SAFETY: vector q of row r is readable (the caller's contract).
            *v = unsafe { _mm512_loadu_ps(src.add(r * ld + LANES * q)) };
        }
    }
    tile
}

/// Stores `tile`, its row `r` at `dst + r * ld`.
///
/// # Safety
/// Those `R` rows of `16 NQ` floats must be writable, and no other thread may
/// touch them meanwhile.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn store_tile<const R: usize, const NQ: usize>(
    tile: &Tile<R, NQ>,
    dst: *mut f32,
    ld: usize,
) {
    for (r, row) in tile.iter().enumerate() {
        for (q, &v) in row.iter().enumerate() {
            // SAFETY: vector q of row r is writable (the caller's contract).
            unsafe { _mm512_storeu_ps(dst.add(r * ld + LANES * q), v) };
        }
    }
}

/// A left-hand side: element `(r, p)` at `ptr + r * rs + p * cs`.
#[derive(Clone, Copy)]
pub(super) struct Lhs {
    pub ptr: *const f32,
    pub rs: usize,
    pub cs: usize,
}

/// Every lane of a vector.
pub(super) const ALL: __mmask16 = 0xffff;

/// The lanes of the last vector of a `width`-column tile (`width > 0`).
pub(super) fn tail_mask(width: usize) -> __mmask16 {
    match width % LANES {
        0 => ALL,
        tail => (1 << tail) - 1,
    }
}

/// `acc + A[0..R, 0..k] B[0..k, 0..16 NQ]`, row `p` of `B` at `b + p * ldb`;
/// of the last vector of `B`'s rows only the lanes of `last` are read (the
/// others count as 0).
///
/// # Safety
/// Every element of `A` and `B` named above must be readable.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn accumulate<const R: usize, const NQ: usize>(
    mut acc: Tile<R, NQ>,
    k: usize,
    a: Lhs,
    b: *const f32,
    ldb: usize,
    last: __mmask16,
) -> Tile<R, NQ> {
    for p in 0..k {
        let mut bv = [_mm512_setzero_ps(); NQ];
        for (q, v) in bv.iter_mut().enumerate() {
            let lanes = if q + 1 == NQ { last } else { ALL };
            // SAFETY: these lanes of row p of B, vector q, are readable (the
            // caller's contract); a masked load touches no other lane.
            *v = unsafe { _mm512_maskz_loadu_ps(lanes, b.add(p * ldb + LANES * q)) };
        }
        for (r, row) in acc.iter_mut().enumerate() {
            // SAFETY: A(r, p) is readable (the caller's contract).
            let av = _mm512_set1_ps(unsafe { *a.ptr.add(r * a.rs + p * a.cs) });
            for (v, &bq) in row.iter_mut().zip(&bv) {
                *v = _mm512_fmadd_ps(av, bq, *v);
            }
        }
    }
    acc
}

/// Calls `$run::<R, NQ>($args)` for the runtime `$r` (1..=ROWS) and `$nq`
/// (1..=4): the tile sizes are constants inside, so that the tile lives in
/// registers.
macro_rules! dispatch_tile {
    ($r:expr, $nq:expr, $run:ident($($arg:expr),*)) => {
        match ($r, $nq) {
            (6, 4) => $run::<6, 4>($($arg),*),
            (5, 4) => $run::<5, 4>($($arg),*),
            (4, 4) => $run::<4, 4>($($arg),*),
            (3, 4) => $run::<3, 4>($($arg),*),
            (2, 4) => $run::<2, 4>($($arg),*),
            (1, 4) => $run::<1, 4>($($arg),*),
            (6, 3) => $run::<6, 3>($($arg),*),
            (5, 3) => $run::<5, 3>($($arg),*),
            (4, 3) => $run::<4, 3>($($arg),*),
            (3, 3) => $run::<3, 3>($($arg),*),
            (2, 3) => $run::<2, 3>($($arg),*),
            (1, 3) => $run::<1, 3>($($arg),*),
            (6, 2) => $run::<6, 2>($($arg),*),
            (5, 2) => $run::<5, 2>($($arg),*),
            (4, 2) => $run::<4, 2>($($arg),*),
            (3, 2) => $run::<3, 2>($($arg),*),
            (2, 2) => $run::<2, 2>($($arg),*),
            (1, 2) => $run::<1, 2>($($arg),*),
            (6, 1) => $run::<6, 1>($($arg),*),
            (5, 1) => $run::<5, 1>($($arg),*),
            (4, 1) => $run::<4, 1>($($arg),*),
            (3, 1) => $run::<3, 1>($($arg),*),
            (2, 1) => $run::<2, 1>($($arg),*),
            (1, 1) => $run::<1, 1>($($arg),*),
            (r, nq) => unreachable!("tile {r} x {nq} out of range"),
        }
    };
}
pub(super) use dispatch_tile;
