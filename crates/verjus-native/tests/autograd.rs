//! The autograd tape on the native backend: every differentiable `Var` op
//! against central finite differences, plus the graph semantics (fan-out
//! sums, accumulation across calls, `no_grad`, `detach`, errors).

use verjus_core::autograd::{self, no_grad, LstmVars, Var};
use verjus_core::ops::{BinaryOp, Conv2dParams, Pool2dParams, PoolKind, UnaryOp};
use verjus_core::{rng, BackendRef, Error, Result, Tensor};

fn be() -> BackendRef {
    verjus_native::backend()
}

/// Deterministic values uniform in `[lo, hi)`.
fn uniform(seed: u64, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    (0..n)
        .map(|i| lo + (hi - lo) * rng::unit_uniform(rng::word_at(seed, 0, i)))
        .collect()
}

/// Values of magnitude in `[0.3, 1.3)` with random signs: away from the kinks at 0.
fn away_from_zero(seed: u64, n: usize) -> Vec<f32> {
    uniform(seed, n, 0.3, 1.3)
        .into_iter()
        .zip(uniform(seed + 1, n, -1.0, 1.0))
        .map(|(m, s)| if s < 0.0 { -m } else { m })
        .collect()
}

/// Values at least 0.07 apart in a shuffled order: no ties for max and min.
fn distinct(seed: u64, n: usize) -> Vec<f32> {
    let mut order: Vec<(u32, usize)> = (0..n).map(|i| (rng::word_at(seed, 0, i), i)).collect();
    order.sort_unstable();
    let mut v = vec![0.0; n];
    for (rank, (_, i)) in order.into_iter().enumerate() {
        v[i] = 0.07 * rank as f32 - 0.035 * n as f32;
    }
    v
}

fn tensor(dims: &[usize], data: Vec<f32>) -> Tensor {
    Tensor::from_vec(dims.to_vec(), data).unwrap()
}

fn host(v: &Var) -> Vec<f32> {
    v.to_host().unwrap().to_vec::<f32>().unwrap()
}

fn grad_of(v: &Var) -> Vec<f32> {
    v.grad()
        .expect("a gradient")
        .to_vec::<f32>()
        .expect("a host gradient")
}

fn labels(values: Vec<i64>) -> Var {
    Var::constant(Tensor::from_vec([values.len()], values).unwrap(), be()).unwrap()
}

/// An input of a gradient check: dims and values.
type Input = (Vec<usize>, Vec<f32>);

fn input(dims: &[usize], data: Vec<f32>) -> Input {
    (dims.to_vec(), data)
}

/// Checks the tape's gradients of `L = sum(f(inputs) * r)`, for fixed random
/// weights `r` (the seed gradient), against central differences of `L`
/// accumulated in f64.
fn gradcheck(name: &str, inputs: Vec<Input>, f: impl Fn(&[Var]) -> Result<Var>) {
    const EPS: f32 = 5e-3;
    let leaves: Vec<Var> = inputs
        .iter()
        .map(|(d, x)| Var::leaf(tensor(d, x.clone()), be()).unwrap())
        .collect();
    let y = f(&leaves).unwrap_or_else(|e| panic!("{name}: forward failed: {e}"));
    assert!(y.requires_grad(), "{name}: output does not require grad");
    let out_shape = y.shape();
    let r = uniform(99, out_shape.numel(), -1.0, 1.0);
    y.backward_with(tensor(out_shape.dims(), r.clone()))
        .unwrap_or_else(|e| panic!("{name}: backward failed: {e}"));
    let loss = |values: &[Vec<f32>]| -> f64 {
        let _guard = no_grad();
        let vars: Vec<Var> = inputs
            .iter()
            .zip(values)
            .map(|((d, _), x)| Var::leaf(tensor(d, x.clone()), be()).unwrap())
            .collect();
        let y = host(&f(&vars).unwrap());
        y.iter()
            .zip(&r)
            .map(|(&a, &b)| f64::from(a) * f64::from(b))
            .sum()
    };
    let base: Vec<Vec<f32>> = inputs.iter().map(|(_, x)| x.clone()).collect();
    for (k, leaf) in leaves.iter().enumerate() {
        let analytic = leaf
            .grad()
            .map_or_else(|| vec![0.0; base[k].len()], |g| g.to_vec::<f32>().unwrap());
        for i in 0..base[k].len() {
            let mut values = base.clone();
            values[k][i] = base[k][i] + EPS;
            let plus = loss(&values);
            values[k][i] = base[k][i] - EPS;
            let minus = loss(&values);
            let numeric = (plus - minus) / (2.0 * f64::from(EPS));
            let a = f64::from(analytic[i]);
            let tol = 1e-2 * a.abs().max(numeric.abs()).max(0.1);
            assert!(
                (a - numeric).abs() <= tol,
                "{name}: d/d input {k}[{i}]: tape {a}, finite difference {numeric}"
            );
        }
    }
}

