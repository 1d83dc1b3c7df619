//! Fused optimizer steps: one pass over a parameter, its gradient and its state.
//!
//! The formulas are PyTorch's (see `verjus_core::ops::optim`). Each update is
//! elementwise, so the tensors are cut into equal chunks that rayon updates in
//! parallel; small tensors (biases) are updated on the calling thread. The
//! loops run through [`simd`], compiled again for AVX2/AVX-512 where the CPU
//! has them (Adam's square root and division are the costly part; the baseline
//! build would do them four lanes at a time).

use crate::simd::simd;
use rayon::prelude::*;
use verjus_core::ops::{AdamHyper, NAdamStep, SgdHyper};
use verjus_core::{Result, Tensor};

/// Elements per rayon task; also the size below which an update stays on the calling thread.
const CHUNK: usize = 1 << 15;

/// One SGD step.
pub(crate) fn sgd_update(
    hp: &SgdHyper,
    param: &mut Tensor,
    grad: &Tensor,
    velocity: Option<&mut Tensor>,
) -> Result<()> {
    let p = param.as_mut_slice::<f32>()?;
    let g = grad.as_slice::<f32>()?;
    match velocity {
        Some(v) if hp.momentum != 0.0 => {
            let v = v.as_mut_slice::<f32>()?;
            if p.len() <= CHUNK {
                sgd_momentum(hp, p, g, v);
            } else {
                p.par_chunks_mut(CHUNK)
                    .zip(g.par_chunks(CHUNK))
                    .zip(v.par_chunks_mut(CHUNK))
                    .for_each(|((p, g), v)| sgd_momentum(hp, p, g, v));
            }
        }
        _ => {
            if p.len() <= CHUNK {
                sgd_plain(hp, p, g);
            } else {
                p.par_chunks_mut(CHUNK)
                    .zip(g.par_chunks(CHUNK))
                    .for_each(|(p, g)| sgd_plain(hp, p, g));
            }
        }
    }
    Ok(())
}

/// `p -= lr * (grad_scale * g + weight_decay * p)`.
fn sgd_plain(hp: &SgdHyper, p: &mut [f32], g: &[f32]) {
    let (lr, wd, scale) = (hp.lr, hp.weight_decay, hp.grad_scale);
    simd(
        #[inline(always)]
        || {
            for (p, &g) in p.iter_mut().zip(g) {
                let d = scale * g + wd * *p;
                *p -= lr * d;
            }
        },
    )
}

/// SGD with momentum (and optionally dampening and Nesterov).
fn sgd_momentum(hp: &SgdHyper, p: &mut [f32], g: &[f32], v: &mut [f32]) {
    match (hp.first_step, hp.nesterov) {
        (true, true) => sgd_momentum_as::<true, true>(hp, p, g, v),
        (true, false) => sgd_momentum_as::<true, false>(hp, p, g, v),
        (false, true) => sgd_momentum_as::<false, true>(hp, p, g, v),
        (false, false) => sgd_momentum_as::<false, false>(hp, p, g, v),
    }
}

/// [`sgd_momentum`] with its two switches fixed, so that the loop has no
/// branches and vectorises.
fn sgd_momentum_as<const FIRST: bool, const NESTEROV: bool>(
    hp: &SgdHyper,
    p: &mut [f32],
    g: &[f32],
    v: &mut [f32],
) {
    let (lr, wd, scale) = (hp.lr, hp.weight_decay, hp.grad_scale);
    let (momentum, keep) = (hp.momentum, 1.0 - hp.dampening);
    simd(
        #[inline(always)]
        || {
            for ((p, &g), v) in p.iter_mut().zip(g).zip(v) {
                let d = scale * g + wd * *p;
                *v = if FIRST { d } else { momentum * *v + keep * d };
                let step = if NESTEROV { d + momentum * *v } else { *v };
                *p -= lr * step;
            }
        },
    )
}

/// The per-step constants of Adam.
struct AdamStep {
    /// `lr / (1 - beta1^t)`.
    step_size: f32,
    /// `sqrt(1 - beta2^t)`.
    bias2_sqrt: f32,
    /// `1 - lr * weight_decay` for AdamW, 1 for Adam.
    decay: f32,
    /// The L2 coefficient added to the gradient (Adam only).
    l2: f32,
}

