//! The vector instructions the fused step kernel is written against, on
//! AVX-512 and on AVX2 with FMA.
//!
//! The kernel ([`super::fused`], its tile and its nonlinearities) is written
//! once, generic over [`Simd`]; an implementation is a token that exists only
//! on a CPU with its instructions ([`Isa::detect`]), so its methods are safe
//! to call. Every generic function of the kernel is `#[inline(always)]` and
//! is called from one entry point per instruction set compiled with that
//! set's `#[target_feature]`: inlined there, the intrinsics become single
//! instructions (a call that was not inlined would run each one as a
//! function).
//!
//! The two differ in width (16 or 8 floats), in registers (32 or 16, hence
//! [`Simd::ROWS`]) and in how lanes are masked (a `k` register or a vector).

use super::Split;
use std::arch::x86_64::*;

/// A vector instruction set for the fused kernel.
pub(super) trait Simd: Copy {
    /// A vector of [`Simd::LANES`] floats.
    type V: Copy;
    /// Which lanes of a vector a masked load or store touches.
    type Mask: Copy;
    /// Floats in a vector.
    const LANES: usize;
    /// Rows of a full register tile of four vectors a row (the accumulators,
    /// the four vectors of the right-hand side and a broadcast fit in the
    /// registers).
    const ROWS: usize;
    /// Whether a tile's product step loads a whole row of `B` (four vectors)
    /// and then broadcasts `A` row by row, or broadcasts the `R` values of
    /// `A` first and then loads `B` a vector at a time. AVX-512 has the
    /// registers for the former; on AVX2 it left the 3 x 4 tile one register
    /// short, and LLVM spilled in the loop (1.4x slower).
    const B_ROW_AT_ONCE: bool;