#[test]
fn binary_ops_with_broadcasting() {
    let a = input(&[2, 3], away_from_zero(1, 6));
    for (name, op) in [
        ("add", BinaryOp::Add),
        ("sub", BinaryOp::Sub),
        ("mul", BinaryOp::Mul),
        ("div", BinaryOp::Div),
    ] {
        for b_dims in [&[2, 3][..], &[3], &[2, 1]] {
            let n = b_dims.iter().product();
            let b = input(b_dims, away_from_zero(2, n));
            gradcheck(name, vec![a.clone(), b], |v| v[0].binary(op, &v[1]));
        }
    }
    let base = away_from_zero(3, 6);
    let gap = uniform(4, 6, 0.1, 0.5);
    let above: Vec<f32> = base.iter().zip(&gap).map(|(x, g)| x + g).collect();
    let below: Vec<f32> = base.iter().zip(&gap).map(|(x, g)| x - g).collect();
    for other in [above, below] {
        let (x, y) = (input(&[2, 3], base.clone()), input(&[2, 3], other));
        gradcheck("maximum", vec![x.clone(), y.clone()], |v| {
            v[0].maximum(&v[1])
        });
        gradcheck("minimum", vec![x, y], |v| v[0].minimum(&v[1]));
    }
    gradcheck(
        "maximum broadcast",
        vec![a.clone(), input(&[1], vec![0.0])],
        |v| v[0].maximum(&v[1]),
    );
    gradcheck(
        "pow",
        vec![
            input(&[2, 3], uniform(5, 6, 0.5, 1.5)),
            input(&[3], uniform(6, 3, -1.0, 1.0)),
        ],
        |v| v[0].pow(&v[1]),
    );
    gradcheck("named methods", vec![a.clone(), a], |v| {
        v[0].add(&v[1])?.mul(&v[0])?.sub(&v[1])?.div(&v[1])
    });
}

#[test]
fn unary_ops() {
    let general = input(&[2, 3], uniform(7, 6, -1.5, 1.5));
    let kinked = input(&[2, 3], away_from_zero(8, 6));
    let positive = input(&[2, 3], uniform(9, 6, 0.3, 1.5));
    let cases: &[(UnaryOp, &Input)] = &[
        (UnaryOp::Neg, &general),
        (UnaryOp::Exp, &general),
        (UnaryOp::Log, &positive),
        (UnaryOp::Sqrt, &positive),
        (UnaryOp::Rsqrt, &positive),
        (UnaryOp::Abs, &kinked),
        (UnaryOp::Square, &general),
        (UnaryOp::Recip, &kinked),
        (UnaryOp::Relu, &kinked),
        (UnaryOp::Sigmoid, &general),
        (UnaryOp::Tanh, &general),
        (UnaryOp::Gelu, &general),
        (UnaryOp::Scale(-2.5), &general),
        (UnaryOp::AddScalar(0.75), &general),
        (UnaryOp::Powf(1.7), &positive),
        (UnaryOp::Powf(-0.5), &positive),
    ];
    for (op, x) in cases {
        gradcheck(op.name(), vec![(*x).clone()], |v| v[0].unary(*op));
    }
    gradcheck("named methods", vec![positive], |v| {
        let x = &v[0];
        x.relu()?
            .sigmoid()?
            .add(&x.tanh()?)?
            .add(&x.gelu()?)?
            .add(&x.exp()?.log()?)?
            .add(&x.sqrt()?.mul(&x.rsqrt()?)?)?
            .add(&x.abs()?.square()?.recip()?)?
            .add(&x.powf(2.0)?.neg()?.scale(0.5)?.add_scalar(1.0)?)
    });
}

