//! Gradient checks of fused attention: `q`, `k` and `v` of the conformance
//! cases with key lengths and causality, against central differences of the
//! backend's own forward (`L = sum(out * r)`).

use super::{agree, numeric_gradient, weighted_sum};
use crate::checks::attention::{Device, Host, CASES};
use crate::compare::{every_case, Failures};
use crate::inputs::uniform;
use crate::transfer::{get, put};
use verjus_core::Backend;

/// `dq`, `dk`, `dv` of every non-empty case against finite differences.
pub fn attention(be: &dyn Backend) -> Result<(), String> {
    every_case(CASES.iter().take(6).enumerate(), |(i, case)| {
        let host = Host::draw(70 + 10 * i as u64, case);
        let what = format!("gradcheck {}", host.describe());
        let r = uniform(71 + i as u64, &[case.0, case.1, case.4], -1.0, 1.0);
        let loss = |h: &Host| -> Result<f64, String> {
            let (out, _) = Device::put(be, &what, h)?.forward(be, &what)?;
            weighted_sum(be, &what, &out, &r)
        };
        let dev = Device::put(be, &what, &host)?;
        let (out, lse) = dev.forward(be, &what)?;
        let grads = dev.backward(be, &what, &out, &lse, &put(be, &what, &r)?)?;
        let mut failures = Failures::new();
        for (slot, name) in ["q", "k", "v"].into_iter().enumerate() {
            let x = [&host.q, &host.k, &host.v][slot];
            let numeric = numeric_gradient(x, |value| {
                let mut h = Host::draw(70 + 10 * i as u64, case);
                *[&mut h.q, &mut h.k, &mut h.v][slot] = value.clone();
                loss(&h)
            })?;
            let analytic = get::<f32>(be, &what, &grads[slot])?;
            failures.record(agree(
                &format!("{what}: d{name}"),
                &x.dims,
                &numeric,
                &analytic,
            ));
        }
        failures.finish()
    })
}
