//! Mixed precision in the static graph (`Context::set_precision`): a Linear or
//! Conv2d layer's products read their input, weight and (in backward) output
//! gradient rounded to bfloat16 / float16, and accumulate in float32; the bias
//! is added in float32 (its gradient sums the rounded output gradient). Shown against the float32 network run on the rounded values.

use crate::common::{be, build, host, set_param, tensor};
use verjus_core::half::{bf16, f16};
use verjus_core::DType;
use verjus_nn::Network;

const LINEAR: &str = r#"{
    "inputs": [{"name": "x", "shape": [2, 12]}],
    "layers": [{"name": "fc", "type": "Linear", "out_features": 5}],
    "outputs": ["fc"]
}"#;

const CONV: &str = r#"{
    "inputs": [{"name": "x", "shape": [2, 6, 6]}],
    "layers": [{"name": "conv", "type": "Conv2d", "out_channels": 3, "kernel": 3, "padding": 1}],
    "outputs": ["conv"]
}"#;

fn round(dtype: DType, v: &[f32]) -> Vec<f32> {
    v.iter()
        .map(|&x| match dtype {
            DType::BF16 => bf16::from_f32(x).to_f32(),
            _ => f16::from_f32(x).to_f32(),
        })
        .collect()
}

/// Values with more bits than either reduced type keeps.
fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| (((i as u32).wrapping_mul(2_654_435_761) ^ seed) % 10_007) as f32 / 3_001.7 - 1.6)
        .collect()
}

/// The output and every gradient (inputs, then parameters) of one step of `net`.
fn step(
    net: &Network,
    precision: Option<DType>,
    x: &[f32],
    x_dims: &[usize],
    dy: &[f32],
) -> Vec<Vec<f32>> {
    let be = be();
    let mut ctx = net.new_context(&be, x_dims[0]).unwrap();
    ctx.set_precision(precision).unwrap();
    ctx.set_input_grads(true);
    let x = tensor(&be, x_dims, x.to_vec());
    net.compute_output(&be, &mut ctx, &[&x]).unwrap();
    let y = ctx.output(0);
    let dy = tensor(&be, y.dims(), dy.to_vec());
    let mut out = vec![host(&be, y)];
    net.compute_gradients(&be, &mut ctx, &[&dy]).unwrap();
    out.push(host(&be, ctx.input_grad(0).unwrap()));
    out.extend(ctx.param_grads().iter().map(|g| host(&be, g)));
    out
}

fn check(json: &str, x_dims: &[usize]) {
    let net = build(json, 3);
    let n: usize = x_dims.iter().product();
    let x = values(n, 1);
    let y_len = {
        let be = be();
        let mut ctx = net.new_context(&be, x_dims[0]).unwrap();
        net.compute_output(&be, &mut ctx, &[&tensor(&be, x_dims, x.clone())])
            .unwrap();
        ctx.output(0).numel()
    };
    let dy = values(y_len, 2);
    let exact = step(&net, None, &x, x_dims, &dy);
    for dtype in [DType::BF16, DType::F16] {
        let mixed = step(&net, Some(dtype), &x, x_dims, &dy);
        // The float32 network on the rounded weight, input and dy.
        let mut rounded = build(json, 3); // the same weights
        let w = host(&be(), &net.parameters()[0].value);
        set_param(&mut rounded, 0, round(dtype, &w));
        let reference = step(
            &rounded,
            None,
            &round(dtype, &x),
            x_dims,
            &round(dtype, &dy),
        );
        assert_eq!(
            mixed[0],
            step(&rounded, None, &round(dtype, &x), x_dims, &dy)[0]
        );
        assert_eq!(mixed[1..], reference[1..], "{dtype}: gradients");
        assert_ne!(mixed[0], exact[0], "{dtype}: the rounding shows");
    }
    let err = net
        .new_context(&be(), 1)
        .unwrap()
        .set_precision(Some(DType::I32))
        .unwrap_err()
        .to_string();
    assert!(err.contains("bfloat16 or float16, not int32"), "{err}");
}

#[test]
fn linear_products_read_rounded_operands() {
    check(LINEAR, &[3, 2, 12]);
}

#[test]
fn conv2d_reads_rounded_operands() {
    check(CONV, &[2, 2, 6, 6]);
}