#[test]
fn matmul_with_batches_and_transposes() {
    let (batch, m, k, n) = (2, 2, 3, 4);
    for a_batched in [false, true] {
        for b_batched in [false, true] {
            for trans_a in [false, true] {
                for trans_b in [false, true] {
                    let mut a_dims = if trans_a { vec![k, m] } else { vec![m, k] };
                    let mut b_dims = if trans_b { vec![n, k] } else { vec![k, n] };
                    if a_batched {
                        a_dims.insert(0, batch);
                    }
                    if b_batched {
                        b_dims.insert(0, batch);
                    }
                    let a = input(&a_dims, uniform(10, a_dims.iter().product(), -1.0, 1.0));
                    let b = input(&b_dims, uniform(11, b_dims.iter().product(), -1.0, 1.0));
                    let name = format!("matmul {a_dims:?}{trans_a} @ {b_dims:?}{trans_b}");
                    gradcheck(&name, vec![a, b], |v| {
                        v[0].matmul_t(&v[1], trans_a, trans_b)
                    });
                }
            }
        }
    }
    let a = input(&[3, 2, 3], uniform(12, 18, -1.0, 1.0));
    let w = input(&[3, 4], uniform(13, 12, -1.0, 1.0));
    gradcheck("matmul", vec![a, w], |v| v[0].matmul(&v[1]));
}

#[test]
fn reductions() {
    let x = input(&[2, 3, 4], distinct(14, 24));
    for keepdims in [false, true] {
        for axes in [&[1][..], &[0, 2], &[0, 1, 2]] {
            gradcheck("sum", vec![x.clone()], |v| v[0].sum(axes, keepdims));
            gradcheck("mean", vec![x.clone()], |v| v[0].mean(axes, keepdims));
            gradcheck("max", vec![x.clone()], |v| v[0].max(axes, keepdims));
            gradcheck("min", vec![x.clone()], |v| v[0].min(axes, keepdims));
        }
    }
    gradcheck("sum_all", vec![x.clone()], |v| v[0].sum_all());
    gradcheck("mean_all", vec![x], |v| v[0].mean_all());
}

#[test]
fn softmax_and_log_softmax() {
    let x = input(&[2, 3, 4], uniform(15, 24, -2.0, 2.0));
    for axis in [1, 2] {
        gradcheck("softmax", vec![x.clone()], |v| v[0].softmax(axis));
        gradcheck("log_softmax", vec![x.clone()], |v| v[0].log_softmax(axis));
    }
}

#[test]
fn conv2d_with_and_without_bias() {
    let x = input(&[2, 2, 5, 5], uniform(16, 100, -1.0, 1.0));
    let w = input(&[3, 2, 3, 3], uniform(17, 54, -1.0, 1.0));
    let b = input(&[3], uniform(18, 3, -1.0, 1.0));
    let padded = Conv2dParams {
        padding: [1, 1],
        ..Conv2dParams::default()
    };
    gradcheck("conv2d + bias", vec![x.clone(), w.clone(), b], |v| {
        v[0].conv2d(&v[1], Some(&v[2]), padded)
    });
    let strided = Conv2dParams {
        stride: [2, 1],
        padding: [0, 1],
        dilation: [1, 2],
    };
    gradcheck("conv2d strided", vec![x, w], |v| {
        v[0].conv2d(&v[1], None, strided)
    });
}

