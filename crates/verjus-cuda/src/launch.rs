//! Launch configurations.
//!
//! Kernels loop with a grid stride, so the grid only has to be large enough to
//! fill the GPU: a few waves of blocks per multiprocessor, never more blocks
//! than there is work for. Row-wise kernels (reductions, softmax, losses) give
//! each row to a warp, or to a whole block when rows are long.

/// Threads per block of every kernel.
pub(crate) const BLOCK: u32 = 256;
/// Blocks per multiprocessor that saturate it for grid-stride loops.
const WAVES: u64 = 32;
/// Rows at least this long get a block each rather than a warp.
const LONG_ROW: usize = 2048;

/// Blocks for `n` independent elements.
pub(crate) fn grid(n: usize, sm_count: u32) -> u32 {
    let want = (n as u64).div_ceil(u64::from(BLOCK));
    want.clamp(1, WAVES * u64::from(sm_count)) as u32
}

/// Whether rows of `len` elements are handled by a block (else by a warp).
pub(crate) fn block_per_row(len: usize) -> bool {
    len >= LONG_ROW
}

/// Blocks for `rows` rows of `len` elements (see [`block_per_row`]).
pub(crate) fn grid_rows(rows: usize, len: usize, sm_count: u32) -> u32 {
    let warps_per_block = u64::from(BLOCK / 32);
    let want = if block_per_row(len) {
        rows as u64
    } else {
        (rows as u64).div_ceil(warps_per_block)
    };
    want.clamp(1, WAVES * u64::from(sm_count)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_cover_and_cap() {
        assert_eq!(grid(1, 132), 1);
        assert_eq!(grid(256, 132), 1);
        assert_eq!(grid(257, 132), 2);
        assert_eq!(grid(1 << 34, 132), 32 * 132);
        assert_eq!(grid(0, 1), 1);
        // 8 warps per block: 100 short rows need 13 blocks.
        assert_eq!(grid_rows(100, 10, 132), 13);
        assert_eq!(grid_rows(100, 1 << 20, 132), 100);
        assert_eq!(grid_rows(1 << 30, 10, 2), 64);
        assert!(block_per_row(LONG_ROW) && !block_per_row(LONG_ROW - 1));
    }
}
