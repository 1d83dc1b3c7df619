//! The `ReLU -> MaxPool2d` fold (pool first, then ReLU on the pooled values)
//! gives the same values and gradients as the layers run one by one.

use crate::common::{be, build, check_gradients, host, rand_tensor, rand_vec, tensor, zeros_like};
use verjus_core::Tensor;

const LAYERS: &str = r#"
    {"name": "conv", "type": "Conv2d", "out_channels": 3, "kernel": 3, "padding": 1},
    {"name": "relu", "type": "ReLU"},
    {"name": "pool", "type": "MaxPool2d", "kernel": 2},
    {"name": "flat", "type": "Flatten"},
    {"name": "fc", "type": "Linear", "in_features": 48, "out_features": 5}
"#;

/// The network above; with `relu_output` the ReLU is also a network output,
/// which keeps it from being folded into the pooling.
fn net(relu_output: bool) -> verjus_nn::Network {
    let outputs = if relu_output {
        r#", "outputs": ["fc", "relu"]"#
    } else {
        ""
    };
    build(
        &format!(
            r#"{{"inputs": [{{"name": "x", "shape": [2, 8, 8]}}], "layers": [{LAYERS}]{outputs}}}"#
        ),
        11,
    )
}

/// Output 0, every parameter gradient and the input gradient for `dy` on output 0.
fn run(net: &verjus_nn::Network, x: &Tensor, dy: &Tensor) -> Vec<Vec<f32>> {
    let be = be();
    let mut ctx = net.new_context(&be, x.dims()[0]).unwrap();
    ctx.set_input_grads(true);
    net.compute_output(&be, &mut ctx, &[x]).unwrap();
    let others: Vec<Tensor> = (1..net.output_shapes().len())
        .map(|i| zeros_like(&be, ctx.output(i)))
        .collect();
    let refs: Vec<&Tensor> = std::iter::once(dy).chain(&others).collect();
    net.compute_gradients(&be, &mut ctx, &refs).unwrap();
    let mut all = vec![host(&be, ctx.output(0))];
    all.extend(ctx.param_grads().iter().map(|g| host(&be, g)));
    all.push(host(&be, ctx.input_grad(0).unwrap()));
    all
}

#[test]
fn folded_relu_and_pool_match_the_layers_run_one_by_one() {
    let x = rand_tensor(&be(), &[4, 2, 8, 8], 3);
    let dy = tensor(&be(), &[4, 5], rand_vec(20, 4));
    let folded = run(&net(false), &x, &dy);
    let separate = run(&net(true), &x, &dy);
    assert_eq!(folded.len(), separate.len());
    for (i, (f, s)) in folded.iter().zip(&separate).enumerate() {
        assert_eq!(
            f, s,
            "result {i} differs between folded and separate ReLU/pool"
        );
    }
}

#[test]
fn folded_relu_and_pool_gradients() {
    // Inputs away from ReLU's kink; the check covers the conv and fc parameters too.
    let x = rand_tensor(&be(), &[2, 2, 8, 8], 5);
    check_gradients(net(false), vec![x], None, 1e-2, 3e-2);
}