#[test]
fn pooling() {
    let x = input(&[2, 2, 4, 4], distinct(19, 64));
    gradcheck("max_pool2d", vec![x.clone()], |v| {
        v[0].pool2d(PoolKind::Max, Pool2dParams::square(2))
    });
    let overlapping = Pool2dParams {
        kernel: [3, 3],
        stride: [2, 2],
        padding: [1, 1],
    };
    gradcheck("max_pool2d padded", vec![x.clone()], |v| {
        v[0].pool2d(PoolKind::Max, overlapping)
    });
    gradcheck("avg_pool2d", vec![x.clone()], |v| {
        v[0].pool2d(PoolKind::Avg, Pool2dParams::square(2))
    });
    gradcheck("avg_pool2d padded", vec![x], |v| {
        v[0].pool2d(PoolKind::Avg, overlapping)
    });
}

#[test]
fn dropout_reuses_its_mask() {
    let x = input(&[4, 8], away_from_zero(20, 32));
    gradcheck("dropout", vec![x.clone()], |v| v[0].dropout(0.3, 7, 5));
    let leaf = Var::leaf(tensor(&x.0, x.1), be()).unwrap();
    let y = leaf.dropout(0.3, 7, 5).unwrap();
    y.sum_all().unwrap().backward().unwrap();
    let (y, g) = (host(&y), grad_of(&leaf));
    assert!(y.contains(&0.0) && y.iter().any(|&v| v != 0.0));
    for (y, g) in y.iter().zip(&g) {
        assert_eq!(*y == 0.0, *g == 0.0, "mask of the gradient differs");
    }
}

#[test]
fn select_sums_each_branch_over_its_broadcast_axes() {
    let cond = || {
        let mask = (0..24).map(|i| f32::from(i % 3 != 1)).collect();
        Var::constant(tensor(&[2, 3, 4], mask), be()).unwrap()
    };
    let x = input(&[3, 1], away_from_zero(20, 3));
    let y = input(&[4], away_from_zero(21, 4));
    gradcheck("select [3, 1] / [4]", vec![x, y.clone()], |v| {
        Var::select(&cond(), &v[0], &v[1])
    });
    let full = input(&[2, 3, 4], away_from_zero(22, 24));
    gradcheck("select [2, 3, 4] / [4]", vec![full, y], |v| {
        Var::select(&cond(), &v[0], &v[1])
    });
}

#[test]
fn index_select_adds_up_repeated_indices() {
    let x = input(&[4, 3], uniform(21, 12, -1.0, 1.0));
    gradcheck("index_select axis 0", vec![x.clone()], |v| {
        v[0].index_select(0, &labels(vec![2, 0, 2, 3, 2]))
    });
    gradcheck("index_select axis 1", vec![x], |v| {
        v[0].index_select(1, &labels(vec![1, 1]))
    });
}

#[test]
fn shape_ops() {
    let x = input(&[2, 3, 4], uniform(22, 24, -1.0, 1.0));
    gradcheck("reshape", vec![x.clone()], |v| v[0].reshape([6, 4]));
    gradcheck("permute", vec![x.clone()], |v| v[0].permute(&[2, 0, 1]));
    let y = input(&[2, 1, 4], uniform(23, 8, -1.0, 1.0));
    gradcheck("concat", vec![x.clone(), y], |v| {
        Var::concat(&[v[1].clone(), v[0].clone(), v[1].clone()], 1)
    });
    gradcheck("split", vec![x], |v| {
        let parts = v[0].split(1, &[1, 2, 0])?;
        Var::concat(&[parts[1].square()?, parts[2].clone(), parts[0].clone()], 1)
    });
}

