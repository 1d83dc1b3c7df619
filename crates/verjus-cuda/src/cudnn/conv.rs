//! The three directions of a convolution through one path, and its bias
//! gradient.
//!
//! Every direction takes the same steps: the shape's descriptors (made once),
//! the direction's algorithm (searched once, [`super::algo`]), the workspace
//! that algorithm needs, the algorithm's math type on the descriptor, then the
//! call. Only the raw search and run differ, and those are `raw::find` and
//! `raw::convolve`.

use super::algo::{self, Direction};
use super::desc::{conv_key, ConvDescs};
use super::{cached, raw, Cudnn, State};
use cudarc::driver::sys::CUdeviceptr;
use verjus_core::ops::Conv2dPlan;
use verjus_core::Result;

/// Bytes the algorithm search may use as workspace.
const SEARCH_WORKSPACE: usize = 256 << 20;

/// Device addresses of a convolution's three tensors `y = x * w`. A backward
/// direction computes the gradient of one of them from the others' and `dy`:
/// `BackwardData` reads `w` and `y` (dy) and writes `x` (dx); `BackwardFilter`
/// reads `x` and `y` (dy) and writes `w` (dw).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConvOperands {
    pub x: CUdeviceptr,
    pub w: CUdeviceptr,
    pub y: CUdeviceptr,
}

impl Cudnn {
    /// Computes `dir` of the convolution `p`, overwriting its output (bias is
    /// the caller's).
    pub fn convolve(
        &self,
        dir: Direction,
        p: &Conv2dPlan,
        tf32: bool,
        t: ConvOperands,
    ) -> Result<()> {
        let op = dir.op();
        let mut guard = self.lock();
        let State {
            handle,
            convs,
            algos,
            workspace,
            ..
        } = &mut *guard;
        let key = conv_key(p, tf32);
        let descs = cached(convs, key, || ConvDescs::new(&self.gpu, op, p, tf32))?;
        let fail = self.failed(op);
        let choice = match algos.get(dir, &key) {
            Some(c) => c,
            None => {
                let search = workspace.get(op, SEARCH_WORKSPACE)?;
                let found = raw::find(handle, dir, descs, t, search).map_err(&fail)?;
                // The chosen algorithm's workspace is allocated when it runs.
                workspace.release();
                let c = algo::choose(&found, tf32).ok_or_else(|| {
                    self.gpu.error(
                        op,
                        "choosing a cuDNN algorithm",
                        "no algorithm works for this shape",
                    )
                })?;
                algos.insert(dir, key, c);
                c
            }
        };
        let ws = workspace.get(op, choice.bytes)?;
        descs.conv.set_math(choice.math).map_err(&fail)?;
        raw::convolve(handle, descs, choice.algo, t, ws).map_err(&fail)
    }
}
