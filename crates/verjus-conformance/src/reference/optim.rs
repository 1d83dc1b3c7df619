//! Reference optimizer steps, PyTorch's formulas as documented in `ops::optim`.
//!
//! SGD: `g = grad_scale * grad + weight_decay * p`; with momentum,
//! `v = g` on the first step and `v = momentum * v + (1 - dampening) * g` after,
//! then `p -= lr * (nesterov ? g + momentum * v : v)`; without momentum
//! (`momentum == 0`, no velocity) `p -= lr * g`, as in PyTorch.
//!
//! Adam: `g = grad_scale * grad` (+ `weight_decay * p` unless decoupled);
//! AdamW first does `p -= lr * weight_decay * p`; then
//! `m = b1 m + (1 - b1) g`, `v = b2 v + (1 - b2) g^2`,
//! `p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)`.
//!
//! NAdam, given its step's constants (`ops::NAdamStep`):
//! `g = grad_scale * grad + l2 * p`, `p *= decay`, the moments as Adam's, then
//! `p -= (moment_coef * m + grad_coef * g) / (sqrt(v / bias2) + eps)`.

use verjus_core::ops::{AdamHyper, NAdamStep, SgdHyper};

/// The parameter and velocity after one SGD step.
pub fn sgd(
    hp: &SgdHyper,
    param: &[f32],
    grad: &[f32],
    velocity: Option<&[f32]>,
) -> (Vec<f32>, Option<Vec<f32>>) {
    let (lr, mom) = (f64::from(hp.lr), f64::from(hp.momentum));
    let mut p_out = Vec::with_capacity(param.len());
    let mut v_out = velocity.map(|_| Vec::with_capacity(param.len()));
    for i in 0..param.len() {
        let p = f64::from(param[i]);
        let g = f64::from(hp.grad_scale) * f64::from(grad[i]) + f64::from(hp.weight_decay) * p;
        let step = match (velocity, v_out.as_mut()) {
            (Some(v_in), Some(v_out)) if hp.momentum != 0.0 => {
                let v = if hp.first_step {
                    g
                } else {
                    mom * f64::from(v_in[i]) + (1.0 - f64::from(hp.dampening)) * g
                };
                v_out.push(v as f32);
                if hp.nesterov {
                    g + mom * v
                } else {
                    v
                }
            }
            (Some(v_in), Some(v_out)) => {
                v_out.push(v_in[i]);
                g
            }
            _ => g,
        };
        p_out.push((p - lr * step) as f32);
    }
    (p_out, v_out)
}

/// The parameter and moments after one Adam/AdamW step.
pub fn adam(
    hp: &AdamHyper,
    param: &[f32],
    grad: &[f32],
    m: &[f32],
    v: &[f32],
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let (lr, b1, b2) = (f64::from(hp.lr), f64::from(hp.beta1), f64::from(hp.beta2));
    let (wd, eps) = (f64::from(hp.weight_decay), f64::from(hp.eps));
    let t = i32::try_from(hp.step).expect("reference adam: step fits i32");
    let (c1, c2) = (1.0 - b1.powi(t), 1.0 - b2.powi(t));
    let (mut p_out, mut m_out, mut v_out) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..param.len() {
        let mut p = f64::from(param[i]);
        let mut g = f64::from(hp.grad_scale) * f64::from(grad[i]);
        if hp.decoupled {
            p -= lr * wd * p;
        } else {
            g += wd * p;
        }
        let mi = b1 * f64::from(m[i]) + (1.0 - b1) * g;
        let vi = b2 * f64::from(v[i]) + (1.0 - b2) * g * g;
        p -= lr * (mi / c1) / ((vi / c2).sqrt() + eps);
        p_out.push(p as f32);
        m_out.push(mi as f32);
        v_out.push(vi as f32);
    }
    (p_out, m_out, v_out)
}

/// NAdam; returns the new `(param, m, v)`.
pub fn nadam(
    s: &NAdamStep,
    param: &[f32],
    grad: &[f32],
    m: &[f32],
    v: &[f32],
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let f = f64::from;
    let (b1, b2) = (f(s.beta1), f(s.beta2));
    let (mut p_out, mut m_out, mut v_out) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..param.len() {
        let mut p = f(param[i]);
        let g = f(s.grad_scale) * f(grad[i]) + f(s.l2) * p;
        p *= f(s.decay);
        let mi = b1 * f(m[i]) + (1.0 - b1) * g;
        let vi = b2 * f(v[i]) + (1.0 - b2) * g * g;
        let denom = (vi / f(s.bias2)).sqrt() + f(s.eps);
        p -= (f(s.moment_coef) * mi + f(s.grad_coef) * g) / denom;
        p_out.push(p as f32);
        m_out.push(mi as f32);
        v_out.push(vi as f32);
    }
    (p_out, m_out, v_out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sgd_hp(momentum: f32, nesterov: bool, first_step: bool) -> SgdHyper {
        SgdHyper {
            lr: 0.1,
            momentum,
            dampening: 0.0,
            nesterov,
            weight_decay: 0.0,
            grad_scale: 1.0,
            first_step,
        }
    }

    #[test]
    fn sgd_by_hand() {
        // Plain: 1 - 0.1 * 2 = 0.8.
        assert_eq!(
            sgd(&sgd_hp(0.0, false, true), &[1.0], &[2.0], None).0,
            vec![0.8]
        );
        // Momentum 0.5 after the first step: v = 0.5 * 4 + 2 = 4, p = 1 - 0.4 = 0.6.
        let (p, v) = sgd(&sgd_hp(0.5, false, false), &[1.0], &[2.0], Some(&[4.0]));
        assert_eq!((p, v), (vec![0.6], Some(vec![4.0])));
        // First step: v = g regardless of the old buffer.
        let (_, v) = sgd(&sgd_hp(0.5, false, true), &[1.0], &[2.0], Some(&[100.0]));
        assert_eq!(v, Some(vec![2.0]));
        // Nesterov: p = 1 - 0.1 * (2 + 0.5 * 4) = 0.6 with v = 4.
        let (p, _) = sgd(&sgd_hp(0.5, true, false), &[1.0], &[2.0], Some(&[4.0]));
        assert!((p[0] - 0.6).abs() < 1e-7);
    }

    #[test]
    fn adam_first_step_moves_by_lr() {
        // At t = 1 the bias-corrected step is g / (|g| + eps), so p moves by about lr.
        let hp = AdamHyper {
            lr: 0.01,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            decoupled: false,
            step: 1,
            grad_scale: 1.0,
        };
        let (p, m, v) = adam(&hp, &[1.0, 1.0], &[3.0, -0.5], &[0.0; 2], &[0.0; 2]);
        assert!(
            (p[0] - 0.99).abs() < 1e-6 && (p[1] - 1.01).abs() < 1e-6,
            "{p:?}"
        );
        // (1 - beta) is computed from f32 betas, hence the 1e-6 slack.
        assert!((m[0] - 0.3).abs() < 1e-6 && (v[0] - 0.009).abs() < 1e-6);
        // AdamW with zero gradient only decays: 1 - 0.01 * 0.5 = 0.995.
        let w = AdamHyper {
            weight_decay: 0.5,
            decoupled: true,
            ..hp
        };
        assert!((adam(&w, &[1.0], &[0.0], &[0.0], &[0.0]).0[0] - 0.995).abs() < 1e-7);
    }
}
