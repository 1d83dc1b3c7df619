//! Gradient check of the depthwise 1-D convolution: `x`, `filter` and
//! `bias` against central differences of the backend's own forward.

use super::{agree, numeric_gradient, weighted_sum};
use crate::checks::depthwise::{Device, Host, CASES};
use crate::compare::{every_case, Failures};
use crate::inputs::uniform;
use crate::transfer::{get, put};
use verjus_core::Backend;

/// `dx`, `dfilter`, `dbias` of the small cases against finite differences.
pub fn depthwise_conv1d(be: &dyn Backend) -> Result<(), String> {
    every_case(CASES.iter().take(5).enumerate(), |(i, &case)| {
        let seed = 800 + 10 * i as u64;
        let host = Host::draw(seed, case);
        let what = format!("gradcheck {}", host.describe());
        let out = host.out_dims();
        let r = uniform(seed + 5, &out, -1.0, 1.0);
        let loss = |h: &Host| -> Result<f64, String> {
            let y = Device::put(be, &what, h)?.forward(be, &what, &out)?;
            weighted_sum(be, &what, &y, &r)
        };
        let (dx, df, db) =
            Device::put(be, &what, &host)?.backward(be, &what, &put(be, &what, &r)?)?;
        let mut f = Failures::new();
        let inputs = [
            ("dx", Some(&host.x), Some(dx)),
            ("dfilter", Some(&host.filter), Some(df)),
            ("dbias", host.bias.as_ref(), db),
        ];
        for (slot, (name, value, got)) in inputs.into_iter().enumerate() {
            let (Some(value), Some(got)) = (value, got) else {
                continue;
            };
            let numeric = numeric_gradient(value, |p| {
                let mut h = Host::draw(seed, case);
                match slot {
                    0 => h.x = p.clone(),
                    1 => h.filter = p.clone(),
                    _ => h.bias = Some(p.clone()),
                }
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
