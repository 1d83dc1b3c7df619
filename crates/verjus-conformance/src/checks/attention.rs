//! Checks of fused attention and its backward against the reference:
//! key lengths {0, 1, Tk-1, Tk} (padded keys must get no weight: their
//! values are large, so any weight shows), causal and not, queries longer
//! and shorter than keys, value features unlike key features, and empty
//! axes. Tolerance: `Tolerance::REDUCTION`.

use crate::array::Array;
use crate::compare::{close, every_case, Tolerance};
use crate::inputs::uniform;
use crate::reference::attention::{self as reference, Operands};
use crate::transfer::{get, put, put_vec, zeros, Context};
use verjus_core::ops::{self, AttentionArgs, AttentionGrads};
use verjus_core::{Backend, DType, Tensor};

/// The sizes of one case: `(N, Tq, Tk, D, Dv, lengths, causal)`.
pub(crate) type Case = (
    usize,
    usize,
    usize,
    usize,
    usize,
    Option<&'static [i32]>,
    bool,
);

pub(crate) const CASES: [Case; 9] = [
    (4, 5, 6, 3, 2, Some(&[0, 1, 5, 6]), false),
    (4, 6, 6, 3, 2, Some(&[6, 1, 5, 0]), true),
    (2, 7, 7, 4, 4, None, true),
    (3, 2, 9, 5, 3, None, false),
    (1, 1, 1, 1, 1, Some(&[1]), false),
    (2, 9, 3, 2, 3, Some(&[3, 2]), true),
    (2, 0, 3, 2, 2, None, false),
    (2, 3, 0, 2, 2, None, true),
    (0, 3, 3, 2, 2, Some(&[]), false),
];

/// The host operands of case `i`: padded keys' values around 50.
pub(crate) struct Host {
    pub q: Array,
    pub k: Array,
    pub v: Array,
    pub lengths: Option<Vec<i32>>,
    pub causal: bool,
    pub scale: f32,
}

impl Host {
    pub(crate) fn draw(seed: u64, case: &Case) -> Host {
        let &(n, tq, tk, d, dv, lengths, causal) = case;
        let mut v = uniform(seed + 2, &[n, tk, dv], -1.0, 1.0);
        if let Some(l) = lengths {
            for (e, &len) in l.iter().enumerate() {
                for j in len as usize..tk {
                    v.data[(e * tk + j) * dv..(e * tk + j + 1) * dv].fill(50.0);
                }
            }
        }
        Host {
            q: uniform(seed, &[n, tq, d], -1.5, 1.5),
            k: uniform(seed + 1, &[n, tk, d], -1.5, 1.5),
            v,
            lengths: lengths.map(<[i32]>::to_vec),
            causal,
            scale: 1.0 / (d as f32).sqrt(),
        }
    }

    pub(crate) fn operands(&self) -> Operands<'_> {
        Operands {
            q: &self.q,
            k: &self.k,
            v: &self.v,
            lengths: self.lengths.as_deref(),
            causal: self.causal,
            scale: self.scale,
        }
    }

    pub(crate) fn describe(&self) -> String {
        format!(
            "attention q {:?} k {:?} v {:?} lengths {:?} causal {}",
            self.q.dims, self.k.dims, self.v.dims, self.lengths, self.causal
        )
    }
}

/// The operands on the device.
pub(crate) struct Device {
    pub q: Tensor,
    pub k: Tensor,
    pub v: Tensor,
    pub lengths: Option<Tensor>,
    pub causal: bool,
    pub scale: f32,
}

impl Device {
    pub(crate) fn put(be: &dyn Backend, what: &str, h: &Host) -> Result<Device, String> {
        let lengths = match &h.lengths {
            Some(l) => Some(put_vec(be, what, &[l.len()], l.clone())?),
            None => None,
        };
        Ok(Device {
            q: put(be, what, &h.q)?,
            k: put(be, what, &h.k)?,
            v: put(be, what, &h.v)?,
            lengths,
            causal: h.causal,
            scale: h.scale,
        })
    }

