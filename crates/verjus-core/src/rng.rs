//! The counter-based random number generator every backend shares: Philox-4x32-10.
//!
//! A counter-based generator turns `(seed, counter)` into random bits with no
//! state, so element `i` of a random tensor depends only on the seed, the offset
//! and `i`. That lets the CUDA backend draw, in parallel, exactly the dropout mask
//! the CPU draws, and lets dropout's backward pass regenerate the mask instead of
//! storing it.
//!
//! Element `i` of a draw at `(seed, offset)` uses the Philox block with counter
//! `offset + i / 4` (low and high word, upper two words zero), key `seed` (low and
//! high word), and takes lane `i % 4`. Normal draws pair lanes (0, 1) and (2, 3)
//! with the Box–Muller transform. A caller that draws `n` elements and wants an
//! independent next draw advances its offset by [`blocks_for`]`(n)`.

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

/// One Philox-4x32 block: ten rounds over `counter` with `key`.
#[inline]
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let mut c = counter;
    let mut k = key;
    for round in 0..10 {
        if round > 0 {
            k[0] = k[0].wrapping_add(W0);
            k[1] = k[1].wrapping_add(W1);
        }
        let p0 = u64::from(M0) * u64::from(c[0]);
        let p1 = u64::from(M1) * u64::from(c[2]);
        let (hi0, lo0) = ((p0 >> 32) as u32, p0 as u32);
        let (hi1, lo1) = ((p1 >> 32) as u32, p1 as u32);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
    }
    c
}

/// The four random words of block `block` under `seed`.
#[inline]
pub fn block(seed: u64, block: u64) -> [u32; 4] {
    philox4x32_10(
        [block as u32, (block >> 32) as u32, 0, 0],
        [seed as u32, (seed >> 32) as u32],
    )
}

/// How many blocks a draw of `n` elements consumes.
pub fn blocks_for(n: usize) -> u64 {
    (n as u64).div_ceil(4)
}

/// The random word for element `index` of the draw at `(seed, offset)`.
#[inline]
pub fn word_at(seed: u64, offset: u64, index: usize) -> u32 {
    block(seed, offset.wrapping_add((index / 4) as u64))[index % 4]
}

/// A word as a uniform float in `[0, 1)` with 24 bits of precision.
#[inline]
pub fn unit_uniform(word: u32) -> f32 {
    (word >> 8) as f32 * (1.0 / 16_777_216.0)
}

/// The dropout keep test: the element is kept when its 24-bit draw is at least
/// `threshold = dropout_threshold(p)`. Integer-exact, so every device agrees.
#[inline]
pub fn keeps(word: u32, threshold: u32) -> bool {
    (word >> 8) >= threshold
}

/// The 24-bit threshold below which an element is dropped with probability `p`.
pub fn dropout_threshold(p: f32) -> u32 {
    ((f64::from(p) * 16_777_216.0).ceil() as u32).min(1 << 24)
}

/// Two standard normal samples from two words (Box–Muller).
#[inline]
pub fn box_muller(w0: u32, w1: u32) -> (f32, f32) {
    // u1 in (0, 1] so that ln(u1) is finite.
    let u1 = ((w0 >> 8) + 1) as f32 * (1.0 / 16_777_216.0);
    let u2 = unit_uniform(w1);
    let r = (-2.0 * u1.ln()).sqrt();
    let theta = std::f32::consts::TAU * u2;
    (r * theta.cos(), r * theta.sin())
}

/// Standard normal sample for element `index` of the draw at `(seed, offset)`.
#[inline]
pub fn normal_at(seed: u64, offset: u64, index: usize) -> f32 {
    let b = block(seed, offset.wrapping_add((index / 4) as u64));
    let lane = index % 4;
    let (z0, z1) = box_muller(b[lane & !1], b[lane | 1]);
    if lane.is_multiple_of(2) {
        z0
    } else {
        z1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known-answer vectors published with Random123 (kat_vectors, philox4x32 10 rounds).
    #[test]
    fn philox_known_answers() {
        assert_eq!(
            philox4x32_10([0, 0, 0, 0], [0, 0]),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
        assert_eq!(
            philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
        assert_eq!(
            philox4x32_10(
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0]
            ),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    #[test]
    fn uniform_and_normal_moments() {
        let n = 200_000;
        let u: Vec<f32> = (0..n).map(|i| unit_uniform(word_at(7, 3, i))).collect();
        let mean = u.iter().sum::<f32>() / n as f32;
        assert!((mean - 0.5).abs() < 0.01, "{mean}");
        assert!(u.iter().all(|&x| (0.0..1.0).contains(&x)));
        let z: Vec<f32> = (0..n).map(|i| normal_at(7, 3, i)).collect();
        let m = z.iter().sum::<f32>() / n as f32;
        let var = z.iter().map(|x| (x - m) * (x - m)).sum::<f32>() / n as f32;
        assert!(m.abs() < 0.01 && (var - 1.0).abs() < 0.02, "{m} {var}");
    }

    #[test]
    fn dropout_threshold_edges() {
        assert_eq!(dropout_threshold(0.0), 0);
        assert_eq!(dropout_threshold(1.0), 1 << 24);
        assert!(keeps(u32::MAX, dropout_threshold(0.999)));
        assert!(!keeps(0, dropout_threshold(0.001)));
    }
}
