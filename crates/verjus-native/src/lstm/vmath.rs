//! The gate nonlinearities on AVX-512 vectors, for the fused step kernel.
//!
//! The same Cephes polynomials as `verjus_core::math::fast` (so the same
//! accuracy, a few ulp), evaluated with fused multiply-adds and `vscalefps`
//! for the power of two. The scalar versions cannot use either: Rust never
//! fuses a multiply and an add on its own, and the portable loops must give
//! the same bits on every vector width. The fused kernel is AVX-512 only, so
//! its results differ from the portable path's by rounding (well inside the
//! tolerance the conformance suite allows between backends).

use std::arch::x86_64::*;

/// A vector of `v`.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn splat(v: f32) -> __m512 {
    _mm512_set1_ps(v)
}

/// `e^x`, about 2 ulp for normal results; `+inf` above `ln(f32::MAX)`, 0 (or a
/// subnormal) far below.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn exp(x: __m512) -> __m512 {
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    let x = _mm512_max_ps(_mm512_min_ps(x, splat(88.722_84)), splat(-103.972_08));
    let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
        _mm512_mul_ps(x, splat(std::f32::consts::LOG2_E)),
    );
    let r = _mm512_fnmadd_ps(n, splat(LN2_HI), x);
    let r = _mm512_fnmadd_ps(n, splat(LN2_LO), r);
    let mut p = splat(1.987_569_2e-4);
    for c in [
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        1.666_666_5e-1,
        0.5,
    ] {
        p = _mm512_fmadd_ps(p, r, splat(c));
    }
    let p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, splat(1.0)));
    _mm512_scalef_ps(p, n)
}

/// The logistic function `1 / (1 + e^-x)` (no cancellation on either side).
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn sigmoid(x: __m512) -> __m512 {
    let e = exp(_mm512_sub_ps(_mm512_setzero_ps(), x));
    _mm512_div_ps(splat(1.0), _mm512_add_ps(splat(1.0), e))
}

/// `tanh(x)`: an odd polynomial below 0.625 in magnitude, `1 - 2 / (e^{2|x|} + 1)`
/// with the sign of `x` above (as `verjus_core::math::fast::tanh`).
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn tanh(x: __m512) -> __m512 {
    let z = _mm512_mul_ps(x, x);
    let mut p = splat(-5.704_988_7e-3);
    for c in [2.063_909e-2, -5.373_971_6e-2, 1.333_144_2e-1, -3.333_328e-1] {
        p = _mm512_fmadd_ps(p, z, splat(c));
    }
    let small = _mm512_fmadd_ps(_mm512_mul_ps(x, z), p, x);
    let a = _mm512_abs_ps(x);
    let e = exp(_mm512_add_ps(a, a));
    let large = _mm512_sub_ps(
        splat(1.0),
        _mm512_div_ps(splat(2.0), _mm512_add_ps(e, splat(1.0))),
    );
    let negative = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(x, _mm512_setzero_ps());
    let large = _mm512_mask_sub_ps(large, negative, _mm512_setzero_ps(), large);
    let is_small = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(a, splat(0.625));
    _mm512_mask_blend_ps(is_small, large, small)
}

#[cfg(test)]
mod tests {
    use super::*;
    use verjus_core::math::fast;

    /// A vector function of this module.
    type Vector = unsafe fn(__m512) -> __m512;

    /// A function's name, its vector version and the scalar one it follows.
    type Case = (&'static str, Vector, fn(f32) -> f32);

    /// Applies `f` to 16 values at a time.
    fn apply(f: Vector, xs: &[f32]) -> Vec<f32> {
        xs.chunks(16)
            .flat_map(|c| {
                let mut v = [0.0f32; 16];
                v[..c.len()].copy_from_slice(c);
                // SAFETY: the caller checked the CPU for AVX-512F.
                let y = unsafe { f(_mm512_loadu_ps(v.as_ptr())) };
                let mut out = [0.0f32; 16];
                // SAFETY: as above; `out` holds 16 floats.
                unsafe { _mm512_storeu_ps(out.as_mut_ptr(), y) };
                out[..c.len()].to_vec()
            })
            .collect()
    }

    #[test]
    fn match_the_scalar_fast_functions_within_a_few_ulp() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            eprintln!("skipped: this CPU has no AVX-512F (the fused kernel is not used here)");
            return;
        }
        let xs: Vec<f32> = (0..=40_000).map(|i| -100.0 + i as f32 * 0.005).collect();
        let cases: [Case; 3] = [
            ("exp", exp, fast::exp),
            ("sigmoid", sigmoid, fast::sigmoid),
            ("tanh", tanh, fast::tanh),
        ];
        for (name, vector, scalar) in cases {
            for (&x, y) in xs.iter().zip(apply(vector, &xs)) {
                let want = scalar(x);
                let close = if want.is_infinite() || want == 0.0 {
                    y == want || (want == 0.0 && y.abs() < 1e-37)
                } else {
                    ((y - want) / want).abs() <= 4.0 * f32::EPSILON || (y - want).abs() <= 1e-37
                };
                assert!(close, "{name}({x}) = {y}, scalar {want}");
            }
        }
    }
}
