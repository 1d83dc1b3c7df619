//! The main job: a small MLP (2-64-64-3, ReLU) learns a three-arm spiral with
//! autograd and Adam.
//!
//! The data are generated deterministically from the shared Philox stream, the
//! forward pass is built from `Var` ops (so the backward pass comes from the
//! tape), and the parameters are updated with the fused `ops::adam_update`.
//! Prints the loss every `LOG_EVERY` steps and the final training accuracy;
//! exits with a failure status when the accuracy is below `REQUIRED_ACCURACY`.
//!
//! `cargo run --release --example spiral`

use std::process::ExitCode;
use std::time::Instant;
use verjus::core::autograd::{no_grad, Var};
use verjus::core::rng;
use verjus::ops::{self, AdamHyper, Distribution};
use verjus::{BackendRef, DType, Device, Error, Result, Shape, Tensor};

const ARMS: usize = 3;
const POINTS_PER_ARM: usize = 200;
/// Standard deviation of the angle noise, in radians.
const NOISE: f32 = 0.15;
const HIDDEN: usize = 64;
const STEPS: u64 = 1000;
const LOG_EVERY: u64 = 100;
const LEARNING_RATE: f32 = 0.01;
const SEED: u64 = 2024;
const REQUIRED_ACCURACY: f32 = 0.9;

fn main() -> ExitCode {
    match train() {
        Ok(accuracy) if accuracy >= REQUIRED_ACCURACY => ExitCode::SUCCESS,
        Ok(accuracy) => {
            eprintln!("accuracy {accuracy:.3} is below the required {REQUIRED_ACCURACY}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Trains on the spiral and returns the final training accuracy.
fn train() -> Result<f32> {
    let be = verjus::backend(Device::Cpu)?;
    let (points, labels) = spiral();
    let n = labels.len();
    let x = Var::constant(Tensor::from_vec([n, 2], points)?, be.clone())?;
    let y = Var::constant(Tensor::from_vec([n], labels.clone())?, be.clone())?;
    let mut mlp = Mlp::new(&be, &[2, HIDDEN, HIDDEN, ARMS])?;
    let start = Instant::now();
    for step in 1..=STEPS {
        let loss = mlp
            .forward(&x)?
            .softmax_cross_entropy(&y, 0.0)?
            .mean_all()?;
        loss.backward()?;
        let value = loss.item()?;
        // Dropping the graph releases the saved parameter values, so Adam
        // updates them in place instead of copying.
        drop(loss);
        mlp.adam_step(&be, step)?;
        if step % LOG_EVERY == 0 {
            println!("step {step:5}  loss {value:.4}");
        }
    }
    let logits = {
        let _guard = no_grad();
        mlp.forward(&x)?
    };
    let mut predicted = ops::zeros(&*be, &Shape::new([n])?, DType::I64)?;
    ops::argmax(&*be, &logits.value(), 1, &mut predicted)?;
    let predicted = ops::download(&*be, &predicted)?.to_vec::<i64>()?;
    let correct = predicted
        .iter()
        .zip(&labels)
        .filter(|(p, l)| p == l)
        .count();
    let accuracy = correct as f32 / n as f32;
    println!(
        "training accuracy {accuracy:.3} ({correct}/{n}) after {STEPS} steps in {:.2} s",
        start.elapsed().as_secs_f32()
    );
    Ok(accuracy)
}

/// `ARMS` spiral arms of `POINTS_PER_ARM` points each: arm `j` at radius `r`
/// (0 to 1) has angle `4 (j + r)` plus Gaussian noise. Returns the points
/// `[n, 2]` row-major and their arm labels.
fn spiral() -> (Vec<f32>, Vec<i64>) {
    let mut points = Vec::with_capacity(ARMS * POINTS_PER_ARM * 2);
    let mut labels = Vec::with_capacity(ARMS * POINTS_PER_ARM);
    for arm in 0..ARMS {
        for i in 0..POINTS_PER_ARM {
            let index = arm * POINTS_PER_ARM + i;
            let r = i as f32 / (POINTS_PER_ARM - 1) as f32;
            let angle = 4.0 * (arm as f32 + r) + NOISE * rng::normal_at(SEED, 0, index);
            points.extend([r * angle.sin(), r * angle.cos()]);
            labels.push(arm as i64);
        }
    }
    (points, labels)
}

/// A parameter and its Adam moments.
struct Param {
    var: Var,
    m: Tensor,
    v: Tensor,
}

impl Param {
    fn new(be: &BackendRef, value: Tensor) -> Result<Self> {
        let m = ops::zeros(&**be, value.shape(), DType::F32)?;
        let v = ops::zeros(&**be, value.shape(), DType::F32)?;
        Ok(Param {
            var: Var::leaf(value, be.clone())?,
            m,
            v,
        })
    }
}

/// Fully connected layers with ReLU between them.
struct Mlp {
    /// Weight `[in, out]` and bias `[out]` of each layer.
    layers: Vec<(Param, Param)>,
}

impl Mlp {
    /// He-initialised weights from the Philox stream, zero biases.
    fn new(be: &BackendRef, widths: &[usize]) -> Result<Self> {
        let mut offset = 0;
        let mut layers = Vec::new();
        for pair in widths.windows(2) {
            let (fan_in, fan_out) = (pair[0], pair[1]);
            let mut w = ops::zeros(&**be, &Shape::new([fan_in, fan_out])?, DType::F32)?;
            let std = (2.0 / fan_in as f32).sqrt();
            ops::random(
                &**be,
                &mut w,
                Distribution::Normal { mean: 0.0, std },
                SEED,
                offset,
            )?;
            offset += rng::blocks_for(w.numel());
            let b = ops::zeros(&**be, &Shape::new([fan_out])?, DType::F32)?;
            layers.push((Param::new(be, w)?, Param::new(be, b)?));
        }
        Ok(Mlp { layers })
    }

    /// The logits of `x` `[n, widths[0]]`.
    fn forward(&self, x: &Var) -> Result<Var> {
        let mut h = x.clone();
        for (i, (w, b)) in self.layers.iter().enumerate() {
            h = h.matmul(&w.var)?.add(&b.var)?;
            if i + 1 < self.layers.len() {
                h = h.relu()?;
            }
        }
        Ok(h)
    }

    /// One Adam step (step number `step`, from 1) on every parameter, using
    /// and then clearing the gradients of the last backward pass.
    fn adam_step(&mut self, be: &BackendRef, step: u64) -> Result<()> {
        let hp = AdamHyper {
            lr: LEARNING_RATE,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            decoupled: false,
            step,
            grad_scale: 1.0,
        };
        for p in self.layers.iter_mut().flat_map(|(w, b)| [w, b]) {
            let grad = p
                .var
                .grad()
                .ok_or_else(|| Error::Autograd("a parameter got no gradient".into()))?;
            let (m, v) = (&mut p.m, &mut p.v);
            p.var
                .update_value(|value| ops::adam_update(&**be, &hp, value, &grad, m, v))?;
            p.var.zero_grad();
        }
        Ok(())
    }
}