impl AdamStep {
    fn new(hp: &AdamHyper) -> Self {
        // Bias corrections in f64: beta^t for large t underflows gracefully to 0.
        let t = hp.step as f64;
        let bias1 = 1.0 - f64::from(hp.beta1).powf(t);
        let bias2 = 1.0 - f64::from(hp.beta2).powf(t);
        let (decay, l2) = if hp.decoupled {
            (1.0 - hp.lr * hp.weight_decay, 0.0)
        } else {
            (1.0, hp.weight_decay)
        };
        AdamStep {
            step_size: (f64::from(hp.lr) / bias1) as f32,
            bias2_sqrt: bias2.sqrt() as f32,
            decay,
            l2,
        }
    }
}

/// One Adam/AdamW step.
pub(crate) fn adam_update(
    hp: &AdamHyper,
    param: &mut Tensor,
    grad: &Tensor,
    m: &mut Tensor,
    v: &mut Tensor,
) -> Result<()> {
    let s = AdamStep::new(hp);
    let p = param.as_mut_slice::<f32>()?;
    let g = grad.as_slice::<f32>()?;
    let (m, v) = (m.as_mut_slice::<f32>()?, v.as_mut_slice::<f32>()?);
    if p.len() <= CHUNK {
        adam(hp, &s, p, g, m, v);
    } else {
        p.par_chunks_mut(CHUNK)
            .zip(g.par_chunks(CHUNK))
            .zip(m.par_chunks_mut(CHUNK))
            .zip(v.par_chunks_mut(CHUNK))
            .for_each(|(((p, g), m), v)| adam(hp, &s, p, g, m, v));
    }
    Ok(())
}

fn adam(hp: &AdamHyper, s: &AdamStep, p: &mut [f32], g: &[f32], m: &mut [f32], v: &mut [f32]) {
    let (b1, b2, eps, scale) = (hp.beta1, hp.beta2, hp.eps, hp.grad_scale);
    let (l2, decay, bias2_sqrt, step_size) = (s.l2, s.decay, s.bias2_sqrt, s.step_size);
    // PyTorch's `step_size * m / (sqrt(v) / bias2_sqrt + eps)`, with numerator
    // and denominator multiplied by `bias2_sqrt`: one division per element
    // instead of two (equal up to rounding). The second division kept the loop
    // above its memory bound: the benchmark `mlp_adam_update` (the MLP's 670K
    // parameters, 2 threads) takes 0.86-0.87 of the time it took with two
    // (interleaved A/B of two `verjus-bench --serve` processes).
    let (eps_scaled, step_scaled) = (eps * bias2_sqrt, step_size * bias2_sqrt);
    simd(
        #[inline(always)]
        || {
            for (((p, &g), m), v) in p.iter_mut().zip(g).zip(m).zip(v) {
                let g = scale * g + l2 * *p;
                *p *= decay;
                *m = b1 * *m + (1.0 - b1) * g;
                *v = b2 * *v + (1.0 - b2) * g * g;
                let denom = v.sqrt() + eps_scaled;
                *p -= step_scaled * *m / denom;
            }
        },
    )
}

/// One NAdam step (the constants worked out by the rule).
pub(crate) fn nadam_update(
    s: &NAdamStep,
    param: &mut Tensor,
    grad: &Tensor,
    m: &mut Tensor,
    v: &mut Tensor,
) -> Result<()> {
    let p = param.as_mut_slice::<f32>()?;
    let g = grad.as_slice::<f32>()?;
    let (m, v) = (m.as_mut_slice::<f32>()?, v.as_mut_slice::<f32>()?);
    if p.len() <= CHUNK {
        nadam(s, p, g, m, v);
    } else {
        p.par_chunks_mut(CHUNK)
            .zip(g.par_chunks(CHUNK))
            .zip(m.par_chunks_mut(CHUNK))
            .zip(v.par_chunks_mut(CHUNK))
            .for_each(|(((p, g), m), v)| nadam(s, p, g, m, v));
    }
    Ok(())
}

