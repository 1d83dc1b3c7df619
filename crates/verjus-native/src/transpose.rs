//! 2-D transposes of 4-byte elements in 8x8 blocks with AVX shuffles.
//!
//! The permute kernel's general strided copy moves one element at a time; for a
//! plain transpose of f32 (a weight copied transposed before a GEMM that cannot
//! read it in place, every training step: see `gemm.rs`) that cost about 2 ns
//! per element. Eight rows loaded as vectors and transposed in registers move
//! 64 elements with 8 loads, 24 shuffles and 8 stores. Shuffles move bits
//! without arithmetic, so the copy is exact for any 4-byte `Copy` type.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Writes `dst[i * dst_stride + j] = src[j * src_stride + i]` for the `rows x
/// cols` output block, in 8x8 blocks where the CPU has AVX (the edges and other
/// CPUs element by element). `T` must be 4 bytes wide for the vector path.
///
/// Panics if `src` or `dst` is too short for the block.
pub(crate) fn transpose<T: Copy>(
    src: &[T],
    src_stride: usize,
    dst: &mut [T],
    dst_stride: usize,
    rows: usize,
    cols: usize,
) {
    if rows == 0 || cols == 0 {
        return;
    }
    assert!(src.len() > (cols - 1) * src_stride + rows - 1);
    assert!(dst.len() > (rows - 1) * dst_stride + cols - 1);
    let (full_r, full_c) = (rows / 8 * 8, cols / 8 * 8);
    #[cfg(target_arch = "x86_64")]
    if size_of::<T>() == 4 && full_r > 0 && full_c > 0 && is_x86_feature_detected!("avx") {
        for r in (0..full_r).step_by(8) {
            for c in (0..full_c).step_by(8) {
                // SAFETY: the asserts above bound the block's last source
                // element (r + 7, c + 7) and destination element; `T` is 4
                // bytes, moved as f32 bits by shuffles only; AVX is present.
                unsafe {
                    block8(
                        src.as_ptr().add(c * src_stride + r).cast(),
                        src_stride,
                        dst.as_mut_ptr().add(r * dst_stride + c).cast(),
                        dst_stride,
                    )
                }
            }
        }
        scalar(src, src_stride, dst, dst_stride, 0..full_r, full_c..cols);
        scalar(src, src_stride, dst, dst_stride, full_r..rows, 0..cols);
        return;
    }
    scalar(src, src_stride, dst, dst_stride, 0..rows, 0..cols);
}

/// The transpose of the given output rows and columns, one element at a time.
fn scalar<T: Copy>(
    src: &[T],
    src_stride: usize,
    dst: &mut [T],
    dst_stride: usize,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
) {
    for i in rows {
        let out = &mut dst[i * dst_stride..];
        for j in cols.clone() {
            out[j] = src[j * src_stride + i];
        }
    }
}

/// One 8x8 block: `dst[i][j] = src[j][i]`.
///
/// # Safety
/// Eight rows of eight f32 at `src` (stride `src_stride`) must be readable and
/// at `dst` (stride `dst_stride`) writable; the CPU must have AVX.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn block8(src: *const f32, src_stride: usize, dst: *mut f32, dst_stride: usize) {
    // SAFETY: the caller guarantees the eight source and destination rows.
    unsafe {
        let row = |k: usize| _mm256_loadu_ps(src.add(k * src_stride));
        let (r0, r1, r2, r3) = (row(0), row(1), row(2), row(3));
        let (r4, r5, r6, r7) = (row(4), row(5), row(6), row(7));
        let t0 = _mm256_unpacklo_ps(r0, r1);
        let t1 = _mm256_unpackhi_ps(r0, r1);
        let t2 = _mm256_unpacklo_ps(r2, r3);
        let t3 = _mm256_unpackhi_ps(r2, r3);
        let t4 = _mm256_unpacklo_ps(r4, r5);
        let t5 = _mm256_unpackhi_ps(r4, r5);
        let t6 = _mm256_unpacklo_ps(r6, r7);
        let t7 = _mm256_unpackhi_ps(r6, r7);
        let s0 = _mm256_shuffle_ps::<0x44>(t0, t2);
        let s1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
        let s2 = _mm256_shuffle_ps::<0x44>(t1, t3);
        let s3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
        let s4 = _mm256_shuffle_ps::<0x44>(t4, t6);
        let s5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
        let s6 = _mm256_shuffle_ps::<0x44>(t5, t7);
        let s7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
        let out = [
            _mm256_permute2f128_ps::<0x20>(s0, s4),
            _mm256_permute2f128_ps::<0x20>(s1, s5),
            _mm256_permute2f128_ps::<0x20>(s2, s6),
            _mm256_permute2f128_ps::<0x20>(s3, s7),
            _mm256_permute2f128_ps::<0x31>(s0, s4),
            _mm256_permute2f128_ps::<0x31>(s1, s5),
            _mm256_permute2f128_ps::<0x31>(s2, s6),
            _mm256_permute2f128_ps::<0x31>(s3, s7),
        ];
        for (k, v) in out.into_iter().enumerate() {
            _mm256_storeu_ps(dst.add(k * dst_stride), v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::transpose;

    #[test]
    fn every_block_and_edge_matches_the_definition() {
        for (rows, cols) in [(1, 1), (8, 8), (16, 24), (13, 21), (7, 9), (40, 3)] {
            let src_stride = rows + 3; // the source is wider than the block
            let dst_stride = cols + 2;
            let src: Vec<u32> = (0..cols * src_stride).map(|v| v as u32).collect();
            let mut dst = vec![u32::MAX; rows * dst_stride];
            transpose(&src, src_stride, &mut dst, dst_stride, rows, cols);
            for i in 0..rows {
                for j in 0..dst_stride {
                    let want = if j < cols {
                        src[j * src_stride + i]
                    } else {
                        u32::MAX
                    };
                    assert_eq!(dst[i * dst_stride + j], want, "{rows}x{cols} at ({i}, {j})");
                }
            }
        }
    }
}
