//! Helpers shared by the integration tests: the native backend, host data,
//! and a finite-difference gradient check.

use verjus_core::{ops, Backend, DType, Tensor};
use verjus_native::NativeBackend;
use verjus_nn::{Network, NetworkDef};

pub fn be() -> NativeBackend {
    NativeBackend::new()
}

/// Deterministic values in `[-1, 1)` (xorshift), so tests need no RNG kernel.
pub fn rand_vec(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

pub fn tensor(be: &dyn Backend, dims: &[usize], data: Vec<f32>) -> Tensor {
    ops::upload(be, &Tensor::from_vec(dims.to_vec(), data).unwrap()).unwrap()
}

pub fn rand_tensor(be: &dyn Backend, dims: &[usize], seed: u64) -> Tensor {
    tensor(be, dims, rand_vec(dims.iter().product(), seed))
}

pub fn host(be: &dyn Backend, t: &Tensor) -> Vec<f32> {
    ops::download(be, t).unwrap().to_vec::<f32>().unwrap()
}

/// Every parameter's values on the host, in the network's order.
pub fn param_values(net: &Network) -> Vec<Vec<f32>> {
    let be = be();
    net.parameters()
        .iter()
        .map(|p| host(&be, &p.value))
        .collect()
}

pub fn zeros_like(be: &dyn Backend, t: &Tensor) -> Tensor {
    ops::zeros(be, t.shape(), DType::F32).unwrap()
}

pub fn build(json: &str, seed: u64) -> Network {
    let def = NetworkDef::from_json(json).unwrap();
    Network::build(def, &be(), seed).unwrap()
}

pub fn set_param(net: &mut Network, i: usize, data: Vec<f32>) {
    let be = be();
    let dims = net.parameters()[i].value.dims().to_vec();
    net.parameters_mut()[i].value = tensor(&be, &dims, data);
}

pub fn assert_close(what: &str, a: &[f32], b: &[f32], tol: f32) {
    assert_eq!(a.len(), b.len(), "{what}: lengths differ");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= tol * (1.0 + x.abs().max(y.abs())),
            "{what}[{i}]: {x} vs {y}"
        );
    }
}

/// `L = sum(output * r)` on the host, in f64.
fn objective(net: &Network, inputs: &[&Tensor], r: &[f32], train_seed: Option<u64>) -> f64 {
    let be = be();
    let batch = inputs[0].dims()[0];
    let mut ctx = net.new_context(&be, batch).unwrap();
    if let Some(seed) = train_seed {
        ctx.set_train(true);
        ctx.set_seed(seed);
    }
    net.compute_output(&be, &mut ctx, inputs).unwrap();
    host(&be, ctx.output(0))
        .iter()
        .zip(r)
        .map(|(&o, &w)| f64::from(o) * f64::from(w))
        .sum()
}

/// Checks every parameter gradient and every input gradient of output 0 against
/// central differences, on up to `samples` elements of each tensor.
/// `train_seed` runs in training mode with the dropout stream reset each pass.
pub fn check_gradients(
    mut net: Network,
    inputs: Vec<Tensor>,
    train_seed: Option<u64>,
    eps: f32,
    tol: f32,
) {
    let be = be();
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let batch = inputs[0].dims()[0];
    let mut ctx = net.new_context(&be, batch).unwrap();
    ctx.set_input_grads(true);
    if let Some(seed) = train_seed {
        ctx.set_train(true);
        ctx.set_seed(seed);
    }
    net.compute_output(&be, &mut ctx, &refs).unwrap();
    let out_dims = ctx.output(0).dims().to_vec();
    let r = rand_vec(out_dims.iter().product(), 99);
    let dy = tensor(&be, &out_dims, r.clone());
    net.compute_gradients(&be, &mut ctx, &[&dy]).unwrap();
    let pgrads: Vec<Vec<f32>> = ctx.param_grads().iter().map(|g| host(&be, g)).collect();
    let igrads: Vec<Vec<f32>> = (0..inputs.len())
        .map(|i| host(&be, ctx.input_grad(i).expect("input gradient")))
        .collect();
    let samples = 24;

    for (p, analytic) in pgrads.iter().enumerate() {
        let base = host(&be, &net.parameters()[p].value);
        let step = (base.len() / samples).max(1);
        for idx in (0..base.len()).step_by(step) {
            let mut plus = base.clone();
            plus[idx] += eps;
            set_param(&mut net, p, plus);
            let lp = objective(&net, &refs, &r, train_seed);
            let mut minus = base.clone();
            minus[idx] -= eps;
            set_param(&mut net, p, minus);
            let lm = objective(&net, &refs, &r, train_seed);
            set_param(&mut net, p, base.clone());
            let fd = ((lp - lm) / (2.0 * f64::from(eps))) as f32;
            let an = analytic[idx];
            assert!(
                (fd - an).abs() <= tol * (1.0 + an.abs()),
                "parameter {} [{idx}]: analytic {an}, numeric {fd}",
                net.parameters()[p].name
            );
        }
    }
    for (i, analytic) in igrads.iter().enumerate() {
        let base = host(&be, &inputs[i]);
        let dims = inputs[i].dims().to_vec();
        let step = (base.len() / samples).max(1);
        for idx in (0..base.len()).step_by(step) {
            let eval = |delta: f32| {
                let mut v = base.clone();
                v[idx] += delta;
                let t = tensor(&be, &dims, v);
                let mut moved: Vec<&Tensor> = refs.clone();
                moved[i] = &t;
                objective(&net, &moved, &r, train_seed)
            };
            let fd = ((eval(eps) - eval(-eps)) / (2.0 * f64::from(eps))) as f32;
            let an = analytic[idx];
            assert!(
                (fd - an).abs() <= tol * (1.0 + an.abs()),
                "input {i} [{idx}]: analytic {an}, numeric {fd}"
            );
        }
    }
}
