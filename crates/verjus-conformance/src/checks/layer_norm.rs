//! Checks of the fused layer norm and its backward against the reference:
//! feature counts that are not multiples of a SIMD width, one feature, no
//! rows, no features, rows far from 0 (where a one-pass variance would lose
//! its digits), with and without scale and bias, and enough rows for the
//! backends to split them. Tolerance: `Tolerance::REDUCTION` (the backward's
//! sums over rows: `Tolerance::GEMM`).

use crate::array::Array;
use crate::compare::{close, every_case, Failures, Tolerance};
use crate::inputs::uniform;
use crate::reference::layer_norm as reference;
use crate::transfer::{get, put, zeros, Context};
use verjus_core::ops::{self, LayerNormArgs, LayerNormGrads};
use verjus_core::{Backend, DType, Tensor};

/// `(rows, features, centre of the inputs, with scale, with bias)`.
pub(crate) const CASES: [(usize, usize, f32, bool, bool); 9] = [
    (3, 7, 0.0, true, true),
    (5, 17, 0.0, true, false),
    (4, 33, 0.0, false, true),
    (2, 65, 0.0, false, false),
    (6, 1, 0.0, true, true),
    (0, 8, 0.0, true, true),
    (3, 0, 0.0, true, true),
    (4, 31, 100.0, true, true),
    (300, 128, 0.0, true, true),
];

/// The operands of one case, on the host.
pub(crate) struct Host {
    pub x: Array,
    pub scale: Option<Array>,
    pub bias: Option<Array>,
    pub eps: f32,
}

impl Host {
    pub(crate) fn draw(
        seed: u64,
        (n, d, centre, scale, bias): (usize, usize, f32, bool, bool),
    ) -> Host {
        Host {
            x: uniform(seed, &[n, d], centre - 2.0, centre + 2.0),
            scale: scale.then(|| uniform(seed + 1, &[d], -1.5, 1.5)),
            bias: bias.then(|| uniform(seed + 2, &[d], -1.0, 1.0)),
            eps: 1e-5,
        }
    }

    pub(crate) fn describe(&self) -> String {
        format!(
            "layer_norm x {:?}{}{}",
            self.x.dims,
            if self.scale.is_some() {
                " with scale"
            } else {
                ""
            },
            if self.bias.is_some() {
                " with bias"
            } else {
                ""
            }
        )
    }
}

/// The operands of one case, on the backend's device.
pub(crate) struct Device {
    x: Tensor,
    scale: Option<Tensor>,
    bias: Option<Tensor>,
    eps: f32,
}

impl Device {
    pub(crate) fn put(be: &dyn Backend, what: &str, h: &Host) -> Result<Device, String> {
        let opt = |a: &Option<Array>| a.as_ref().map(|a| put(be, what, a)).transpose();
        Ok(Device {
            x: put(be, what, &h.x)?,
            scale: opt(&h.scale)?,
            bias: opt(&h.bias)?,
            eps: h.eps,
        })
    }

    fn args(&self) -> LayerNormArgs<'_> {
        LayerNormArgs {
            x: &self.x,
            scale: self.scale.as_ref(),
            bias: self.bias.as_ref(),
            eps: self.eps,
        }
    }

    /// `(y, mean, rstd)`.
    pub(crate) fn forward(&self, be: &dyn Backend, what: &str) -> Result<[Tensor; 3], String> {
        let dims = self.x.dims().to_vec();
        let mut y = zeros(be, what, &dims, DType::F32)?;
        let mut mean = zeros(be, what, &dims[..1], DType::F32)?;
        let mut rstd = zeros(be, what, &dims[..1], DType::F32)?;
        ops::layer_norm(be, &self.args(), &mut y, &mut mean, &mut rstd).context(what)?;
        Ok([y, mean, rstd])
    }

    /// `(dx, dscale, dbias)`, the last two where the case has them.
    pub(crate) fn backward(
        &self,
        be: &dyn Backend,
        what: &str,
        mean: &Tensor,
        rstd: &Tensor,
        dy: &Tensor,
    ) -> Result<(Tensor, Option<Tensor>, Option<Tensor>), String> {
        let dims = self.x.dims().to_vec();
        let mut dx = zeros(be, what, &dims, DType::F32)?;
        let feature = |on: bool| {
            on.then(|| zeros(be, what, &dims[1..], DType::F32))
                .transpose()
        };
        let mut dscale = feature(self.scale.is_some())?;
        let mut dbias = feature(self.bias.is_some())?;
        let grads = LayerNormGrads {
            dx: Some(&mut dx),
            dscale: dscale.as_mut(),
            dbias: dbias.as_mut(),
        };
        ops::layer_norm_backward(be, &self.args(), mean, rstd, dy, grads).context(what)?;
        Ok((dx, dscale, dbias))
    }
}

/// `ops::layer_norm`: the output and the statistics it keeps.
pub fn layer_norm(be: &dyn Backend) -> Result<(), String> {
    every_case(CASES.into_iter().enumerate(), |(i, case)| {
        let host = Host::draw(300 + 10 * i as u64, case);
        let what = host.describe();
        let [y, mean, rstd] = Device::put(be, &what, &host)?.forward(be, &what)?;
        let (ey, emean, erstd) =
            reference::layer_norm(&host.x, host.scale.as_ref(), host.bias.as_ref(), host.eps);
        let mut f = Failures::new();
        let tol = Tolerance::REDUCTION;
        f.record(close(
            &format!("{what}: y"),
            &host.x.dims,
            &ey.data,
            &get(be, &what, &y)?,
            tol,
        ));
        let rows = &host.x.dims[..1];
        f.record(close(
            &format!("{what}: mean"),
            rows,
            &emean,
            &get(be, &what, &mean)?,
            tol,
        ));
        f.record(close(
            &format!("{what}: rstd"),
            rows,
            &erstd,
            &get(be, &what, &rstd)?,
            tol,
        ));
        f.finish()
    })
}

/// `ops::layer_norm_backward`: `dx`, `dscale`, `dbias`.
pub fn layer_norm_backward(be: &dyn Backend) -> Result<(), String> {
    every_case(CASES.into_iter().enumerate(), |(i, case)| {
        let host = Host::draw(400 + 10 * i as u64, case);
        let what = format!("{} backward", host.describe());
        let dy = uniform(401 + 10 * i as u64, &host.x.dims, -1.0, 1.0);
        let dev = Device::put(be, &what, &host)?;
        let [_, mean, rstd] = dev.forward(be, &what)?;
        let (dx, dscale, dbias) = dev.backward(be, &what, &mean, &rstd, &put(be, &what, &dy)?)?;
        let (edx, eds, edb) =
            reference::layer_norm_backward(&host.x, host.scale.as_ref(), &dy, host.eps);
        let mut f = Failures::new();
        let features = &host.x.dims[1..];
        f.record(close(
            &format!("{what}: dx"),
            &host.x.dims,
            &edx.data,
            &get(be, &what, &dx)?,
            Tolerance::REDUCTION,
        ));
        for (name, got, expected) in [("dscale", dscale, eds), ("dbias", dbias, edb)] {
            if let Some(got) = got {
                f.record(close(
                    &format!("{what}: {name}"),
                    features,
                    &expected,
                    &get(be, &what, &got)?,
                    Tolerance::GEMM,
                ));
            }
        }
        f.finish()
    })
}