#[test]
fn softmax_cross_entropy_scales_rows_by_their_gradient() {
    let logits = input(&[3, 4], uniform(24, 12, -2.0, 2.0));
    for smoothing in [0.0, 0.1] {
        gradcheck("softmax_cross_entropy", vec![logits.clone()], |v| {
            v[0].softmax_cross_entropy(&labels(vec![1, 0, 3]), smoothing)
        });
    }
}

#[test]
fn a_small_network() {
    let x = input(&[5, 3], uniform(25, 15, -1.0, 1.0));
    let w1 = input(&[3, 4], uniform(26, 12, -1.0, 1.0));
    let b1 = input(&[4], uniform(27, 4, -1.0, 1.0));
    let w2 = input(&[4, 2], uniform(28, 8, -1.0, 1.0));
    gradcheck("mlp", vec![x, w1, b1, w2], |v| {
        v[0].matmul(&v[1])?
            .add(&v[2])?
            .tanh()?
            .matmul(&v[3])?
            .softmax_cross_entropy(&labels(vec![0, 1, 1, 0, 1]), 0.0)?
            .mean_all()
    });
}

/// The operands of an LSTM with `T = t` (0 for a step), `B = b`, `F = f`,
/// `H = h`: `x, h0, c0, w_ih, w_hh, b_ih, b_hh`.
fn lstm_inputs(seed: u64, t: usize, b: usize, f: usize, h: usize) -> Vec<Input> {
    let x_dims = if t == 0 { vec![b, f] } else { vec![t, b, f] };
    let n = x_dims.iter().product();
    vec![
        input(&x_dims, uniform(seed, n, -1.0, 1.0)),
        input(&[b, h], uniform(seed + 1, b * h, -1.0, 1.0)),
        input(&[b, h], uniform(seed + 2, b * h, -1.0, 1.0)),
        input(&[4 * h, f], uniform(seed + 3, 4 * h * f, -0.6, 0.6)),
        input(&[4 * h, h], uniform(seed + 4, 4 * h * h, -0.6, 0.6)),
        input(&[4 * h], uniform(seed + 5, 4 * h, -0.6, 0.6)),
        input(&[4 * h], uniform(seed + 6, 4 * h, -0.6, 0.6)),
    ]
}

/// The tape's LSTM operands from `lstm_inputs`' leaves, with `x` replaced.
fn lstm_vars<'a>(v: &'a [Var], x: &'a Var, lengths: Option<&'a Var>) -> LstmVars<'a> {
    LstmVars {
        x,
        lengths,
        h0: Some(&v[1]),
        c0: Some(&v[2]),
        w_ih: &v[3],
        w_hh: &v[4],
        b_ih: Some(&v[5]),
        b_hh: Some(&v[6]),
    }
}

fn flat(v: &Var) -> Result<Var> {
    v.reshape([v.shape().numel()])
}

#[test]
fn lstm_sequence_with_lengths_through_all_outputs() {
    let (t, b, h) = (4, 4, 2);
    let lengths = Tensor::from_vec([b], vec![3i32, 0, 4, 1]).unwrap();
    let lengths = Var::constant(lengths, be()).unwrap();
    // y, h_n and c_n together, h_n and c_n also multiplied: the node gets all
    // three output gradients, one of them summed over two uses.
    gradcheck("lstm_sequence", lstm_inputs(40, t, b, 3, h), |v| {
        let (y, h_n, c_n) = Var::lstm_sequence(&lstm_vars(v, &v[0], Some(&lengths)))?;
        Var::concat(&[flat(&y)?, flat(&h_n.mul(&c_n)?)?, flat(&c_n)?], 0)
    });
    // One output alone: the others' gradients never arrive.
    gradcheck(
        "lstm_sequence c_n alone",
        lstm_inputs(41, 3, 2, 2, 3),
        |v| {
            let (_, _, c_n) = Var::lstm_sequence(&lstm_vars(v, &v[0], None))?;
            Ok(c_n)
        },
    );
}

