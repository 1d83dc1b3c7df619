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
}
