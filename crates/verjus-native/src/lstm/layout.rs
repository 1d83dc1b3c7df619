//! The order of the gate columns in the reserve and the gate gradients.
//!
//! PyTorch orders the `4H` gate columns gate by gate (`[i | f | g | o]`, `H`
//! each). To run one step on several threads, each owning a range of hidden
//! units for all four gates, a thread's columns must be contiguous: then its
//! share of the recurrent GEMM writes one column block of the step's gates and
//! its gate loop reads nothing another thread writes. So the units are cut into
//! blocks of [`BLOCK`] and the columns ordered block by block, each block
//! holding its units' four gates (`[i | f | g | o]` of `BLOCK` units); a thread
//! owns whole blocks. The fused kernel (`fused`) needs the same order for
//! another reason: one block's four gates are one 64-column register tile, so
//! its gate loop finds `i, f, g, o` of each unit in the tile it has just
//! computed. The weights are copied into this order once per call, and
//! the weight and bias gradients copied back. Small problems (a cell step) keep
//! PyTorch's order, which needs no copies: one block of all `H` units.
//!
//! The choice depends on the plan alone, so a forward and its backward agree.

use crate::transpose::transpose;
use std::ops::Range;
use verjus_core::ops::LstmPlan;

/// Units in a block of the blocked order where no fused kernel runs (the
/// fused kernel's blocks are one of its vectors, see `super::plan_layout`).
pub(super) const BLOCK: usize = 16;

/// Below this many multiply-adds a step's recurrent GEMM runs on one thread.
const STEP_WORK: usize = 1 << 20;

/// Frames (`T * B`) from which copying the weights into the blocked order pays.
const MIN_FRAMES: usize = 64;

/// The gate column order of one LSTM.
#[derive(Clone, Copy, Debug)]
pub(super) struct Layout {
    hidden: usize,
    block: usize,
}

impl Layout {
    /// Blocked (blocks of `block` units) when the steps are worth splitting
    /// across threads, PyTorch's order otherwise.
    pub(super) fn for_plan(plan: &LstmPlan, block: usize) -> Self {
        let h = plan.hidden;
        let step_work = plan.batch * 4 * h * h;
        let blocked =
            h >= 2 * block && step_work >= STEP_WORK && plan.steps * plan.batch >= MIN_FRAMES;
        Layout {
            hidden: h,
            block: if blocked { block } else { h.max(1) },
        }
    }

    /// Whether the columns differ from PyTorch's order.
    pub(super) fn blocked(&self) -> bool {
        self.block < self.hidden
    }

    /// The number of blocks.
    fn blocks(&self) -> usize {
        self.hidden.div_ceil(self.block)
    }

    /// How many threads can share a step: one per block at most.
    pub(super) fn parts(&self, threads: usize) -> usize {
        threads.clamp(1, self.blocks())
    }

    /// The units of part `p` of `parts`: whole blocks, as even as they come.
    /// Its gate columns are `4 * units.start .. 4 * units.end`.
    pub(super) fn part_units(&self, p: usize, parts: usize) -> Range<usize> {
        let nb = self.blocks();
        let unit = |b: usize| (b * self.block).min(self.hidden);
        unit(p * nb / parts)..unit((p + 1) * nb / parts)
    }

    /// The blocks within `units` (which start at a block), as unit ranges
    /// relative to `units.start`.
    pub(super) fn blocks_in(&self, units: Range<usize>) -> impl Iterator<Item = Range<usize>> {
        let (start, block, hidden) = (units.start, self.block, self.hidden);
        units
            .step_by(block)
            .map(move |u| u - start..(u + block).min(hidden) - start)
    }

    /// The column of gate `q` (0..4, PyTorch's order) of unit `u`.
    #[cfg(test)]
    fn column(&self, q: usize, u: usize) -> usize {
        let base = u / self.block * self.block;
        let width = self.block.min(self.hidden - base);
        4 * base + q * width + (u - base)
    }

    /// Every gate row (PyTorch's index into `4H`) with its column in this order.
    fn order(&self) -> impl Iterator<Item = (usize, usize)> {
        let (h, block) = (self.hidden, self.block);
        (0..h).step_by(block).flat_map(move |base| {
            let w = block.min(h - base);
            (0..4).flat_map(move |q| (0..w).map(move |u| (q * h + base + u, 4 * base + q * w + u)))
        })
    }

    /// `dst = a + b` (`4H` each, PyTorch's order) in this order.
    pub(super) fn sum_to(&self, a: &[f32], b: &[f32], dst: &mut [f32]) {
        if !self.blocked() {
            for ((d, &a), &b) in dst.iter_mut().zip(a).zip(b) {
                *d = a + b;
            }
            return;
        }
        for (r, c) in self.order() {
            dst[c] = a[r] + b[r];
        }
    }

    /// Copies the `4H` rows of `len` elements of `src` (PyTorch's order)
    /// into `dst` in this order.
    pub(super) fn rows_to(&self, src: &[f32], len: usize, dst: &mut [f32]) {
        for (r, c) in self.order() {
            dst[c * len..(c + 1) * len].copy_from_slice(&src[r * len..(r + 1) * len]);
        }
    }

