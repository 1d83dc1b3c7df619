//! Each layer's backward agrees with the eager tape's gradient of the same
//! computation on the same values (within 1e-6): both are meant to call the
//! one rule per op of `verjus_core::grad`, and these tests fail if either side
//! stops doing so or wires a rule differently (the Linear layer's `dW` and
//! `db` against the tape's `matmul` and broadcast `add`, and so on).

use super::{
    batched, build, pool, Backward, Built, Forward, Inputs, ParamDst, ParamGrads, Params, Stream,
};
use crate::def::{LayerConfig, Pair};
use crate::parameter::Parameter;
use verjus_core::autograd::Var;
use verjus_core::ops::{self, Conv2dParams, Pool2dParams, PoolKind};
use verjus_core::{Backend, BackendRef, DType, Result, Shape, Tensor};

/// How a layer runs: inference, or training with a dropout stream.
#[derive(Clone, Copy)]
enum Mode {
    Infer,
    Train(Stream),
}

/// A layer's or the tape's output and gradients, on the host.
#[derive(Debug)]
struct Outcome {
    y: Vec<f32>,
    dx: Vec<Vec<f32>>,
    dparams: Vec<Vec<f32>>,
}

fn be() -> BackendRef {
    verjus_native::backend()
}

/// Deterministic values in `[-1, 1)` (xorshift).
fn values(n: usize, seed: u64) -> Vec<f32> {
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

fn tensor(be: &dyn Backend, dims: &[usize], seed: u64) -> Tensor {
    let host = Tensor::from_vec(dims.to_vec(), values(dims.iter().product(), seed)).unwrap();
    ops::upload(be, &host).unwrap()
}

fn zeros(be: &dyn Backend, dims: &[usize]) -> Tensor {
    ops::zeros(be, &Shape::new(dims.to_vec()).unwrap(), DType::F32).unwrap()
}

fn host(be: &dyn Backend, t: &Tensor) -> Vec<f32> {
    ops::download(be, t).unwrap().to_vec::<f32>().unwrap()
}

/// The layer of `json` (a layer config) for inputs with these unit shapes.
fn layer(json: &str, units: &[Vec<usize>]) -> Built {
    let config: LayerConfig = serde_json::from_str(json).unwrap();
    build("layer", &config, units).unwrap()
}

/// Forward and backward of `built` on `xs` and `params`, every input
/// wanting a gradient, through planned buffers as the network runs it.
fn run_layer(
    be: &dyn Backend,
    built: &Built,
    xs: &[Tensor],
    params: Vec<Tensor>,
    dy: &Tensor,
    mode: Mode,
) -> Outcome {
    let batch = xs[0].dims()[0];
    let (train, stream) = match mode {
        Mode::Infer => (false, Stream { seed: 0, offset: 0 }),
        Mode::Train(s) => (true, s),
    };
    let ids: Vec<usize> = (0..xs.len()).collect();
    let x = Inputs {
        ids: &ids,
        values: xs,
    };
    let all: Vec<Parameter> = params
        .into_iter()
        .map(|value| Parameter {
            name: "p".into(),
            value,
        })
        .collect();
    let pids: Vec<usize> = (0..all.len()).collect();
    let params = Params::new(&pids, &all);
    let mut scratch: Vec<Tensor> = built
        .layer
        .scratch(&vec![true; xs.len()])
        .iter()
        .map(|s| {
            let mut t = zeros(be, &s.dims(batch));
            ops::fill(be, &mut t, f64::from(s.fill)).unwrap();
            t
        })
        .collect();
    let mut y = zeros(be, &batched(batch, &built.output));
    let forward = Forward {
        x,
        y: &mut y,
        params,
        scratch: &mut scratch,
        train,
        stream,
        seq: None,
        precision: None,
    };
    built.layer.forward(be, forward).unwrap();
    let mut dx: Vec<Option<Tensor>> = xs.iter().map(|x| Some(zeros(be, x.dims()))).collect();
    let mut grads: Vec<Tensor> = all.iter().map(|p| zeros(be, p.value.dims())).collect();
    let dst: Vec<ParamDst> = (0..grads.len()).map(ParamDst::Grad).collect();
    let backward = Backward {
        x,
        y: &y,
        dy,
        dx: &mut dx,
        params,
        dparams: ParamGrads {
            dst: &dst,
            grads: &mut grads,
            edges: &mut [],
        },
        scratch: &mut scratch,
        train,
        stream,
        seq: None,
        precision: None,
    };
    built.layer.backward(be, backward).unwrap();
    Outcome {
        y: host(be, &y),
        dx: dx.iter().flatten().map(|t| host(be, t)).collect(),
        dparams: grads.iter().map(|t| host(be, t)).collect(),
    }
}

/// The tape's output of `f(xs, params)` and the gradients of `sum(y * dy)`.
fn run_tape(
    be: &BackendRef,
    xs: &[Tensor],
    params: &[Tensor],
    dy: &Tensor,
    f: impl Fn(&[Var], &[Var]) -> Result<Var>,
) -> Outcome {
    let leaf = |t: &Tensor| Var::leaf(ops::upload(&**be, t).unwrap(), be.clone()).unwrap();
    let xv: Vec<Var> = xs.iter().map(leaf).collect();
    let pv: Vec<Var> = params.iter().map(leaf).collect();
    let y = f(&xv, &pv).unwrap();
    y.backward_with(ops::upload(&**be, dy).unwrap()).unwrap();
    let grad = |v: &Var| host(&**be, &v.grad().expect("a gradient"));
    Outcome {
        y: host(&**be, &y.value()),
        dx: xv.iter().map(grad).collect(),
        dparams: pv.iter().map(grad).collect(),
    }
}

fn assert_close(what: &str, layer: &[f32], tape: &[f32]) {
    assert_eq!(layer.len(), tape.len(), "{what}: lengths differ");
    for (i, (a, b)) in layer.iter().zip(tape).enumerate() {
        assert!(
            (a - b).abs() <= 1e-6 * (1.0 + a.abs().max(b.abs())),
            "{what}[{i}]: layer {a}, tape {b}"
        );
    }
}

/// Runs `built` and the tape's `f` on the same inputs (batched shapes `dims`),
/// parameters (the layer's, in order) and output gradient, and compares the
/// outputs and every gradient.
fn agree(built: Built, dims: &[&[usize]], mode: Mode, f: impl Fn(&[Var], &[Var]) -> Result<Var>) {
    let be = be();
    let xs: Vec<Tensor> = (0..).zip(dims).map(|(s, d)| tensor(&*be, d, s)).collect();
    let params: Vec<Tensor> = (100..)
        .zip(&built.params)
        .map(|(s, p)| tensor(&*be, &p.shape, s))
        .collect();
    let dy = tensor(&*be, &batched(dims[0][0], &built.output), 7);
    let tape = run_tape(&be, &xs, &params, &dy, f);
    let layer = run_layer(&*be, &built, &xs, params, &dy, mode);
    assert_close("y", &layer.y, &tape.y);
    for (k, (a, b)) in layer.dx.iter().zip(&tape.dx).enumerate() {
        assert_close(&format!("dx{k}"), a, b);
    }
    assert_eq!(layer.dparams.len(), tape.dparams.len());
    for (j, (a, b)) in layer.dparams.iter().zip(&tape.dparams).enumerate() {
        assert_close(&format!("dparam{j}"), a, b);
    }
}

#[test]
fn linear_agrees_with_matmul_and_add() {
    let built = layer(r#"{"type": "Linear", "out_features": 3}"#, &[vec![5]]);
    agree(built, &[&[4, 5]], Mode::Infer, |x, p| {
        x[0].matmul_t(&p[0], false, true)?.add(&p[1])
    });
}

#[test]
fn linear_without_bias_agrees_with_matmul() {
    let json = r#"{"type": "Linear", "out_features": 3, "bias": false}"#;
    agree(layer(json, &[vec![5]]), &[&[4, 5]], Mode::Infer, |x, p| {
        x[0].matmul_t(&p[0], false, true)
    });
}

#[test]
fn linear_over_leading_axes_agrees_with_batched_matmul() {
    let built = layer(r#"{"type": "Linear", "out_features": 4}"#, &[vec![3, 5]]);
    agree(built, &[&[2, 3, 5]], Mode::Infer, |x, p| {
        x[0].matmul_t(&p[0], false, true)?.add(&p[1])
    });
}

#[test]
fn conv2d_agrees() {
    let json = r#"{"type": "Conv2d", "out_channels": 3, "kernel": [3, 2], "stride": [2, 1], "padding": 1}"#;
    let params = Conv2dParams {
        stride: [2, 1],
        padding: [1, 1],
        dilation: [1, 1],
    };
    agree(
        layer(json, &[vec![2, 6, 5]]),
        &[&[2, 2, 6, 5]],
        Mode::Infer,
        |x, p| x[0].conv2d(&p[0], Some(&p[1]), params),
    );
    let json =
        r#"{"type": "Conv2d", "out_channels": 2, "kernel": 3, "dilation": 2, "bias": false}"#;
    let params = Conv2dParams {
        dilation: [2, 2],
        ..Conv2dParams::default()
    };
    agree(
        layer(json, &[vec![1, 7, 7]]),
        &[&[3, 1, 7, 7]],
        Mode::Infer,
        |x, p| x[0].conv2d(&p[0], None, params),
    );
}

#[test]
fn pooling_agrees() {
    let params = Pool2dParams {
        kernel: [3, 2],
        stride: [2, 2],
        padding: [1, 0],
    };
    let settings = r#""kernel": [3, 2], "stride": 2, "padding": [1, 0]"#;
    for (name, kind) in [("MaxPool2d", PoolKind::Max), ("AvgPool2d", PoolKind::Avg)] {
        let json = format!(r#"{{"type": "{name}", {settings}}}"#);
        agree(
            layer(&json, &[vec![2, 5, 6]]),
            &[&[2, 2, 5, 6]],
            Mode::Infer,
            |x, _| x[0].pool2d(kind, params),
        );
    }
}

#[test]
fn relu_folded_into_max_pooling_agrees_with_relu_then_pooling() {
    let two = Pair::Same(2);
    let built = pool::build(
        "layer",
        &[vec![2, 6, 4]],
        PoolKind::Max,
        two,
        None,
        Pair::Same(0),
        true,
    )
    .unwrap();
    agree(built, &[&[2, 2, 6, 4]], Mode::Infer, |x, _| {
        x[0].relu()?.pool2d(PoolKind::Max, Pool2dParams::square(2))
    });
}

#[test]
fn softmax_agrees() {
    let units = [vec![3, 4]];
    agree(
        layer(r#"{"type": "Softmax"}"#, &units),
        &[&[2, 3, 4]],
        Mode::Infer,
        |x, _| x[0].softmax(2),
    );
    agree(
        layer(r#"{"type": "LogSoftmax", "axis": 0}"#, &units),
        &[&[2, 3, 4]],
        Mode::Infer,
        |x, _| x[0].log_softmax(1),
    );
}

#[test]
fn dropout_agrees() {
    let stream = Stream {
        seed: 11,
        offset: 5,
    };
    agree(
        layer(r#"{"type": "Dropout", "p": 0.3}"#, &[vec![40]]),
        &[&[3, 40]],
        Mode::Train(stream),
        |x, _| x[0].dropout(0.3, 11, 5),
    );
}

#[test]
fn activations_agree() {
    type Activation = fn(&Var) -> Result<Var>;
    let cases: [(&str, Activation); 4] = [
        ("ReLU", Var::relu),
        ("Sigmoid", Var::sigmoid),
        ("Tanh", Var::tanh),
        ("GELU", Var::gelu),
    ];
    for (name, op) in cases {
        let json = format!(r#"{{"type": "{name}"}}"#);
        agree(layer(&json, &[vec![9]]), &[&[4, 9]], Mode::Infer, |x, _| {
            op(&x[0])
        });
    }
}

#[test]
fn add_concat_and_reshape_agree() {
    let units = [vec![2, 3], vec![2, 3], vec![2, 3]];
    agree(
        layer(r#"{"type": "Add"}"#, &units),
        &[&[2, 2, 3], &[2, 2, 3], &[2, 2, 3]],
        Mode::Infer,
        |x, _| x[0].add(&x[1])?.add(&x[2]),
    );
    agree(
        layer(
            r#"{"type": "Concat", "axis": 0}"#,
            &[vec![2, 3], vec![1, 3]],
        ),
        &[&[2, 2, 3], &[2, 1, 3]],
        Mode::Infer,
        |x, _| Var::concat(&x[..2], 1),
    );
    agree(
        layer(r#"{"type": "Flatten"}"#, &[vec![2, 3]]),
        &[&[2, 2, 3]],
        Mode::Infer,
        |x, _| x[0].reshape([2, 6]),
    );
}