    pub(crate) fn args(&self) -> AttentionArgs<'_> {
        AttentionArgs {
            q: &self.q,
            k: &self.k,
            v: &self.v,
            lengths: self.lengths.as_ref(),
            causal: self.causal,
            scale: self.scale,
        }
    }

    /// The backend's `(out, lse)`.
    pub(crate) fn forward(&self, be: &dyn Backend, what: &str) -> Result<(Tensor, Tensor), String> {
        let args = self.args();
        let plan = ops::attention_plan("attention", be, &args).context(what)?;
        let mut out = zeros(be, what, plan.output_shape().dims(), DType::F32)?;
        let mut lse = zeros(be, what, plan.lse_shape().dims(), DType::F32)?;
        ops::attention(be, &args, &mut out, &mut lse).context(what)?;
        Ok((out, lse))
    }

    /// The backend's `(dq, dk, dv)` for `dout`.
    pub(crate) fn backward(
        &self,
        be: &dyn Backend,
        what: &str,
        out: &Tensor,
        lse: &Tensor,
        dout: &Tensor,
    ) -> Result<[Tensor; 3], String> {
        let mut dq = zeros(be, what, self.q.dims(), DType::F32)?;
        let mut dk = zeros(be, what, self.k.dims(), DType::F32)?;
        let mut dv = zeros(be, what, self.v.dims(), DType::F32)?;
        let grads = AttentionGrads {
            dq: Some(&mut dq),
            dk: Some(&mut dk),
            dv: Some(&mut dv),
        };
        ops::attention_backward(be, &self.args(), out, lse, dout, grads).context(what)?;
        Ok([dq, dk, dv])
    }
}

/// Forward output and log-sum-exp against the reference.
pub fn attention(be: &dyn Backend) -> Result<(), String> {
    every_case(CASES.iter().enumerate(), |(i, case)| {
        let h = Host::draw(10 * i as u64, case);
        let what = h.describe();
        let (out, lse) = Device::put(be, &what, &h)?.forward(be, &what)?;
        let (e_out, e_lse) = reference::attention(&h.operands());
        close(
            &what,
            &e_out.dims,
            &e_out.data,
            &get(be, &what, &out)?,
            Tolerance::REDUCTION,
        )?;
        let lse = get::<f32>(be, &what, &lse)?;
        // Rows that see no key have lse -inf; compare those by equality.
        let (finite, expected): (Vec<f32>, Vec<f32>) = lse
            .iter()
            .zip(&e_lse.data)
            .map(|(&a, &e)| {
                if e.is_finite() {
                    (a, e)
                } else {
                    (f32::from(a != e), 0.0)
                }
            })
            .unzip();
        close(
            &format!("{what}: lse"),
            &e_lse.dims,
            &expected,
            &finite,
            Tolerance::REDUCTION,
        )
    })
}

/// `dq`, `dk`, `dv` against the reference.
pub fn attention_backward(be: &dyn Backend) -> Result<(), String> {
    every_case(CASES.iter().enumerate(), |(i, case)| {
        let h = Host::draw(10 * i as u64 + 3, case);
        let what = format!("{} backward", h.describe());
        let dev = Device::put(be, &what, &h)?;
        let (out, lse) = dev.forward(be, &what)?;
        let dout = uniform(i as u64 + 7, &[case.0, case.1, case.4], -1.0, 1.0);
        let tdout = put(be, &what, &dout)?;
        let got = dev.backward(be, &what, &out, &lse, &tdout)?;
        let (dq, dk, dv) = reference::attention_backward(&h.operands(), &dout);
        for (name, e, g) in [
            ("dq", dq, &got[0]),
            ("dk", dk, &got[1]),
            ("dv", dv, &got[2]),
        ] {
            let what = format!("{what}: {name}");
            close(
                &what,
                &e.dims,
                &e.data,
                &get(be, &what, g)?,
                Tolerance::REDUCTION,
            )?;
        }
        Ok(())
    })
}
