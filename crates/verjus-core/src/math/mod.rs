//! Scalar math shared by the definitions of the ops: the reference `erf`
//! here, and in [`fast`] the vectorisable versions that backends' loops use.

pub mod fast;

/// The error function at f32 precision (computed in f64, absolute error < 2e-7).
pub fn erf(x: f32) -> f32 {
    let x64 = f64::from(x);
    erf_f64(x64) as f32
}

/// The error function in f64 (Numerical Recipes' erfc via Chebyshev, relative error < 1.2e-7).
fn erf_f64(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * poly.exp();
    if x >= 0.0 {
        1.0 - erfc
    } else {
        erfc - 1.0
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn erf_matches_known_values() {
        // erf values from tables.
        for (x, e) in [
            (0.0f32, 0.0f32),
            (0.5, 0.520_499_9),
            (1.0, 0.842_700_8),
            (2.0, 0.995_322_3),
            (-1.0, -0.842_700_8),
        ] {
            assert!(
                (super::erf(x) - e).abs() < 3e-7,
                "erf({x}) = {} != {e}",
                super::erf(x)
            );
        }
    }
}
