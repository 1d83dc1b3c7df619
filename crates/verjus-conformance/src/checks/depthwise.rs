//! Checks of the depthwise 1-D convolution and its backward against the
//! reference: channel counts that are not multiples of a SIMD width, one
//! tap, even filters with uneven padding, dilation, more padding than
//! frames, no output frames, empty batches. Tolerance: `Tolerance::GEMM`
//! (sums over the taps; the filter gradient sums over every row).

use crate::array::Array;
use crate::compare::{close, every_case, Failures, Tolerance};
use crate::inputs::uniform;
use crate::reference::depthwise::{self as reference, Window};
use crate::transfer::{get, put, zeros, Context};
use verjus_core::ops::{self, DepthwiseArgs, DepthwiseGrads};
use verjus_core::{Backend, DType, Tensor};

/// `(N, T, C, K, left, right, dilation, with bias)`.
pub(crate) type Case = (usize, usize, usize, usize, usize, usize, usize, bool);

pub(crate) const CASES: [Case; 9] = [
    (2, 7, 3, 3, 1, 1, 1, true),
    (3, 11, 17, 4, 1, 2, 1, false),
    (1, 9, 5, 3, 2, 2, 2, true),
    (2, 5, 33, 1, 0, 0, 1, true),
    (2, 3, 4, 5, 4, 4, 1, true),
    (1, 4, 6, 7, 0, 0, 1, true),
    (0, 6, 3, 3, 1, 1, 1, true),
    (2, 1, 2, 3, 1, 1, 1, false),
    (4, 42, 128, 15, 7, 7, 1, true),
];

/// The operands of one case, on the host.
pub(crate) struct Host {
    pub x: Array,
    pub filter: Array,
    pub bias: Option<Array>,
    pub window: Window,
}

impl Host {
    pub(crate) fn draw(seed: u64, (n, t, c, k, left, right, dilation, bias): Case) -> Host {
        Host {
            x: uniform(seed, &[n, t, c], -1.0, 1.0),
            filter: uniform(seed + 1, &[c, k], -1.0, 1.0),
            bias: bias.then(|| uniform(seed + 2, &[c], -1.0, 1.0)),
            window: Window {
                left,
                right,
                dilation,
            },
        }
    }

    pub(crate) fn describe(&self) -> String {
        let w = self.window;
        format!(
            "depthwise_conv1d x {:?} filter {:?} padding ({}, {}) dilation {}{}",
            self.x.dims,
            self.filter.dims,
            w.left,
            w.right,
            w.dilation,
            if self.bias.is_some() {
                " with bias"
            } else {
                ""
            }
        )
    }

    pub(crate) fn out_dims(&self) -> Vec<usize> {
        let (t, k) = (self.x.dims[1], self.filter.dims[1]);
        vec![self.x.dims[0], self.window.out_frames(t, k), self.x.dims[2]]
    }
}

/// The operands of one case, on the backend's device.
pub(crate) struct Device {
    x: Tensor,
    filter: Tensor,
    bias: Option<Tensor>,
    window: Window,
}

impl Device {
    pub(crate) fn put(be: &dyn Backend, what: &str, h: &Host) -> Result<Device, String> {
        Ok(Device {
            x: put(be, what, &h.x)?,
            filter: put(be, what, &h.filter)?,
            bias: h.bias.as_ref().map(|b| put(be, what, b)).transpose()?,
            window: h.window,
        })
    }

    fn args(&self) -> DepthwiseArgs<'_> {
        DepthwiseArgs {
            x: &self.x,
            filter: &self.filter,
            bias: self.bias.as_ref(),
            padding: [self.window.left, self.window.right],
            dilation: self.window.dilation,
        }
    }

    pub(crate) fn forward(
        &self,
        be: &dyn Backend,
        what: &str,
        out: &[usize],
    ) -> Result<Tensor, String> {
        let mut y = zeros(be, what, out, DType::F32)?;
        ops::depthwise_conv1d(be, &self.args(), &mut y).context(what)?;
        Ok(y)
    }

    /// `(dx, dfilter, dbias)`, the last where the case has a bias.
    pub(crate) fn backward(
        &self,
        be: &dyn Backend,
        what: &str,
        dy: &Tensor,
    ) -> Result<(Tensor, Tensor, Option<Tensor>), String> {
        let mut dx = zeros(be, what, self.x.dims(), DType::F32)?;
        let mut df = zeros(be, what, self.filter.dims(), DType::F32)?;
        let c = self.x.dims()[2];
        let mut db = self
            .bias
            .as_ref()
            .map(|_| zeros(be, what, &[c], DType::F32))
            .transpose()?;
        let grads = DepthwiseGrads {
            dx: Some(&mut dx),
            dfilter: Some(&mut df),
            dbias: db.as_mut(),
        };
        ops::depthwise_conv1d_backward(be, &self.args(), dy, grads).context(what)?;
        Ok((dx, df, db))
    }
}

/// `ops::depthwise_conv1d`.
pub fn depthwise_conv1d(be: &dyn Backend) -> Result<(), String> {
    every_case(CASES.into_iter().enumerate(), |(i, case)| {
        let host = Host::draw(600 + 10 * i as u64, case);
        let what = host.describe();
        let out = host.out_dims();
        let y = Device::put(be, &what, &host)?.forward(be, &what, &out)?;
        let expected = reference::depthwise(&host.x, &host.filter, host.bias.as_ref(), host.window);
        close(
            &what,
            &out,
            &expected.data,
            &get(be, &what, &y)?,
            Tolerance::GEMM,
        )
    })
}

/// `ops::depthwise_conv1d_backward`: `dx`, `dfilter`, `dbias`.
pub fn depthwise_conv1d_backward(be: &dyn Backend) -> Result<(), String> {
    every_case(CASES.into_iter().enumerate(), |(i, case)| {
        let host = Host::draw(700 + 10 * i as u64, case);
        let what = format!("{} backward", host.describe());
        let dy = uniform(701 + 10 * i as u64, &host.out_dims(), -1.0, 1.0);
        let dev = Device::put(be, &what, &host)?;
        let (dx, df, db) = dev.backward(be, &what, &put(be, &what, &dy)?)?;
        let (edx, edf, edb) =
            reference::depthwise_backward(&host.x, &host.filter, &dy, host.window);
        let mut f = Failures::new();
        let tol = Tolerance::GEMM;
        f.record(close(
            &format!("{what}: dx"),
            &host.x.dims,
            &edx.data,
            &get(be, &what, &dx)?,
            tol,
        ));
        f.record(close(
            &format!("{what}: dfilter"),
            &host.filter.dims,
            &edf.data,
            &get(be, &what, &df)?,
            tol,
        ));
        if let Some(db) = db {
            f.record(close(
                &format!("{what}: dbias"),
                &[edb.len()],
                &edb,
                &get(be, &what, &db)?,
                tol,
            ));
        }
        f.finish()
    })
}
