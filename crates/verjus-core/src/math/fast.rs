//! Vectorisable f32 versions of the transcendental functions.
//!
//! The library `expf`, `logf` and `tanhf` are scalar calls, so a loop over them
//! runs one element at a time, and the reference GELU evaluates `erf` in f64.
//! These versions are branch-free polynomial evaluations (Cephes' expf, logf
//! and tanhf, and the same Chebyshev erfc fit as `verjus_core::math::erf`), so
//! loops that call them vectorise. Each is within a few ulp of the correctly
//! rounded result (the tests below bound the error against f64), which is as
//! close to the reference definitions as those are to the exact functions.
//!
//! They live in the core, beside the reference definitions, because the
//! elementwise op table (`ops::elementwise::table`) names them as each op's
//! `fast` formula; a backend's loops call them through the op's kernel type.
//! Rust never fuses multiply-adds, so a loop compiled for a wider vector
//! extension gives bit-identical results.

/// `e^x` to about 2 ulp for normal results; 0 below `-103.9` (where the true
/// value is subnormal and tiny), infinity above `ln(f32::MAX)`, NaN for NaN.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const HI: f32 = 88.722_84; // ln(f32::MAX)
    const LO: f32 = -103.972_08; // ln(2^-150): below, the result rounds to 0
                                 // Adding 1.5 * 2^23 rounds a float of magnitude < 2^22 to an integer.
    const ROUND: f32 = 12_582_912.0;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    let xc = x.clamp(LO, HI);
    let t = xc * std::f32::consts::LOG2_E + ROUND;
    let n = t - ROUND;
    let k = (t.to_bits() as i32).wrapping_sub(ROUND.to_bits() as i32);
    let r = (xc - n * LN2_HI) - n * LN2_LO;
    let p = ((((1.987_569_2e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 1.666_666_5e-1)
        * r
        + 0.5;
    let p = p * r * r + r + 1.0;
    // 2^k as two normal factors, so that k in [-150, 128] needs no special case.
    let k1 = k >> 1;
    let y = p * pow2(k1) * pow2(k - k1);
    if x >= HI {
        f32::INFINITY
    } else if x <= LO {
        0.0
    } else {
        y
    }
}

/// `2^e` for `e` in `[-126, 127]`.
#[inline(always)]
fn pow2(e: i32) -> f32 {
    f32::from_bits((e.wrapping_add(127) as u32) << 23)
}

/// The natural logarithm to about 2 ulp; `-inf` at 0, NaN below 0 and for NaN.
#[inline(always)]
pub fn ln(x: f32) -> f32 {
    // Subnormals are scaled into the normal range first.
    let tiny = x < f32::MIN_POSITIVE;
    let xs = if tiny { x * 8_388_608.0 } else { x };
    let bits = xs.to_bits();
    let mut e = ((bits >> 23) & 0xff) as i32 - 126 - if tiny { 23 } else { 0 };
    // The mantissa in [0.5, 1), then moved to [sqrt(1/2), sqrt(2)).
    let mut m = f32::from_bits((bits & 0x007f_ffff) | 0x3f00_0000);
    if m < std::f32::consts::FRAC_1_SQRT_2 {
        e -= 1;
        m += m;
    }
    let f = m - 1.0;
    let z = f * f;
    let p = (((((((7.037_683_6e-2 * f - 1.151_461e-1) * f + 1.167_699_9e-1) * f
        - 1.242_014_1e-1)
        * f
        + 1.424_932_3e-1)
        * f
        - 1.666_805_8e-1)
        * f
        + 2.000_071_5e-1)
        * f
        - 2.499_999_4e-1)
        * f
        + 3.333_333e-1;
    let ef = e as f32;
    let y = f * z * p + ef * -2.121_944_4e-4 - 0.5 * z;
    let y = f + y + ef * 0.693_359_4;
    if x > 0.0 && x < f32::INFINITY {
        y
    } else if x == 0.0 {
        f32::NEG_INFINITY
    } else if x == f32::INFINITY {
        x
    } else {
        f32::NAN
    }
}

/// The logistic function, in the same two-sided form as the reference.
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    let e = exp(-x.abs());
    let r = 1.0 / (1.0 + e);
    if x >= 0.0 {
        r
    } else {
        e * r
    }
}

/// `tanh(x)`: an odd polynomial below 0.625, `1 - 2 / (e^{2|x|} + 1)` above.
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    let z = x * x;
    let small = x + x
        * z
        * ((((-5.704_988_7e-3 * z + 2.063_909e-2) * z - 5.373_971_6e-2) * z + 1.333_144_2e-1) * z
            - 3.333_328e-1);
    let a = x.abs();
    let large = (1.0 - 2.0 / (exp(a + a) + 1.0)).copysign(x);
    if a < 0.625 {
        small
    } else {
        large
    }
}

