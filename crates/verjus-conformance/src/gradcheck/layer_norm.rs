//! Gradient check of the fused layer norm: `x`, `scale` and `bias` against
//! central differences of the backend's own forward (`L = sum(y * r)`).

use super::{agree, numeric_gradient, weighted_sum};
use crate::checks::layer_norm::{Device, Host, CASES};
use crate::compare::{every_case, Failures};
use crate::inputs::uniform;
use crate::transfer::{get, put};
use verjus_core::Backend;

/// `dx`, `dscale`, `dbias` of the small cases against finite differences.
pub fn layer_norm(be: &dyn Backend) -> Result<(), String> {
    every_case(CASES.iter().take(5).enumerate(), |(i, &case)| {
        let seed = 500 + 10 * i as u64;
        let mut host = Host::draw(seed, case);
        // A larger eps keeps the finite differences of rstd well-conditioned.
        host.eps = 1e-2;
        let what = format!("gradcheck {}", host.describe());
        let r = uniform(seed + 5, &host.x.dims, -1.0, 1.0);
        let loss = |h: &Host| -> Result<f64, String> {
            let [y, _, _] = Device::put(be, &what, h)?.forward(be, &what)?;
            weighted_sum(be, &what, &y, &r)
        };
        let dev = Device::put(be, &what, &host)?;
        let [_, mean, rstd] = dev.forward(be, &what)?;
        let (dx, dscale, dbias) = dev.backward(be, &what, &mean, &rstd, &put(be, &what, &r)?)?;
        let mut f = Failures::new();
        let numeric_dx = numeric_gradient(&host.x, |x| {
            let mut h = Host::draw(seed, case);
            (h.x, h.eps) = (x.clone(), host.eps);
            loss(&h)
        })?;
        f.record(agree(
            &format!("{what}: dx"),
            &host.x.dims,
            &numeric_dx,
            &get::<f32>(be, &what, &dx)?,
        ));
        for (slot, name, got) in [(0, "dscale", dscale), (1, "dbias", dbias)] {
            let (Some(got), Some(value)) = (got, [&host.scale, &host.bias][slot]) else {
                continue;
            };
            let numeric = numeric_gradient(value, |p| {
                let mut h = Host::draw(seed, case);
                h.eps = host.eps;
                *[&mut h.scale, &mut h.bias][slot] = Some(p.clone());
                loss(&h)
            })?;
            f.record(agree(
                &format!("{what}: {name}"),
                &value.dims,
                &numeric,
                &get::<f32>(be, &what, &got)?,
            ));
        }
        f.finish()
    })
}
