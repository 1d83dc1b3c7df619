//! Random fills sixteen Philox blocks at a time, in loops that vectorise.
//!
//! `rng::block` hashes one block and `rng::box_muller` calls libm's `ln`,
//! `sqrt`, `cos` and `sin` per pair: about 11 ns per normal value, scalar. Here
//! the ten Philox rounds run over sixteen counters side by side (the same
//! integer arithmetic, so the words are exactly `rng::block`'s), and the
//! Box–Muller transform uses branch-free polynomial `ln` and `sin`/`cos`
//! (Cephes' single-precision ones, within a few 1e-7 of libm), so the compiler
//! vectorises both, and [`simd`] runs them with AVX2 or AVX-512 where the CPU
//! has it. Uniform values are bitwise `rng`'s; normal values are within the
//! tolerance the conformance suite allows between devices (the CUDA kernel
//! uses its own `logf`/`sinf`/`cosf` too), and the same on every path, so a
//! gradient checkpoint's re-draw gives the same numbers.

use crate::simd::simd;
use verjus_core::rng;

/// Philox blocks per batch.
pub(crate) const BLOCKS: usize = 16;
/// Values per batch (four per block).
pub(crate) const VALUES: usize = 4 * BLOCKS;

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

/// The four words of blocks `first..first + BLOCKS` under `seed`, by word
/// then block: `words[w][b] == rng::block(seed, first + b)[w]`.
#[inline(always)]
fn philox(seed: u64, first: u64) -> [[u32; BLOCKS]; 4] {
    let mut c0 = [0u32; BLOCKS];
    let mut c1 = [0u32; BLOCKS];
    let mut c2 = [0u32; BLOCKS];
    let mut c3 = [0u32; BLOCKS];
    for b in 0..BLOCKS {
        let counter = first.wrapping_add(b as u64);
        (c0[b], c1[b]) = (counter as u32, (counter >> 32) as u32);
    }
    let (mut k0, mut k1) = (seed as u32, (seed >> 32) as u32);
    for round in 0..10 {
        if round > 0 {
            k0 = k0.wrapping_add(W0);
            k1 = k1.wrapping_add(W1);
        }
        for b in 0..BLOCKS {
            let p0 = u64::from(M0) * u64::from(c0[b]);
            let p1 = u64::from(M1) * u64::from(c2[b]);
            let (hi0, lo0) = ((p0 >> 32) as u32, p0 as u32);
            let (hi1, lo1) = ((p1 >> 32) as u32, p1 as u32);
            (c0[b], c1[b], c2[b], c3[b]) = (hi1 ^ c1[b] ^ k0, lo1, hi0 ^ c3[b] ^ k1, lo0);
        }
    }
    [c0, c1, c2, c3]
}

/// Values `low + (high - low) * u` of the uniform draw for blocks
/// `counter..counter + BLOCKS`, in element order (bitwise `rng`'s).
pub(crate) fn uniform(seed: u64, counter: u64, low: f32, high: f32) -> [f32; VALUES] {
    simd(
        #[inline(always)]
        || {
            let words = philox(seed, counter);
            let mut out = [0f32; VALUES];
            for b in 0..BLOCKS {
                for (w, lane) in words.iter().enumerate() {
                    out[4 * b + w] = low + (high - low) * rng::unit_uniform(lane[b]);
                }
            }
            out
        },
    )
}

/// Values `mean + std * z` of the normal draw for blocks
/// `counter..counter + BLOCKS`, in element order: lanes (0, 1) and (2, 3) of
/// each block are a Box–Muller pair, as in `rng::normal_at`.
pub(crate) fn normal(seed: u64, counter: u64, mean: f32, std: f32) -> [f32; VALUES] {
    simd(
        #[inline(always)]
        || {
            let words = philox(seed, counter);
            // z[w][b]: lane w of block b; lanes (2p, 2p + 1) are pair p.
            let mut z = [[0f32; BLOCKS]; 4];
            for pair in 0..2 {
                let (a, b) = (&words[2 * pair], &words[2 * pair + 1]);
                let (cos, sin) = z.split_at_mut(2 * pair + 1);
                for i in 0..BLOCKS {
                    (cos[2 * pair][i], sin[0][i]) = box_muller(a[i], b[i]);
                }
            }
            let mut out = [0f32; VALUES];
            for b in 0..BLOCKS {
                for (w, lane) in z.iter().enumerate() {
                    out[4 * b + w] = mean + std * lane[b];
                }
            }
            out
        },
    )
}

/// `rng::box_muller` with polynomial `ln`, `sin` and `cos`: `u1 = (w0 >> 8) + 1`
/// and `u2 = w1 >> 8` over 2^24, `(r cos θ, r sin θ)` with `r = sqrt(-2 ln u1)`
/// and `θ = 2π u2`.
#[inline(always)]
fn box_muller(w0: u32, w1: u32) -> (f32, f32) {
    // As i32: the value fits, and a signed conversion vectorises everywhere.
    let u1 = ((w0 >> 8) + 1) as i32 as f32 * (1.0 / 16_777_216.0);
    let r = (-2.0 * ln_unit(u1)).sqrt();
    let (s, c) = sin_cos_turn(w1 >> 8);
    (r * c, r * s)
}