#[test]
fn lstm_cells_chained_through_the_tape() {
    // Two steps on the same weights, the second from the first's state:
    // multi-output nodes feeding a multi-output node.
    gradcheck("two lstm_cell steps", lstm_inputs(42, 0, 3, 2, 3), |v| {
        let (h1, c1) = Var::lstm_cell(&lstm_vars(v, &v[0], None))?;
        let x2 = v[0].scale(-0.5)?;
        let (h2, c2) = Var::lstm_cell(&LstmVars {
            h0: Some(&h1),
            c0: Some(&c1),
            ..lstm_vars(v, &x2, None)
        })?;
        Var::concat(&[h2, c2.mul(&h1)?], 1)
    });
}

#[test]
fn grad_of_one_lstm_output() {
    // L = sum(2 h_n) + sum(c_n): the gradients of the outputs themselves.
    let inputs = lstm_inputs(43, 2, 2, 2, 3);
    let vars: Vec<Var> = inputs.iter().map(|(d, x)| leaf(d, x.clone())).collect();
    let (y, h_n, c_n) = Var::lstm_sequence(&lstm_vars(&vars, &vars[0], None)).unwrap();
    let l = h_n
        .scale(2.0)
        .unwrap()
        .add(&c_n)
        .unwrap()
        .sum_all()
        .unwrap();
    let g = autograd::grad(&[l], &[h_n, c_n, y]).unwrap();
    let values = |g: &Option<Tensor>| g.as_ref().map(|t| t.to_vec::<f32>().unwrap());
    assert_eq!(values(&g[0]), Some(vec![2.0; 6]));
    assert_eq!(values(&g[1]), Some(vec![1.0; 6]));
    assert_eq!(values(&g[2]), None, "y does not influence the loss");
}

fn leaf(dims: &[usize], data: Vec<f32>) -> Var {
    Var::leaf(tensor(dims, data), be()).unwrap()
}

#[test]
fn fan_out_sums_gradients() {
    // y = x*x + x, used twice: z = sum(y + 2y) = 3 sum(y); dz/dx = 3 (2x + 1).
    let xs = vec![-1.0, 0.5, 2.0];
    let x = leaf(&[3], xs.clone());
    let y = x.mul(&x).unwrap().add(&x).unwrap();
    let z = y.add(&y.scale(2.0).unwrap()).unwrap().sum_all().unwrap();
    z.backward().unwrap();
    let expected: Vec<f32> = xs.iter().map(|x| 3.0 * (2.0 * x + 1.0)).collect();
    assert_eq!(grad_of(&x), expected);
}

#[test]
fn shared_weight_sums_over_its_uses() {
    // L = sum(a @ w) + sum(b @ w): dL/dw[i, j] = sum_r a[r, i] + sum_r b[r, i].
    let (av, bv) = (uniform(30, 6, -1.0, 1.0), uniform(31, 12, -1.0, 1.0));
    let a = Var::constant(tensor(&[2, 3], av.clone()), be()).unwrap();
    let b = Var::constant(tensor(&[4, 3], bv.clone()), be()).unwrap();
    let w = leaf(&[3, 2], uniform(32, 6, -1.0, 1.0));
    let l = a
        .matmul(&w)
        .unwrap()
        .sum_all()
        .unwrap()
        .add(&b.matmul(&w).unwrap().sum_all().unwrap())
        .unwrap();
    l.backward().unwrap();
    let g = grad_of(&w);
    for i in 0..3 {
        let col =
            (0..2).map(|r| av[r * 3 + i]).sum::<f32>() + (0..4).map(|r| bv[r * 3 + i]).sum::<f32>();
        for j in 0..2 {
            assert!((g[i * 2 + j] - col).abs() < 1e-5, "{g:?}");
        }
    }
}