    /// The inverse of [`Layout::rows_to`]: `dst` in PyTorch's order.
    pub(super) fn rows_from(&self, src: &[f32], len: usize, dst: &mut [f32]) {
        for (r, c) in self.order() {
            dst[r * len..(r + 1) * len].copy_from_slice(&src[c * len..(c + 1) * len]);
        }
    }

    /// Writes `w [4H, len]` (PyTorch's order) as one panel per block, block
    /// after block from `4 len` floats per unit of the block's start: its
    /// `4 width` gate rows transposed, `[len, 4 width]`. The right-hand side
    /// of the fused kernel's forward tile, whose rows then lie in consecutive
    /// cache lines: rows of the whole transpose lie `16 H` bytes apart (a
    /// power of two at the usual sizes), and a tile's rows fell into a few of
    /// the L1 cache's sets. `rows` (`4H x len`) receives `w`'s rows in this
    /// order on the way.
    pub(super) fn panels_to(&self, w: &[f32], len: usize, rows: &mut [f32], dst: &mut [f32]) {
        self.rows_to(w, len, rows);
        for units in self.blocks_in(0..self.hidden) {
            let (at, width) = (4 * units.start * len, 4 * units.len());
            transpose(&rows[at..], len, &mut dst[at..], width, len, width);
        }
    }

    /// Copies the `4H` rows of `len` elements of `src` (PyTorch's order)
    /// into `dst` in this order, cut into column panels of `width` (the last
    /// narrower): panel `j` (columns `j width..`) is `[4H, width]`, from
    /// `4H j width`. The right-hand side of the fused kernel's backward tile,
    /// its rows in consecutive cache lines (as [`Layout::panels_to`]).
    pub(super) fn column_panels_to(&self, src: &[f32], len: usize, width: usize, dst: &mut [f32]) {
        let g = 4 * self.hidden;
        for (r, c) in self.order() {
            for j0 in (0..len).step_by(width) {
                let w = width.min(len - j0);
                let at = g * j0 + c * w;
                dst[at..at + w].copy_from_slice(&src[r * len + j0..][..w]);
            }
        }
    }

    /// Writes `w [4H, len]` (PyTorch's order) transposed into `dst [len, 4H]`,
    /// its columns in this order: the right-hand side of a step's GEMM.
    /// `rows` (`4H x len`) receives `w`'s rows in this order on the way.
    pub(super) fn transposed_to(&self, w: &[f32], len: usize, rows: &mut [f32], dst: &mut [f32]) {
        let g = 4 * self.hidden;
        self.rows_to(w, len, rows);
        transpose(rows, len, dst, g, len, g);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(steps: usize, batch: usize, hidden: usize) -> LstmPlan {
        LstmPlan {
            steps,
            batch,
            input: 3,
            hidden,
            has_lengths: false,
            has_h0: false,
            has_c0: false,
            has_bias: true,
        }
    }

    #[test]
    fn columns_are_a_permutation_with_parts_contiguous() {
        let layout = Layout::for_plan(&plan(28, 128, 72), BLOCK);
        assert!(layout.blocked());
        let mut seen = vec![false; 4 * 72];
        for q in 0..4 {
            for u in 0..72 {
                let c = layout.column(q, u);
                assert!(!seen[c], "column {c} twice");
                seen[c] = true;
            }
        }
        let parts = layout.parts(3);
        assert_eq!(parts, 3);
        for p in 0..parts {
            let units = layout.part_units(p, parts);
            for q in 0..4 {
                for u in units.clone() {
                    assert!((4 * units.start..4 * units.end).contains(&layout.column(q, u)));
                }
            }
        }
        assert_eq!(layout.part_units(parts - 1, parts).end, 72);
    }

    #[test]
    fn rows_round_trip_and_small_problems_keep_pytorch_order() {
        let layout = Layout::for_plan(&plan(10, 200, 40), BLOCK);
        let src: Vec<f32> = (0..160 * 2).map(|v| v as f32).collect();
        let mut blocked = vec![0.0; src.len()];
        layout.rows_to(&src, 2, &mut blocked);
        assert_ne!(blocked, src);
        let mut back = vec![0.0; src.len()];
        layout.rows_from(&blocked, 2, &mut back);
        assert_eq!(back, src);
        let mut sum = vec![0.0; 160];
        layout.sum_to(&src[..160], &src[160..], &mut sum);
        assert_eq!(
            sum[layout.column(3, 33)],
            src[3 * 40 + 33] + src[160 + 3 * 40 + 33]
        );
        let mut panels = vec![0.0; src.len()];
        layout.panels_to(&src, 2, &mut blocked, &mut panels);
        // Unit 33 is in the block of units 32..40 (4 x 8 columns from 128):
        // gate 3, element 1 of its row at row 1, column 3 * 8 + 1 of the panel.
        assert_eq!(
            panels[4 * 32 * 2 + 32 + 3 * 8 + 1],
            src[(3 * 40 + 33) * 2 + 1]
        );
        layout.column_panels_to(&src, 2, 1, &mut panels);
        assert_eq!(
            panels[160 + layout.column(3, 33)],
            src[(3 * 40 + 33) * 2 + 1]
        );
        let cell = Layout::for_plan(&plan(1, 1, 256), BLOCK);
        assert!(!cell.blocked());
        assert_eq!(cell.column(2, 5), 2 * 256 + 5);
    }
}
