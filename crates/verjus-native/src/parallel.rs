//! When and how to split a loop over rayon's pool.
//!
//! Handing work to the pool costs a few microseconds, which is more than a small
//! op takes in total, so every loop asks [`rows_per_task`] first: below
//! [`SEQUENTIAL_WORK`] element-operations it runs on the calling thread, above it
//! splits into a few tasks per thread (for load balance), each big enough to
//! amortise its dispatch. Splits are always along whole rows of the output, so a
//! task owns a disjoint output range and results never depend on the split.

use rayon::prelude::*;

/// Below this much work (element-operations) a loop runs on the calling thread.
pub(crate) const SEQUENTIAL_WORK: usize = 32 * 1024;

/// Tasks per thread when a loop is split (more balances better, fewer dispatch less).
const TASKS_PER_THREAD: usize = 4;

/// Rows per task for `rows` rows costing `row_cost` each, or `None` when the
/// loop should run sequentially.
pub(crate) fn rows_per_task(rows: usize, row_cost: usize) -> Option<usize> {
    let work = rows.saturating_mul(row_cost.max(1));
    let threads = rayon::current_num_threads();
    if work < SEQUENTIAL_WORK || rows < 2 || threads < 2 {
        return None;
    }
    let tasks = (threads * TASKS_PER_THREAD)
        .min(work / (SEQUENTIAL_WORK / 2))
        .clamp(2, rows);
    Some(rows.div_ceil(tasks))
}

/// Calls `f(first_row, rows)` on `out` cut into whole rows of `row_len`
/// elements, in parallel when the work (`row_cost` per row) is worth it.
/// Element-wise loops pass `row_len = 1`.
pub(crate) fn for_rows<T: Send>(
    out: &mut [T],
    row_len: usize,
    row_cost: usize,
    f: impl Fn(usize, &mut [T]) + Sync + Send,
) {
    if row_len == 0 || out.is_empty() {
        return;
    }
    match rows_per_task(out.len() / row_len, row_cost) {
        None => f(0, out),
        Some(per) => out
            .par_chunks_mut(per * row_len)
            .enumerate()
            .for_each(|(i, rows)| f(i * per, rows)),
    }
}

/// [`for_rows`] over two outputs with the same number of rows (of `a_len` and
/// `b_len` elements): `f(first_row, a_rows, b_rows)`.
pub(crate) fn for_rows2<T: Send, U: Send>(
    a: &mut [T],
    a_len: usize,
    b: &mut [U],
    b_len: usize,
    row_cost: usize,
    f: impl Fn(usize, &mut [T], &mut [U]) + Sync + Send,
) {
    if a_len == 0 || b_len == 0 || a.is_empty() {
        return;
    }
    match rows_per_task(a.len() / a_len, row_cost) {
        None => f(0, a, b),
        Some(per) => a
            .par_chunks_mut(per * a_len)
            .zip(b.par_chunks_mut(per * b_len))
            .enumerate()
            .for_each(|(i, (ra, rb))| f(i * per, ra, rb)),
    }
}

/// Rows per block of [`sum_row_blocks`], at least (more for tall inputs,
/// so that there are at most [`MAX_BLOCKS`] partial sums).
const BLOCK_ROWS: usize = 64;
const MAX_BLOCKS: usize = 128;

/// `width` sums over `rows` rows: `f(rows, partial)` adds a block of rows
/// into a zeroed `partial`, blocks run in parallel when the work is worth it,
/// and the partials are added in block order. The blocks depend on `rows`
/// alone, so the result does not depend on the thread count (the column sums
/// of a gradient: a bias's, a filter's, a layer norm's scale).
pub(crate) fn sum_row_blocks(
    rows: usize,
    width: usize,
    f: impl Fn(std::ops::Range<usize>, &mut [f32]) + Sync + Send,
) -> Vec<f32> {
    let mut sums = vec![0.0f32; width];
    if width == 0 || rows == 0 {
        return sums;
    }
    let block = BLOCK_ROWS.max(rows.div_ceil(MAX_BLOCKS));
    let blocks = rows.div_ceil(block);
    let mut partial = vec![0.0f32; blocks * width];
    let run = |(b, out): (usize, &mut [f32])| f(b * block..((b + 1) * block).min(rows), out);
    if blocks > 1 && rows.saturating_mul(width) >= SEQUENTIAL_WORK {
        partial.par_chunks_mut(width).enumerate().for_each(run);
    } else {
        partial.chunks_mut(width).enumerate().for_each(run);
    }
    for p in partial.chunks_exact(width) {
        sums.iter_mut().zip(p).for_each(|(s, &v)| *s += v);
    }
    sums
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_loops_stay_sequential() {
        assert_eq!(rows_per_task(100, 10), None);
        assert_eq!(rows_per_task(1, 1 << 30), None);
    }

    #[test]
    fn rows_cover_the_output_exactly_once() {
        let mut out = vec![0usize; 3 * 50_000];
        for_rows(&mut out, 3, 3, |first, rows| {
            for (r, row) in rows.chunks_mut(3).enumerate() {
                row.iter_mut().for_each(|v| *v += first + r);
            }
        });
        assert!(out.chunks(3).enumerate().all(|(r, row)| row == [r, r, r]));
    }

    #[test]
    fn row_blocks_sum_every_row_once() {
        // Column j of row r holds r % 7 + j: the sums stay exact in f32.
        for (rows, width) in [(0, 3), (5, 0), (7, 3), (20_000, 4)] {
            let sums = sum_row_blocks(rows, width, |block, out| {
                for r in block {
                    out.iter_mut()
                        .enumerate()
                        .for_each(|(j, s)| *s += (r % 7 + j) as f32);
                }
            });
            let want: Vec<f32> = (0..width)
                .map(|j| (0..rows).map(|r| (r % 7 + j) as f64).sum::<f64>() as f32)
                .collect();
            assert_eq!(sums, want, "{rows} rows of {width}");
        }
    }
}
