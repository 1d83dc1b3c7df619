//! Checks of the fused optimizer steps against PyTorch's formulas: plain SGD,
//! momentum (first and later steps), dampening, Nesterov, weight decay, gradient
//! scaling; Adam and AdamW at several step numbers; NAdam's step with L2 and
//! decoupled decay (fused where the backend has a kernel, composed else). Every updated buffer
//! (parameter, velocity, moments) is compared. Tolerance: `Tolerance::ELEMENTWISE`.

use crate::compare::{close, every_case, Tolerance};
use crate::inputs::uniform;
use crate::reference::optim as reference;
use crate::transfer::{get, put, Context};
use verjus_core::ops::{self, AdamHyper, NAdamStep, SgdHyper};
use verjus_core::Backend;

const SHAPES: [&[usize]; 5] = [&[1], &[17], &[65], &[0], &[3, 31]];

const fn sgd_hp(
    momentum: f32,
    dampening: f32,
    nesterov: bool,
    weight_decay: f32,
    grad_scale: f32,
    first_step: bool,
) -> SgdHyper {
    SgdHyper {
        lr: 0.1,
        momentum,
        dampening,
        nesterov,
        weight_decay,
        grad_scale,
        first_step,
    }
}

const SGD: [SgdHyper; 5] = [
    sgd_hp(0.0, 0.0, false, 0.0, 1.0, true),
    sgd_hp(0.9, 0.0, false, 0.0, 1.0, true),
    sgd_hp(0.9, 0.1, false, 0.01, 0.5, false),
    sgd_hp(0.8, 0.0, true, 0.001, 1.0, false),
    sgd_hp(0.0, 0.0, false, 0.1, 2.0, false),
];

const fn adam_hp(
    beta2: f32,
    eps: f32,
    weight_decay: f32,
    decoupled: bool,
    step: u64,
    grad_scale: f32,
) -> AdamHyper {
    AdamHyper {
        lr: 0.01,
        beta1: 0.9,
        beta2,
        eps,
        weight_decay,
        decoupled,
        step,
        grad_scale,
    }
}

const ADAM: [AdamHyper; 4] = [
    adam_hp(0.999, 1e-8, 0.0, false, 1, 1.0),
    adam_hp(0.999, 1e-8, 0.01, false, 10, 0.5),
    adam_hp(0.999, 1e-8, 0.1, true, 3, 1.0),
    adam_hp(0.99, 1e-6, 0.05, true, 1000, 2.0),
];

/// `ops::sgd_update`; a velocity buffer is passed exactly when momentum is non-zero.
pub fn sgd_update(be: &dyn Backend) -> Result<(), String> {
    let cases = SGD
        .iter()
        .enumerate()
        .flat_map(|(i, hp)| SHAPES.iter().map(move |&s| (i as u64, hp, s)));
    every_case(cases, |(seed, hp, dims)| {
        let what = format!("sgd_update {dims:?} {hp:?}");
        let p = uniform(seed, dims, -1.0, 1.0);
        let g = uniform(seed + 1, dims, -1.0, 1.0);
        let v = uniform(seed + 2, dims, -0.5, 0.5);
        let with_velocity = hp.momentum != 0.0;
        let (ep, ev) = reference::sgd(hp, &p.data, &g.data, with_velocity.then_some(&v.data[..]));
        let (mut tp, tg, mut tv) = (
            put(be, &what, &p)?,
            put(be, &what, &g)?,
            put(be, &what, &v)?,
        );
        ops::sgd_update(be, hp, &mut tp, &tg, with_velocity.then_some(&mut tv)).context(&what)?;
        let tol = Tolerance::ELEMENTWISE;
        close(
            &format!("{what} param"),
            dims,
            &ep,
            &get(be, &what, &tp)?,
            tol,
        )?;
        match ev {
            Some(ev) => close(
                &format!("{what} velocity"),
                dims,
                &ev,
                &get(be, &what, &tv)?,
                tol,
            ),
            None => Ok(()),
        }
    })
}

const fn nadam_step(l2: f32, decay: f32, bias2: f32, grad_scale: f32) -> NAdamStep {
    NAdamStep {
        grad_coef: 0.004,
        moment_coef: 0.03,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        bias2,
        l2,
        decay,
        grad_scale,
    }
}

const NADAM: [NAdamStep; 3] = [
    nadam_step(0.0, 1.0, 0.001, 1.0),
    nadam_step(0.01, 1.0, 0.0199, 0.5),
    nadam_step(0.0, 0.999, 1.0, 2.0),
];

/// `ops::nadam_update`.
pub fn nadam_update(be: &dyn Backend) -> Result<(), String> {
    let cases = NADAM
        .iter()
        .enumerate()
        .flat_map(|(i, s)| SHAPES.iter().map(move |&d| (i as u64, s, d)));
    every_case(cases, |(seed, s, dims)| {
        let what = format!("nadam_update {dims:?} {s:?}");
        let p = uniform(seed, dims, -1.0, 1.0);
        let g = uniform(seed + 1, dims, -1.0, 1.0);
        let m = uniform(seed + 2, dims, -0.1, 0.1);
        let v = uniform(seed + 3, dims, 0.0, 0.01);
        let (ep, em, ev) = reference::nadam(s, &p.data, &g.data, &m.data, &v.data);
        let (mut tp, tg) = (put(be, &what, &p)?, put(be, &what, &g)?);
        let (mut tm, mut tv) = (put(be, &what, &m)?, put(be, &what, &v)?);
        ops::nadam_update(be, s, &mut tp, &tg, &mut tm, &mut tv).context(&what)?;
        let tol = Tolerance::ELEMENTWISE;
        close(
            &format!("{what} param"),
            dims,
            &ep,
            &get(be, &what, &tp)?,
            tol,
        )?;
        close(&format!("{what} m"), dims, &em, &get(be, &what, &tm)?, tol)?;
        close(&format!("{what} v"), dims, &ev, &get(be, &what, &tv)?, tol)
    })
}

/// `ops::adam_update`.
pub fn adam_update(be: &dyn Backend) -> Result<(), String> {
    let cases = ADAM
        .iter()
        .enumerate()
        .flat_map(|(i, hp)| SHAPES.iter().map(move |&s| (i as u64, hp, s)));
    every_case(cases, |(seed, hp, dims)| {
        let what = format!("adam_update {dims:?} {hp:?}");
        let p = uniform(seed, dims, -1.0, 1.0);
        let g = uniform(seed + 1, dims, -1.0, 1.0);
        let m = uniform(seed + 2, dims, -0.1, 0.1);
        let v = uniform(seed + 3, dims, 0.0, 0.01);
        let (ep, em, ev) = reference::adam(hp, &p.data, &g.data, &m.data, &v.data);
        let (mut tp, tg) = (put(be, &what, &p)?, put(be, &what, &g)?);
        let (mut tm, mut tv) = (put(be, &what, &m)?, put(be, &what, &v)?);
        ops::adam_update(be, hp, &mut tp, &tg, &mut tm, &mut tv).context(&what)?;
        let tol = Tolerance::ELEMENTWISE;
        close(
            &format!("{what} param"),
            dims,
            &ep,
            &get(be, &what, &tp)?,
            tol,
        )?;
        close(&format!("{what} m"), dims, &em, &get(be, &what, &tm)?, tol)?;
        close(&format!("{what} v"), dims, &ev, &get(be, &what, &tv)?, tol)
    })
}