/// `ln(x)` for `x` in `(0, 1]` (a normal float), Cephes' `logf`: `x = m 2^e`
/// with `m` in `[sqrt(1/2), sqrt(2))`, a polynomial in `m - 1`.
#[inline(always)]
fn ln_unit(x: f32) -> f32 {
    const SQRT_HALF: f32 = std::f32::consts::FRAC_1_SQRT_2;
    let bits = x.to_bits();
    let e = ((bits >> 23) as i32 - 126) as f32;
    let m = f32::from_bits((bits & 0x007f_ffff) | 0x3f00_0000); // [0.5, 1)
    let small = m < SQRT_HALF;
    let e = if small { e - 1.0 } else { e };
    let m = if small { m + m - 1.0 } else { m - 1.0 };
    let z = m * m;
    let mut p = 7.037_683_6e-2_f32;
    for c in [
        -1.151_461e-1,
        1.167_699_9e-1,
        -1.242_014_1e-1,
        1.424_932_3e-1,
        -1.666_805_8e-1,
        2.000_071_4e-1,
        -2.499_999_4e-1,
        3.333_333e-1,
    ] {
        p = p * m + c;
    }
    let y = p * m * z - 2.121_944_4e-4 * e - 0.5 * z;
    (m + y) + 0.693_359_4 * e
}

/// `(sin θ, cos θ)` of `θ = 2π k / 2^24` for a 24-bit `k`: the quadrant
/// `q = round(4 k / 2^24)` exactly, then Cephes' `sinf`/`cosf` polynomials on
/// `x = θ - q π/2` in `[-π/4, π/4]`.
#[inline(always)]
fn sin_cos_turn(k: u32) -> (f32, f32) {
    // 4 k / 2^24 = k / 2^22; q the nearest integer (0..=4), f = k / 2^22 - q exact.
    let q = (k + (1 << 21)) >> 22;
    let f = (k as i32 - (q << 22) as i32) as f32 * (1.0 / 4_194_304.0);
    let x = f * std::f32::consts::FRAC_PI_2;
    let z = x * x;
    let sin = ((-1.951_529_6e-4 * z + 8.332_161e-3) * z - 1.666_665_5e-1) * z * x + x;
    let cos = ((2.443_315_7e-5 * z - 1.388_731_6e-3) * z + 4.166_664_6e-2) * z * z - 0.5 * z + 1.0;
    // sin/cos of q π/2 + x: odd quadrants swap them; sin is negated in
    // quadrants 2 and 3, cos in 1 and 2 (sign flips, so it stays branch-free).
    let (s, c) = if q & 1 == 1 { (cos, sin) } else { (sin, cos) };
    let s = f32::from_bits(s.to_bits() ^ ((q & 2) << 30));
    let c = f32::from_bits(c.to_bits() ^ (((q + 1) & 2) << 30));
    (s, c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn philox_words_are_rngs() {
        for (seed, first) in [
            (0, 0),
            (42, 7),
            (u64::MAX, u64::MAX - 5),
            (1 << 40, 1 << 33),
        ] {
            let words = philox(seed, first);
            for b in 0..BLOCKS {
                let expected = rng::block(seed, first.wrapping_add(b as u64));
                let got = words.map(|lane| lane[b]);
                assert_eq!(got, expected, "seed {seed} block {first} + {b}");
            }
        }
    }

    #[test]
    fn uniform_is_rngs_bitwise() {
        let u = uniform(9, 100, -1.0, 3.0);
        for (i, &v) in u.iter().enumerate() {
            let expected = -1.0 + 4.0 * rng::unit_uniform(rng::word_at(9, 100, i));
            assert_eq!(v.to_bits(), expected.to_bits(), "element {i}");
        }
    }

    #[test]
    fn normal_is_within_the_cross_device_tolerance_of_rngs() {
        // The conformance suite's tolerance for normal draws: 1e-5 + 1e-5 |z|.
        let mut worst = 0f32;
        for batch in 0..20_000u64 {
            let counter = batch * BLOCKS as u64;
            let z = normal(3, counter, 0.0, 1.0);
            for (i, &v) in z.iter().enumerate() {
                let expected = rng::normal_at(3, counter, i);
                let err = (v - expected).abs();
                assert!(
                    err <= 1e-5 + 1e-5 * expected.abs(),
                    "{v} vs {expected} ({i})"
                );
                worst = worst.max(err);
            }
        }
        assert!(
            worst > 0.0,
            "the polynomials are not libm: some value differs"
        );
    }

    #[test]
    fn ln_and_sin_cos_at_the_edges() {
        assert_eq!(ln_unit(1.0), 0.0);
        // Around the split of the mantissa range at sqrt(1/2), and near 0 and 1.
        let half = std::f32::consts::FRAC_1_SQRT_2.to_bits();
        let split = [half - 1, half, half + 1].map(f32::from_bits);
        for x in [1.0 / 16_777_216.0, 0.5, 0.999_999_94]
            .into_iter()
            .chain(split)
        {
            assert!(
                (ln_unit(x) - x.ln()).abs() <= 2e-7 * x.ln().abs().max(1.0),
                "{x}"
            );
        }
        for k in [
            0u32,
            1,
            (1 << 21) - 1,
            1 << 21,
            1 << 22,
            3 << 22,
            (1 << 24) - 1,
        ] {
            let theta = std::f64::consts::TAU * f64::from(k) / 16_777_216.0;
            let (s, c) = sin_cos_turn(k);
            assert!((f64::from(s) - theta.sin()).abs() < 3e-7, "sin at {k}");
            assert!((f64::from(c) - theta.cos()).abs() < 3e-7, "cos at {k}");
        }
    }
}
