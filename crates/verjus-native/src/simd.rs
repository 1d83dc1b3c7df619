//! Loops compiled again for the widest vector extension the CPU has.
//!
//! The crate is built for baseline x86-64 (SSE2), where the elementwise loops
//! vectorise only four wide, or not at all. [`simd`] runs a loop compiled again
//! for AVX-512 or AVX2 when the CPU has them (detected once, cached by std).
//! The results are bit-identical on every path: Rust never fuses multiply-adds,
//! and the lane-wise sums fix their order in the source.

/// Runs `f` compiled for the widest vector extension the CPU supports. `f`
/// must be an `#[inline(always)]` closure (and everything it calls inlined),
/// so that its body is compiled inside the target-feature function.
#[inline(always)]
pub(crate) fn simd<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vl") {
            // SAFETY: the CPU supports every feature `avx512` is compiled with.
            return unsafe { x86::avx512(f) };
        }
        if is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports every feature `avx2` is compiled with.
            return unsafe { x86::avx2(f) };
        }
    }
    f()
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    #[target_feature(enable = "avx512f,avx512vl,avx2")]
    pub(super) fn avx512<R>(f: impl FnOnce() -> R) -> R {
        f()
    }

    #[target_feature(enable = "avx2")]
    pub(super) fn avx2<R>(f: impl FnOnce() -> R) -> R {
        f()
    }
}

#[cfg(test)]
mod tests {
    use super::simd;
    use verjus_core::math::fast::{exp, gelu, gelu_derivative, ln, sigmoid, tanh};

    fn grid(lo: f32, hi: f32, n: usize) -> impl Iterator<Item = f32> {
        (0..=n).map(move |i| lo + (hi - lo) * i as f32 / n as f32)
    }

    #[test]
    fn simd_paths_are_bit_identical() {
        let xs: Vec<f32> = grid(-90.0, 90.0, 10_007).collect();
        let all = |xs: &[f32]| -> Vec<u32> {
            xs.iter()
                .flat_map(|&x| {
                    [
                        exp(x),
                        ln(x),
                        tanh(x),
                        sigmoid(x),
                        gelu(x),
                        gelu_derivative(x),
                    ]
                })
                .map(f32::to_bits)
                .collect()
        };
        let wide = simd(
            #[inline(always)]
            || all(&xs),
        );
        assert_eq!(wide, all(&xs));
    }
}
