//! The fused LSTM: a sequence with per-sequence lengths, and one step.
//!
//! The reserve holds what the backward needs and nothing else: the gate
//! activations `[T, B, 4H]` (columns in the order of [`layout`]) and the cell
//! states `[T, B, H]`; `h_{t-1}` is read back from the outputs `y` (a finished
//! sequence's output rows are 0, and its gate rows are never used).
//!
//! A step's recurrent product and gate loop run as one:
//! - on AVX-512 or AVX2 with FMA ([`fused`]): a register tile of the product
//!   finished by the gate loop, the threads sharing a sequence as the
//!   instruction set's [`Split`] says (each its own rows of the batch with
//!   AVX-512, its own blocks of units with AVX2);
//! - elsewhere: each step cut into blocks of units, the product through the
//!   `gemm` crate and then the gate loop ([`gates`]).
//!
//! A split by units meets at a barrier per step ([`team`]).
//!
//! A cell step and small problems keep PyTorch's gate order and run on the
//! calling thread (see [`layout`]).

mod backward;
mod forward;
#[cfg(target_arch = "x86_64")]
mod fused;
mod gates;
#[cfg(target_arch = "x86_64")]
mod isa;
mod layout;
mod team;
#[cfg(target_arch = "x86_64")]
mod tile;
#[cfg(target_arch = "x86_64")]
mod vmath;

pub(crate) use backward::backward;
pub(crate) use forward::forward;

use crate::scratch::Scratch;
use verjus_core::ops::{check_lengths, LstmArgs, LstmPlan};
use verjus_core::{Error, Result, Tensor};

/// f32 elements of the reserve: activations `[T, B, 4H]`, then cells `[T, B, H]`.
pub(crate) fn reserve_len(plan: &LstmPlan) -> usize {
    plan.steps * plan.batch * 5 * plan.hidden
}

/// The operands as host slices.
struct Operands<'a> {
    x: &'a [f32],
    lengths: Option<&'a [i32]>,
    h0: Option<&'a [f32]>,
    c0: Option<&'a [f32]>,
    w_ih: &'a [f32],
    w_hh: &'a [f32],
    bias: Option<(&'a [f32], &'a [f32])>,
}

impl<'a> Operands<'a> {
    fn new(op: &str, plan: &LstmPlan, args: &LstmArgs<'a>) -> Result<Self> {
        let lengths = args.lengths.map(|l| l.as_slice::<i32>()).transpose()?;
        if let Some(l) = lengths {
            check_lengths(op, l, plan.steps)?;
        }
        let slice = |t: Option<&'a Tensor>| t.map(|t| t.as_slice::<f32>()).transpose();
        let bias = match (slice(args.b_ih)?, slice(args.b_hh)?) {
            (Some(bi), Some(bh)) => Some((bi, bh)),
            _ => None,
        };
        Ok(Operands {
            x: args.x.as_slice()?,
            lengths,
            h0: slice(args.h0)?,
            c0: slice(args.c0)?,
            w_ih: args.w_ih.as_slice()?,
            w_hh: args.w_hh.as_slice()?,
            bias,
        })
    }

    /// Whether sequence `b` still runs at frame `t`.
    #[inline(always)]
    fn active(&self, b: usize, t: usize) -> bool {
        self.lengths.is_none_or(|l| t < l[b] as usize)
    }

    /// Sequence `b`'s length (`steps` without lengths).
    fn length(&self, b: usize, steps: usize) -> usize {
        self.lengths.map_or(steps, |l| l[b] as usize)
    }
}

#[cfg(target_arch = "x86_64")]
use isa::Isa;

/// How the fused steps share a sequence's work among threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Split {
    /// Each thread runs every step of its own rows (`fused::run_parts`): no
    /// barrier per step, but each thread reads all the weights at every
    /// step. The kernel adds each frame's input projection to its tile, and
    /// each frame's share of the weight gradients and `dx` while its gate
    /// gradients are in cache; each thread sums its own weight gradients
    /// (merged afterwards).
    Rows,
    /// Each thread runs its own blocks of units of every row, one barrier a
    /// step ([`team`]): each reads only its columns of `W_hh`.
    /// The input projection, `dx` and the weight gradients are single GEMMs
    /// over all frames, as on the portable path, so the results do not
    /// depend on the number of threads.
    Units,
}

/// The instruction sets the fused kernel is written for: none off x86-64.
#[cfg(not(target_arch = "x86_64"))]
#[derive(Clone, Copy)]
enum Isa {}

#[cfg(not(target_arch = "x86_64"))]
impl Isa {
    fn lanes(self) -> usize {
        match self {}
    }

    fn split(self) -> Split {
        match self {}
    }

    fn panel_units(self) -> usize {
        match self {}
    }
}

/// The gate column order of `plan`'s LSTM on this CPU, and the instruction
/// set its steps run the fused kernel ([`fused`]) with, if they run it: a
/// blocked order with the blocks one vector of that set wide (a block's four
/// gates are then one row of the kernel's tile, whole cache lines of the
/// weights).
fn plan_layout(plan: &LstmPlan) -> (layout::Layout, Option<Isa>) {
    #[cfg(target_arch = "x86_64")]
    let isa = Isa::detect();
    #[cfg(not(target_arch = "x86_64"))]
    let isa: Option<Isa> = None;
    let block = isa.map_or(layout::BLOCK, Isa::lanes);
    let layout = layout::Layout::for_plan(plan, block);
    (layout, isa.filter(|_| layout.blocked()))
}

/// The calling thread's scratch buffer, at least `len` elements.
fn take_scratch(op: &str, len: usize) -> Result<Scratch> {
    Scratch::take(len).ok_or_else(|| Error::Device {
        device: "cpu".into(),
        msg: format!("{op}: cannot allocate {len} floats of scratch"),
    })
}

/// `dst = src`, or 0 without a source.
fn fill_or_copy(dst: &mut [f32], src: Option<&[f32]>) {
    match src {
        Some(s) => dst.copy_from_slice(&s[..dst.len()]),
        None => dst.fill(0.0),
    }
}