#[test]
fn gradients_accumulate_over_backward_calls() {
    let x = leaf(&[2], vec![1.5, -2.0]);
    let loss = x.square().unwrap().sum_all().unwrap();
    loss.backward().unwrap();
    loss.backward().unwrap();
    assert_eq!(grad_of(&x), [6.0, -8.0]);
    let again = x.scale(3.0).unwrap().sum_all().unwrap();
    again.backward().unwrap();
    assert_eq!(grad_of(&x), [9.0, -5.0]);
    x.zero_grad();
    assert!(x.grad().is_none());
}

#[test]
fn no_grad_records_nothing() {
    let x = leaf(&[2], vec![1.0, 2.0]);
    let y = {
        let _guard = no_grad();
        x.mul(&x).unwrap().sum_all().unwrap()
    };
    assert!(!y.requires_grad() && y.is_leaf() && y.op_name().is_none());
    assert!(matches!(y.backward(), Err(Error::Autograd(_))));
    let z = x.mul(&x).unwrap();
    assert!(z.requires_grad() && z.op_name() == Some("mul"));
}

#[test]
fn detach_stops_the_gradient() {
    let x = leaf(&[2], vec![1.0, -3.0]);
    let y = x.detach().mul(&x).unwrap().sum_all().unwrap();
    y.backward().unwrap();
    assert_eq!(grad_of(&x), [1.0, -3.0]);
}

#[test]
fn backward_of_a_non_scalar_needs_a_seed() {
    let x = leaf(&[3], vec![1.0, 2.0, 3.0]);
    let y = x.scale(2.0).unwrap();
    let err = y.backward().unwrap_err();
    assert!(matches!(err, Error::Autograd(_)), "{err}");
    y.backward_with(tensor(&[3], vec![1.0, 0.0, -1.0])).unwrap();
    assert_eq!(grad_of(&x), [2.0, 0.0, -2.0]);
}

#[test]
fn op_errors_are_errors() {
    let a = leaf(&[2, 3], vec![0.0; 6]);
    let b = leaf(&[4], vec![0.0; 4]);
    assert!(matches!(a.add(&b), Err(Error::ShapeMismatch { .. })));
    assert!(matches!(a.matmul(&a), Err(Error::ShapeMismatch { .. })));
    assert!(a.sum(&[2], false).is_err());
    assert!(a.reshape([4, 2]).is_err());
    assert!(Var::concat(&[], 0).is_err());
}

#[test]
fn comparisons_are_constants() {
    let a = leaf(&[3], vec![1.0, 2.0, 3.0]);
    let b = leaf(&[1], vec![2.0]);
    let c = a.binary(BinaryOp::Gt, &b).unwrap();
    assert!(!c.requires_grad());
    assert_eq!(host(&c), [0.0, 0.0, 1.0]);
}

#[test]
fn grad_leaves_the_slots_alone() {
    let x = leaf(&[2], vec![1.0, 2.0]);
    let h = x.square().unwrap();
    let y = h.sum_all().unwrap();
    let g = autograd::grad(&[y], &[x.clone(), h]).unwrap();
    assert_eq!(g[0].as_ref().unwrap().to_vec::<f32>().unwrap(), [2.0, 4.0]);
    assert_eq!(g[1].as_ref().unwrap().to_vec::<f32>().unwrap(), [1.0, 1.0]);
    assert!(x.grad().is_none());
}

#[test]
fn graphs_on_several_threads() {
    let w = leaf(&[2, 2], vec![1.0, 2.0, 3.0, 4.0]);
    std::thread::scope(|s| {
        for t in 0..2 {
            let w = w.clone();
            s.spawn(move || {
                let x = Var::constant(tensor(&[1, 2], vec![t as f32, 1.0]), be()).unwrap();
                x.matmul(&w).unwrap().sum_all().unwrap().backward().unwrap();
            });
        }
    });
    // Inputs [0, 1] and [1, 1]: dL/dw[i, j] = x[i] summed over both threads.
    assert_eq!(grad_of(&w), [1.0, 1.0, 2.0, 2.0]);
}