/// `erfc(|x|)`, the Numerical Recipes Chebyshev fit that `math::erf` uses.
#[inline(always)]
fn erfc_abs(x: f32) -> f32 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_2
        + t * (1.000_023_7
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_204
                                + t * (1.488_515_9 + t * (-0.822_152_2 + t * 0.170_872_77))))))));
    t * exp(poly)
}

/// The standard normal CDF, `(1 + erf(x / sqrt 2)) / 2`, without cancellation
/// for negative `x`.
#[inline(always)]
fn normal_cdf(x: f32) -> f32 {
    let half_tail = 0.5 * erfc_abs(x * std::f32::consts::FRAC_1_SQRT_2);
    if x >= 0.0 {
        1.0 - half_tail
    } else {
        half_tail
    }
}

/// The exact GELU, `x * Phi(x)`.
#[inline(always)]
pub fn gelu(x: f32) -> f32 {
    x * normal_cdf(x)
}

/// The derivative of the exact GELU, `Phi(x) + x * phi(x)`.
#[inline(always)]
pub fn gelu_derivative(x: f32) -> f32 {
    normal_cdf(x) + x * exp(-0.5 * x * x) * 0.398_942_3
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::UnaryOp;

    /// The largest error of `f` against `want` over `xs`, relative to
    /// `max(|want|, floor)`.
    fn worst(
        xs: impl Iterator<Item = f32>,
        f: impl Fn(f32) -> f32,
        want: impl Fn(f64) -> f64,
        floor: f64,
    ) -> f64 {
        xs.map(|x| {
            let w = want(f64::from(x));
            (f64::from(f(x)) - w).abs() / w.abs().max(floor)
        })
        .fold(0.0, f64::max)
    }

    fn grid(lo: f32, hi: f32, n: usize) -> impl Iterator<Item = f32> {
        (0..=n).map(move |i| lo + (hi - lo) * i as f32 / n as f32)
    }

    #[test]
    fn exp_and_ln_are_within_a_few_ulp() {
        assert!(worst(grid(-87.0, 88.7, 400_000), exp, f64::exp, 0.0) < 3e-7);
        let positives = grid(-40.0, 38.0, 200_000).map(|e| 2f32.powf(e));
        assert!(worst(positives, ln, f64::ln, 1.0) < 2e-7);
        assert_eq!(ln(1.0), 0.0);
        assert!((ln(1e-40) - 1e-40f32.ln()).abs() < 1e-5, "subnormal");
    }

    #[test]
    fn special_values() {
        assert_eq!(exp(0.0), 1.0);
        assert_eq!((exp(f32::NEG_INFINITY), exp(-200.0)), (0.0, 0.0));
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert!(exp(88.7).is_finite() && exp(-100.0) > 0.0);
        assert_eq!(
            (ln(0.0), ln(f32::INFINITY)),
            (f32::NEG_INFINITY, f32::INFINITY)
        );
        assert!(ln(-1.0).is_nan() && ln(f32::NAN).is_nan() && exp(f32::NAN).is_nan());
        assert_eq!((tanh(f32::INFINITY), tanh(f32::NEG_INFINITY)), (1.0, -1.0));
        assert_eq!(
            (sigmoid(f32::INFINITY), sigmoid(f32::NEG_INFINITY)),
            (1.0, 0.0)
        );
        assert!(tanh(f32::NAN).is_nan() && sigmoid(f32::NAN).is_nan() && gelu(f32::NAN).is_nan());
    }

    #[test]
    fn activations_match_the_reference_definitions() {
        let xs = || grid(-12.0, 12.0, 100_000);
        let reference = |op: UnaryOp| move |x: f64| f64::from(op.apply(x as f32));
        assert!(worst(xs(), tanh, f64::tanh, 1e-30) < 5e-7);
        assert!(worst(xs(), sigmoid, reference(UnaryOp::Sigmoid), 1e-30) < 5e-7);
        // GELU against the reference, absolute below 1 (its f32 `1 + erf` cancels there).
        assert!(worst(xs(), gelu, reference(UnaryOp::Gelu), 1.0) < 5e-7);
        let d = |x: f64| f64::from(UnaryOp::Gelu.derivative(x as f32, 0.0));
        assert!(worst(xs(), gelu_derivative, d, 1.0) < 5e-7);
    }
}