    /// The first `n` lanes (`0 < n <= LANES`).
    fn first_lanes(self, n: usize) -> Self::Mask;
    fn zero(self) -> Self::V;
    fn splat(self, v: f32) -> Self::V;
    /// # Safety
    /// `p..p + LANES` must be readable.
    unsafe fn load(self, p: *const f32) -> Self::V;
    /// # Safety
    /// `p..p + LANES` must be writable.
    unsafe fn store(self, p: *mut f32, v: Self::V);
    /// The lanes of `m` from `p`, the others 0.
    ///
    /// # Safety
    /// The lanes of `m` from `p` must be readable; no other lane is touched.
    unsafe fn load_masked(self, m: Self::Mask, p: *const f32) -> Self::V;
    /// # Safety
    /// The lanes of `m` from `p` must be writable; no other lane is touched.
    unsafe fn store_masked(self, m: Self::Mask, p: *mut f32, v: Self::V);
    fn add(self, a: Self::V, b: Self::V) -> Self::V;
    fn sub(self, a: Self::V, b: Self::V) -> Self::V;
    fn mul(self, a: Self::V, b: Self::V) -> Self::V;
    fn div(self, a: Self::V, b: Self::V) -> Self::V;
    /// `a * b + c`, rounded once.
    fn fmadd(self, a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    /// `c - a * b`, rounded once.
    fn fnmadd(self, a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    fn min(self, a: Self::V, b: Self::V) -> Self::V;
    fn max(self, a: Self::V, b: Self::V) -> Self::V;
    fn abs(self, a: Self::V) -> Self::V;
    /// Each lane rounded to the nearest integer (ties to even).
    fn round(self, a: Self::V) -> Self::V;
    /// `a * 2^n` for integral `n` in `[-150, 128]`, rounded once (to 0 or a
    /// subnormal below the normal range, to infinity above it).
    fn scale(self, a: Self::V, n: Self::V) -> Self::V;
    /// `-a` where `sign` is negative, `a` elsewhere.
    fn negate_where_negative(self, a: Self::V, sign: Self::V) -> Self::V;
    /// `small` where `x < limit`, `large` elsewhere.
    fn select_below(self, x: Self::V, limit: Self::V, small: Self::V, large: Self::V) -> Self::V;
}

/// The instruction set the fused kernel runs with on this CPU, if any.
#[derive(Clone, Copy, Debug)]
pub(super) enum Isa {
    Avx512(Avx512),
    Avx2(Avx2),
}

impl Isa {
    /// AVX-512F where the CPU has it, else AVX2 with FMA, else none.
    pub(super) fn detect() -> Option<Self> {
        Avx512::detect().map(Isa::Avx512).or_else(|| {
            Avx2::detect()
                .filter(|_| std::env::var_os("NOAVX2").is_none())
                .map(Isa::Avx2)
        })
    }

    /// Floats in a vector.
    pub(super) fn lanes(self) -> usize {
        match self {
            Isa::Avx512(_) => Avx512::LANES,
            Isa::Avx2(_) => Avx2::LANES,
        }
    }

    /// How the fused steps share a sequence among threads with this set:
    /// rows with AVX-512; units with AVX2, where each thread's reading all
    /// the weights at every step outgrew a core's L2 (at H = 256 two threads
    /// of a row split ran 1.5x faster than one, a unit split's 2x) and a
    /// 3-row tile gains little from having all rows.
    pub(super) fn split(self) -> Split {
        match self {
            Isa::Avx512(_) => Split::Rows,
            Isa::Avx2(_) => Split::Units,
        }
    }

    /// Units in a column panel of `W_hh` for the fused backward (see
    /// `Layout::column_panels_to`): a tile's four vectors.
    pub(super) fn panel_units(self) -> usize {
        4 * self.lanes()
    }

    /// Rows of a full register tile.
    pub(super) fn rows(self) -> usize {
        match self {
            Isa::Avx512(_) => Avx512::ROWS,
            Isa::Avx2(_) => Avx2::ROWS,
        }
    }
}

/// AVX-512F: 16 floats a vector, 32 registers.
#[derive(Clone, Copy, Debug)]
pub(super) struct Avx512(());

impl Avx512 {
    pub(super) fn detect() -> Option<Self> {
        std::arch::is_x86_feature_detected!("avx512f").then_some(Avx512(()))
    }
}

// SAFETY (every `unsafe` block of this impl): an `Avx512` exists only where
// the CPU has AVX-512F (`Avx512::detect`); pointer contracts are the caller's.
impl Simd for Avx512 {
    type V = __m512;
    type Mask = __mmask16;
    const LANES: usize = 16;
    const ROWS: usize = 6;
    const B_ROW_AT_ONCE: bool = true;

    #[inline(always)]
    fn first_lanes(self, n: usize) -> __mmask16 {
        ((1u32 << n) - 1) as __mmask16
    }
    #[inline(always)]
    fn zero(self) -> __m512 {
        unsafe { _mm512_setzero_ps() }
    }
    #[inline(always)]
    fn splat(self, v: f32) -> __m512 {
        unsafe { _mm512_set1_ps(v) }
    }
    #[inline(always)]
    unsafe fn load(self, p: *const f32) -> __m512 {
        unsafe { _mm512_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32, v: __m512) {
        unsafe { _mm512_storeu_ps(p, v) }
    }
    #[inline(always)]
    unsafe fn load_masked(self, m: __mmask16, p: *const f32) -> __m512 {
        unsafe { _mm512_maskz_loadu_ps(m, p) }
    }
    #[inline(always)]
    unsafe fn store_masked(self, m: __mmask16, p: *mut f32, v: __m512) {
        unsafe { _mm512_mask_storeu_ps(p, m, v) }
    }
    #[inline(always)]
    fn add(self, a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_add_ps(a, b) }
    }
    #[inline(always)]
    fn sub(self, a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_sub_ps(a, b) }
    }
    #[inline(always)]
    fn mul(self, a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_mul_ps(a, b) }
    }
    #[inline(always)]
    fn div(self, a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_div_ps(a, b) }
    }
    #[inline(always)]
    fn fmadd(self, a: __m512, b: __m512, c: __m512) -> __m512 {
        unsafe { _mm512_fmadd_ps(a, b, c) }
    }
    #[inline(always)]
    fn fnmadd(self, a: __m512, b: __m512, c: __m512) -> __m512 {
        unsafe { _mm512_fnmadd_ps(a, b, c) }
    }
    #[inline(always)]
    fn min(self, a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_min_ps(a, b) }
    }
    #[inline(always)]
    fn max(self, a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_max_ps(a, b) }
    }
    #[inline(always)]
    fn abs(self, a: __m512) -> __m512 {
        unsafe { _mm512_abs_ps(a) }
    }
    #[inline(always)]
    fn round(self, a: __m512) -> __m512 {
        unsafe { _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(a) }
    }
    #[inline(always)]
    fn scale(self, a: __m512, n: __m512) -> __m512 {
        unsafe { _mm512_scalef_ps(a, n) }
    }
    #[inline(always)]
    fn negate_where_negative(self, a: __m512, sign: __m512) -> __m512 {
        unsafe {
            let negative = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(sign, _mm512_setzero_ps());
            _mm512_mask_sub_ps(a, negative, _mm512_setzero_ps(), a)
        }
    }
    #[inline(always)]
    fn select_below(self, x: __m512, limit: __m512, small: __m512, large: __m512) -> __m512 {
        unsafe {
            let below = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(x, limit);
            _mm512_mask_blend_ps(below, large, small)
        }
    }
}

