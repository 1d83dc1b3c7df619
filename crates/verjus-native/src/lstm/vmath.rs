//! The gate nonlinearities on vectors, for the fused step kernel.
//!
//! The same Cephes polynomials as `verjus_core::math::fast` (so the same
//! accuracy, a few ulp), evaluated with fused multiply-adds and a scaling by
//! a power of two. The scalar versions cannot use either: Rust never fuses a
//! multiply and an add on its own, and the portable loops must give the same
//! bits on every vector width. So the fused kernel's results differ from the
//! portable path's by rounding (well inside the tolerance the conformance
//! suite allows between backends), and AVX2's from AVX-512's not at all: the
//! same operations in the same order, lane by lane.

use super::isa::Simd;

/// `e^x`, about 2 ulp for normal results; `+inf` above `ln(f32::MAX)`, 0 (or a
/// subnormal) far below.
#[inline(always)]
pub(super) fn exp<S: Simd>(s: S, x: S::V) -> S::V {
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    let x = s.max(s.min(x, s.splat(88.722_84)), s.splat(-103.972_08));
    let n = s.round(s.mul(x, s.splat(std::f32::consts::LOG2_E)));
    let r = s.fnmadd(n, s.splat(LN2_HI), x);
    let r = s.fnmadd(n, s.splat(LN2_LO), r);
    let mut p = s.splat(1.987_569_2e-4);
    for c in [
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        1.666_666_5e-1,
        0.5,
    ] {
        p = s.fmadd(p, r, s.splat(c));
    }
    let p = s.fmadd(p, s.mul(r, r), s.add(r, s.splat(1.0)));
    s.scale(p, n)
}

/// The logistic function `1 / (1 + e^-x)` (no cancellation on either side).
#[inline(always)]
pub(super) fn sigmoid<S: Simd>(s: S, x: S::V) -> S::V {
    let e = exp(s, s.sub(s.zero(), x));
    s.div(s.splat(1.0), s.add(s.splat(1.0), e))
}

/// `tanh(x)`: an odd polynomial below 0.625 in magnitude, `1 - 2 / (e^{2|x|} + 1)`
/// with the sign of `x` above (as `verjus_core::math::fast::tanh`).
#[inline(always)]
pub(super) fn tanh<S: Simd>(s: S, x: S::V) -> S::V {
    let z = s.mul(x, x);
    let mut p = s.splat(-5.704_988_7e-3);
    for c in [2.063_909e-2, -5.373_971_6e-2, 1.333_144_2e-1, -3.333_328e-1] {
        p = s.fmadd(p, z, s.splat(c));
    }
    let small = s.fmadd(s.mul(x, z), p, x);
    let a = s.abs(x);
    let e = exp(s, s.add(a, a));
    let large = s.sub(s.splat(1.0), s.div(s.splat(2.0), s.add(e, s.splat(1.0))));
    let large = s.negate_where_negative(large, x);
    s.select_below(a, s.splat(0.625), small, large)
}

#[cfg(test)]
mod tests {
    use super::super::isa::{Avx2, Avx512};
    use super::*;
    use verjus_core::math::fast;

    /// A vector function of this module.
    type Vector<S> = fn(S, <S as Simd>::V) -> <S as Simd>::V;

    /// A function's name, its vector version and the scalar one it follows.
    type Case<S> = (&'static str, Vector<S>, fn(f32) -> f32);

    /// Applies `f` to `S::LANES` values at a time.
    fn apply<S: Simd>(s: S, f: Vector<S>, xs: &[f32]) -> Vec<f32> {
        xs.chunks(S::LANES)
            .flat_map(|c| {
                let mut v = [0.0f32; 16];
                v[..c.len()].copy_from_slice(c);
                let mut out = [0.0f32; 16];
                // SAFETY: `v` and `out` hold 16 floats, at least a vector.
                unsafe { s.store(out.as_mut_ptr(), f(s, s.load(v.as_ptr()))) };
                out[..c.len()].to_vec()
            })
            .collect()
    }

    /// Checks `S`'s exp, sigmoid and tanh against the scalar fast functions.
    fn check<S: Simd>(s: S) {
        let xs: Vec<f32> = (0..=40_000).map(|i| -100.0 + i as f32 * 0.005).collect();
        let cases: [Case<S>; 3] = [
            ("exp", exp, fast::exp),
            ("sigmoid", sigmoid, fast::sigmoid),
            ("tanh", tanh, fast::tanh),
        ];
        for (name, vector, scalar) in cases {
            for (&x, y) in xs.iter().zip(apply(s, vector, &xs)) {
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

    #[test]
    fn avx512_matches_the_scalar_fast_functions_within_a_few_ulp() {
        match Avx512::detect() {
            Some(s) => check(s),
            None => eprintln!("skipped: this CPU has no AVX-512F"),
        }
    }

    #[test]
    fn avx2_matches_the_scalar_fast_functions_within_a_few_ulp() {
        match Avx2::detect() {
            Some(s) => check(s),
            None => eprintln!("skipped: this CPU has no AVX2 with FMA"),
        }
    }
}
