//! Average pooling through cuDNN (padding counts in the divisor), with the
//! descriptors of each shape made once.

use super::desc::{pool_key, PoolDescs};
use super::{cached, raw, Cudnn, State};
use cudarc::driver::sys::CUdeviceptr;
use verjus_core::ops::Pool2dPlan;
use verjus_core::Result;

impl Cudnn {
    /// `y = avg_pool(x)`.
    pub fn avg_pool(&self, p: &Pool2dPlan, x: CUdeviceptr, y: CUdeviceptr) -> Result<()> {
        let op = "avg_pool2d";
        let mut guard = self.lock();
        let State { handle, pools, .. } = &mut *guard;
        let d = cached(pools, pool_key(p), || PoolDescs::new(&self.gpu, op, p))?;
        raw::pool_forward(handle, &d.pool, (&d.x, x), (&d.y, y)).map_err(self.failed(op))
    }

    /// `dx` of average pooling from the forward's `x`, `y` and `dy`.
    pub fn avg_pool_backward(
        &self,
        p: &Pool2dPlan,
        x: CUdeviceptr,
        y: CUdeviceptr,
        dy: CUdeviceptr,
        dx: CUdeviceptr,
    ) -> Result<()> {
        let op = "avg_pool2d_backward";
        let mut guard = self.lock();
        let State { handle, pools, .. } = &mut *guard;
        let d = cached(pools, pool_key(p), || PoolDescs::new(&self.gpu, op, p))?;
        raw::pool_backward(handle, &d.pool, (&d.x, x, dx), (&d.y, y, dy)).map_err(self.failed(op))
    }
}