/// AVX2 with FMA: 8 floats a vector, 16 registers.
#[derive(Clone, Copy, Debug)]
pub(super) struct Avx2(());

impl Avx2 {
    pub(super) fn detect() -> Option<Self> {
        (std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma"))
            .then_some(Avx2(()))
    }
}

/// `2^e` for integral `e` in `[-126, 127]`, from its exponent bits.
#[inline(always)]
fn avx2_pow2(e: __m256i) -> __m256 {
    // SAFETY: called only from `Avx2` methods (AVX2 present).
    unsafe {
        _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(
            e,
            _mm256_set1_epi32(127),
        )))
    }
}

// SAFETY (every `unsafe` block of this impl): an `Avx2` exists only where the
// CPU has AVX2 and FMA (`Avx2::detect`); pointer contracts are the caller's.
impl Simd for Avx2 {
    type V = __m256;
    type Mask = __m256i;
    const LANES: usize = 8;
    const ROWS: usize = 3;
    const B_ROW_AT_ONCE: bool = false;

    #[inline(always)]
    fn first_lanes(self, n: usize) -> __m256i {
        unsafe {
            let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
            _mm256_cmpgt_epi32(_mm256_set1_epi32(n as i32), lane)
        }
    }
    #[inline(always)]
    fn zero(self) -> __m256 {
        unsafe { _mm256_setzero_ps() }
    }
    #[inline(always)]
    fn splat(self, v: f32) -> __m256 {
        unsafe { _mm256_set1_ps(v) }
    }
    #[inline(always)]
    unsafe fn load(self, p: *const f32) -> __m256 {
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32, v: __m256) {
        unsafe { _mm256_storeu_ps(p, v) }
    }
    #[inline(always)]
    unsafe fn load_masked(self, m: __m256i, p: *const f32) -> __m256 {
        unsafe { _mm256_maskload_ps(p, m) }
    }
    #[inline(always)]
    unsafe fn store_masked(self, m: __m256i, p: *mut f32, v: __m256) {
        unsafe { _mm256_maskstore_ps(p, m, v) }
    }
    #[inline(always)]
    fn add(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_add_ps(a, b) }
    }
    #[inline(always)]
    fn sub(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_sub_ps(a, b) }
    }
    #[inline(always)]
    fn mul(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_mul_ps(a, b) }
    }
    #[inline(always)]
    fn div(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_div_ps(a, b) }
    }
    #[inline(always)]
    fn fmadd(self, a: __m256, b: __m256, c: __m256) -> __m256 {
        unsafe { _mm256_fmadd_ps(a, b, c) }
    }
    #[inline(always)]
    fn fnmadd(self, a: __m256, b: __m256, c: __m256) -> __m256 {
        unsafe { _mm256_fnmadd_ps(a, b, c) }
    }
    #[inline(always)]
    fn min(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_min_ps(a, b) }
    }
    #[inline(always)]
    fn max(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_max_ps(a, b) }
    }
    #[inline(always)]
    fn abs(self, a: __m256) -> __m256 {
        unsafe { _mm256_andnot_ps(_mm256_set1_ps(-0.0), a) }
    }
    #[inline(always)]
    fn round(self, a: __m256) -> __m256 {
        unsafe { _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(a) }
    }
    #[inline(always)]
    fn scale(self, a: __m256, n: __m256) -> __m256 {
        // 2^n as two normal factors, so that n in [-150, 128] needs no
        // special case (as `verjus_core::math::fast::exp`).
        unsafe {
            let n = _mm256_cvtps_epi32(n);
            let n1 = _mm256_srai_epi32::<1>(n);
            let n2 = _mm256_sub_epi32(n, n1);
            _mm256_mul_ps(_mm256_mul_ps(a, avx2_pow2(n1)), avx2_pow2(n2))
        }
    }
    #[inline(always)]
    fn negate_where_negative(self, a: __m256, sign: __m256) -> __m256 {
        unsafe {
            let negative = _mm256_cmp_ps::<_CMP_LT_OQ>(sign, _mm256_setzero_ps());
            _mm256_blendv_ps(a, _mm256_sub_ps(_mm256_setzero_ps(), a), negative)
        }
    }
    #[inline(always)]
    fn select_below(self, x: __m256, limit: __m256, small: __m256, large: __m256) -> __m256 {
        unsafe { _mm256_blendv_ps(large, small, _mm256_cmp_ps::<_CMP_LT_OQ>(x, limit)) }
    }
}