fn nadam(s: &NAdamStep, p: &mut [f32], g: &[f32], m: &mut [f32], v: &mut [f32]) {
    let (b1, b2, scale, l2, decay) = (s.beta1, s.beta2, s.grad_scale, s.l2, s.decay);
    // As in `adam`: numerator and denominator times sqrt(bias2), one division.
    let root = s.bias2.sqrt();
    let (eps_scaled, gc, mc) = (s.eps * root, s.grad_coef * root, s.moment_coef * root);
    simd(
        #[inline(always)]
        || {
            for (((p, &g), m), v) in p.iter_mut().zip(g).zip(m).zip(v) {
                let g = scale * g + l2 * *p;
                *p *= decay;
                *m = b1 * *m + (1.0 - b1) * g;
                *v = b2 * *v + (1.0 - b2) * g * g;
                *p -= (mc * *m + gc * g) / (v.sqrt() + eps_scaled);
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use crate::NativeBackend;
    use verjus_core::ops::{self, AdamHyper, SgdHyper};
    use verjus_core::Tensor;

    fn t(v: &[f32]) -> Tensor {
        Tensor::from_vec([v.len()], v.to_vec()).unwrap()
    }

    fn close(a: &[f32], b: &[f32]) {
        assert!(
            a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6),
            "{a:?} vs {b:?}"
        );
    }

    #[test]
    fn one_adamw_step_by_hand() {
        let hp = AdamHyper {
            lr: 0.1,
            beta1: 0.9,
            beta2: 0.99,
            eps: 1e-8,
            weight_decay: 0.5,
            decoupled: true,
            step: 1,
            grad_scale: 0.5,
        };
        let (mut p, g) = (t(&[1.0, -2.0]), t(&[4.0, 0.0]));
        let (mut m, mut v) = (t(&[0.0, 0.0]), t(&[0.0, 0.0]));
        ops::adam_update(&NativeBackend, &hp, &mut p, &g, &mut m, &mut v).unwrap();
        // g = [2, 0]; decay p by 1 - 0.05 -> [0.95, -1.9];
        // m = [0.2, 0], v = [0.04, 0]; m_hat = [2, 0], v_hat = [4, 0];
        // p -= 0.1 * m_hat / (sqrt(v_hat) + eps) -> [0.95 - 0.1, -1.9].
        close(&m.to_vec::<f32>().unwrap(), &[0.2, 0.0]);
        close(&v.to_vec::<f32>().unwrap(), &[0.04, 0.0]);
        close(&p.to_vec::<f32>().unwrap(), &[0.85, -1.9]);
    }

    #[test]
    fn adam_second_step_uses_l2_and_bias_correction() {
        let hp = AdamHyper {
            lr: 0.01,
            beta1: 0.5,
            beta2: 0.75,
            eps: 0.0,
            weight_decay: 1.0,
            decoupled: false,
            step: 2,
            grad_scale: 1.0,
        };
        let (mut p, g) = (t(&[1.0]), t(&[1.0]));
        let (mut m, mut v) = (t(&[1.0]), t(&[2.0]));
        ops::adam_update(&NativeBackend, &hp, &mut p, &g, &mut m, &mut v).unwrap();
        // g = 1 + 1 * p = 2; m = 0.5 + 1 = 1.5; v = 1.5 + 0.25 * 4 = 2.5;
        // m_hat = 1.5 / 0.75 = 2; v_hat = 2.5 / (1 - 0.5625) = 5.714286;
        // p = 1 - 0.01 * 2 / sqrt(5.714286) = 0.99163336.
        close(&m.to_vec::<f32>().unwrap(), &[1.5]);
        close(&v.to_vec::<f32>().unwrap(), &[2.5]);
        close(&p.to_vec::<f32>().unwrap(), &[0.991_633_4]);
    }

    #[test]
    fn sgd_momentum_nesterov_over_two_steps_and_a_large_tensor() {
        let mut hp = SgdHyper {
            lr: 0.1,
            momentum: 0.9,
            dampening: 0.0,
            nesterov: true,
            weight_decay: 0.0,
            grad_scale: 2.0,
            first_step: true,
        };
        let n = 100_000;
        let (mut p, g) = (t(&vec![1.0; n]), t(&vec![0.5; n]));
        let mut vel = t(&vec![0.0; n]);
        ops::sgd_update(&NativeBackend, &hp, &mut p, &g, Some(&mut vel)).unwrap();
        // d = 1; v = 1; p -= 0.1 * (1 + 0.9) -> 0.81.
        hp.first_step = false;
        ops::sgd_update(&NativeBackend, &hp, &mut p, &g, Some(&mut vel)).unwrap();
        // v = 0.9 + 1 = 1.9; p -= 0.1 * (1 + 1.71) -> 0.539.
        close(&vel.to_vec::<f32>().unwrap(), &vec![1.9; n]);
        close(&p.to_vec::<f32>().unwrap(), &vec![0.539; n]);
    }

    #[test]
    fn plain_sgd_with_weight_decay() {
        let hp = SgdHyper {
            lr: 0.5,
            momentum: 0.0,
            dampening: 0.0,
            nesterov: false,
            weight_decay: 0.1,
            grad_scale: 1.0,
            first_step: false,
        };
        let (mut p, g) = (t(&[2.0, -1.0]), t(&[1.0, 3.0]));
        ops::sgd_update(&NativeBackend, &hp, &mut p, &g, None).unwrap();
        // d = g + 0.1 p = [1.2, 2.9]; p -= 0.5 d.
        close(&p.to_vec::<f32>().unwrap(), &[1.4, -2.45]);
    }
}
