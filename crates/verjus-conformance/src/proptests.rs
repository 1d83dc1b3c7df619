//! Property: no op panics, whatever the shapes.
//!
//! For every op, proptest draws four shapes (rank 0–5, dimensions 0–9), a few
//! small integers (axes, kernel sizes, indices, probabilities) and flags. Half
//! of the draws are *related*: the later operands are derived from the first
//! shape so that the call is usually valid and the backend's kernel runs on
//! degenerate shapes (zero-sized axes, size-1 axes, ranks 0 and 5); the other
//! half use the independent shapes as they are, so the call is usually invalid.
//! The op may return `Ok` or `Err`; a panic fails the property, and proptest
//! shrinks the draw to a minimal failing one.
//!
//! The random stream is fixed (deterministic runner) and the number of cases
//! per op is bounded, so a run is fast and reproducible.

mod lstm;

use crate::checks::{BINARY_OPS, UNARY_OPS};
use crate::inputs::uniform;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRng, TestRunner};
use verjus_core::ops::{
    self, AdamHyper, AxisPlan, BinaryPlan, ConcatPlan, Conv2dParams, Conv2dPlan, Distribution,
    GemmPlan, GemmSpec, PermutePlan, Pool2dParams, Pool2dPlan, PoolKind, ReduceOp, ReducePlan,
    SgdHyper,
};
use verjus_core::{Backend, DType, Result, Shape, Tensor};

/// Cases per op in [`no_panic_on_any_shape`].
pub const CASES_PER_OP: u32 = 64;

/// One random draw; each op interprets it in its own way.
#[derive(Clone, Debug)]
struct Draw {
    /// Four shapes of rank 0–5 with dimensions 0–9.
    shapes: Vec<Vec<usize>>,
    /// Eight integers in 0–11: axes, kernel sizes, counts, indices, choices.
    picks: Vec<usize>,
    /// Six flags: transposes, dtypes, optional operands.
    flags: Vec<bool>,
    /// Derive the later operands from the first shape.
    related: bool,
}

fn draws() -> impl Strategy<Value = Draw> {
    let shape = prop::collection::vec(0usize..10, 0..=5);
    (
        prop::collection::vec(shape, 4),
        prop::collection::vec(0usize..12, 8),
        prop::collection::vec(any::<bool>(), 6),
        any::<bool>(),
    )
        .prop_map(|(shapes, picks, flags, related)| Draw {
            shapes,
            picks,
            flags,
            related,
        })
}

impl Draw {
    fn s(&self, i: usize) -> &[usize] {
        &self.shapes[i]
    }

    /// `valid` when the draw is related and a valid shape exists, else shape `i`.
    fn or(&self, valid: Option<Shape>, i: usize) -> Vec<usize> {
        match valid {
            Some(s) if self.related => s.dims().to_vec(),
            _ => self.shapes[i].clone(),
        }
    }

    /// Shape `i`, or `same` when related.
    fn like(&self, same: &[usize], i: usize) -> Vec<usize> {
        if self.related {
            same.to_vec()
        } else {
            self.shapes[i].clone()
        }
    }

    /// An axis: in range of `rank` when related, raw otherwise.
    fn axis(&self, pick: usize, rank: usize) -> usize {
        if self.related {
            self.picks[pick] % rank.max(1)
        } else {
            self.picks[pick]
        }
    }
}

fn shape(dims: &[usize]) -> Option<Shape> {
    Shape::new(dims.to_vec()).ok()
}

/// A float32 tensor of `dims` with small random values.
fn f32s(be: &dyn Backend, dims: &[usize]) -> Result<Tensor> {
    let a = uniform(dims.iter().sum::<usize>() as u64, dims, -2.0, 2.0);
    ops::upload(be, &Tensor::from_vec(dims.to_vec(), a.data)?)
}

/// A rank-1 integer tensor (int32 when `narrow`).
fn ints(be: &dyn Backend, values: &[i64], narrow: bool) -> Result<Tensor> {
    let host = if narrow {
        Tensor::from_vec(
            [values.len()],
            values.iter().map(|&v| v as i32).collect::<Vec<_>>(),
        )?
    } else {
        Tensor::from_vec([values.len()], values.to_vec())?
    };
    ops::upload(be, &host)
}

/// A zero tensor of `dtype`.
fn typed(be: &dyn Backend, dims: &[usize], dtype: DType) -> Result<Tensor> {
    ops::zeros(be, &Shape::new(dims.to_vec())?, dtype)
}

/// Indices from the picks: in `[0, len)` when related and possible, else in `[-1, 10]`.
fn index_values(d: &Draw, count: usize, len: usize) -> Vec<i64> {
    (0..count)
        .map(|j| {
            let raw = d.picks[(3 + j) % 8] as i64 - 1;
            if d.related && len > 0 {
                raw.rem_euclid(len as i64)
            } else {
                raw
            }
        })
        .collect()
}

type OpFn = fn(&dyn Backend, &Draw) -> Result<()>;

fn gemm(be: &dyn Backend, d: &Draw) -> Result<()> {
    let (ta, tb) = (d.flags[0], d.flags[1]);
    let a = d.s(0).to_vec();
    let b = match a.len() {
        r if d.related && r >= 2 => {
            let k = if ta { a[r - 2] } else { a[r - 1] };
            let n = d.picks[0] % 10;
            let mut b = if d.flags[2] {
                a[..r - 2].to_vec()
            } else {
                Vec::new()
            };
            b.extend(if tb { [n, k] } else { [k, n] });
            b
        }
        _ => d.s(1).to_vec(),
    };
    let spec = GemmSpec {
        trans_a: ta,
        trans_b: tb,
        alpha: 1.0,
        beta: if d.flags[3] { 1.0 } else { 0.0 },
    };
    let valid = shape(&a).zip(shape(&b)).and_then(|(sa, sb)| {
        GemmPlan::new(&sa, &sb, spec)
            .and_then(|p| p.output_shape(&sa, &sb))
            .ok()
    });
    let mut c = f32s(be, &d.or(valid, 2))?;
    ops::gemm(be, &f32s(be, &a)?, &f32s(be, &b)?, &mut c, spec)
}

fn unary(be: &dyn Backend, d: &Draw) -> Result<()> {
    let mut y = f32s(be, &d.like(d.s(0), 1))?;
    ops::unary(
        be,
        UNARY_OPS[d.picks[0] % UNARY_OPS.len()],
        &f32s(be, d.s(0))?,
        &mut y,
    )
}

fn unary_backward(be: &dyn Backend, d: &Draw) -> Result<()> {
    let x = d.s(0);
    let (y, dy) = (f32s(be, &d.like(x, 1))?, f32s(be, &d.like(x, 2))?);
    let mut dx = f32s(be, &d.like(x, 3))?;
    ops::unary_backward(
        be,
        UNARY_OPS[d.picks[0] % UNARY_OPS.len()],
        &f32s(be, x)?,
        &y,
        &dy,
        &mut dx,
    )
}

/// A broadcast partner of `a` (a suffix with some axes set to 1) when related.
fn partner(d: &Draw, a: &[usize]) -> Vec<usize> {
    if !d.related {
        return d.s(1).to_vec();
    }
    let keep = d.picks[1] % (a.len() + 1);
    a[a.len() - keep..]
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            if d.picks[(2 + i) % 8].is_multiple_of(3) {
                1
            } else {
                v
            }
        })
        .collect()
}

fn binary_shapes(d: &Draw) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
    let a = d.s(0).to_vec();
    let b = partner(d, &a);
    let op = BINARY_OPS[d.picks[0] % BINARY_OPS.len()];
    let valid = shape(&a)
        .zip(shape(&b))
        .and_then(|(sa, sb)| BinaryPlan::new(op, &sa, &sb).ok().map(|p| p.out));
    let c = d.or(valid, 2);
    (a, b, c)
}

fn binary(be: &dyn Backend, d: &Draw) -> Result<()> {
    let (a, b, c) = binary_shapes(d);
    let mut tc = f32s(be, &c)?;
    ops::binary(
        be,
        BINARY_OPS[d.picks[0] % BINARY_OPS.len()],
        &f32s(be, &a)?,
        &f32s(be, &b)?,
        &mut tc,
    )
}

fn binary_backward(be: &dyn Backend, d: &Draw) -> Result<()> {
    let (a, b, c) = binary_shapes(d);
    let (mut da, mut db) = (f32s(be, &d.like(&a, 3))?, f32s(be, &b)?);
    let op = BINARY_OPS[d.picks[0] % BINARY_OPS.len()];
    let (da, db) = (d.flags[4].then_some(&mut da), d.flags[5].then_some(&mut db));
    ops::binary_backward(
        be,
        op,
        &f32s(be, &a)?,
        &f32s(be, &b)?,
        &f32s(be, &c)?,
        da,
        db,
    )
}

/// Reduction op, axes and output shape.
fn reduce_parts(d: &Draw) -> (ReduceOp, Vec<usize>, Vec<usize>) {
    let op = [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Min][d.picks[0] % 4];
    let x = d.s(0);
    let axes: Vec<usize> = if d.related {
        (0..x.len())
            .filter(|&i| d.picks[(1 + i) % 8].is_multiple_of(2))
            .collect()
    } else {
        d.picks[1..1 + d.picks[1] % 4].to_vec()
    };
    let valid = shape(x)
        .and_then(|s| ReducePlan::new(op, &s, &axes).ok())
        .map(|p| if d.flags[0] { p.keepdims } else { p.squeezed() });
    (op, axes, d.or(valid, 1))
}

fn reduce(be: &dyn Backend, d: &Draw) -> Result<()> {
    let (op, axes, out) = reduce_parts(d);
    let mut y = f32s(be, &out)?;
    ops::reduce(be, op, &f32s(be, d.s(0))?, &axes, &mut y)
}

fn reduce_backward(be: &dyn Backend, d: &Draw) -> Result<()> {
    let (op, axes, out) = reduce_parts(d);
    let x = d.s(0);
    let mut dx = f32s(be, &d.like(x, 2))?;
    ops::reduce_backward(
        be,
        op,
        &f32s(be, x)?,
        &axes,
        &f32s(be, &out)?,
        &f32s(be, &out)?,
        &mut dx,
    )
}

fn argmax(be: &dyn Backend, d: &Draw) -> Result<()> {
    let x = d.s(0);
    let axis = d.axis(0, x.len());
    let valid = shape(x)
        .and_then(|s| AxisPlan::new("argmax", &s, axis).ok())
        .map(|p| p.squeezed());
    let dtype = if d.flags[1] && !d.related {
        DType::I32
    } else {
        DType::I64
    };
    let mut y = typed(be, &d.or(valid, 1), dtype)?;
    ops::argmax(be, &f32s(be, x)?, axis, &mut y)
}

fn softmax(be: &dyn Backend, d: &Draw) -> Result<()> {
    let x = d.s(0);
    let mut y = f32s(be, &d.like(x, 1))?;
    ops::softmax(be, &f32s(be, x)?, d.axis(0, x.len()), d.flags[0], &mut y)
}

fn softmax_backward(be: &dyn Backend, d: &Draw) -> Result<()> {
    let y = d.s(0);
    let mut dx = f32s(be, &d.like(y, 2))?;
    ops::softmax_backward(
        be,
        &f32s(be, y)?,
        &f32s(be, &d.like(y, 1))?,
        d.axis(0, y.len()),
        d.flags[0],
        &mut dx,
    )
}

/// Convolution parameters and weight shape (kernel sizes 0–3, strides 0–2, ...).
fn conv_parts(d: &Draw) -> (Conv2dParams, Vec<usize>, Option<Shape>) {
    let p = Conv2dParams {
        stride: [d.picks[4] % 3, 1 + d.picks[5] % 2],
        padding: [d.picks[5] % 3, d.picks[6] % 2],
        dilation: [1 + d.picks[6] % 2, d.picks[7] % 3],
    };
    let x = d.s(0);
    let w = if d.related && x.len() == 4 {
        vec![d.picks[0] % 10, x[1], d.picks[1] % 4, d.picks[2] % 4]
    } else {
        d.s(1).to_vec()
    };
    let out = shape(x).zip(shape(&w)).and_then(|(sx, sw)| {
        Conv2dPlan::new(&sx, &sw, p)
            .and_then(|plan| plan.output_shape())
            .ok()
    });
    (p, w, out)
}

fn conv2d(be: &dyn Backend, d: &Draw) -> Result<()> {
    let (p, w, out) = conv_parts(d);
    let bias_dims = if d.related {
        vec![w.first().copied().unwrap_or(0)]
    } else {
        d.s(2).to_vec()
    };
    let bias = f32s(be, &bias_dims)?;
    let mut y = f32s(be, &d.or(out, 3))?;
    ops::conv2d(
        be,
        &f32s(be, d.s(0))?,
        &f32s(be, &w)?,
        d.flags[0].then_some(&bias),
        p,
        &mut y,
    )
}

fn conv2d_backward_data(be: &dyn Backend, d: &Draw) -> Result<()> {
    let (p, w, out) = conv_parts(d);
    let mut dx = f32s(be, d.s(0))?;
    ops::conv2d_backward_data(be, &f32s(be, &d.or(out, 2))?, &f32s(be, &w)?, p, &mut dx)
}

fn conv2d_backward_filter(be: &dyn Backend, d: &Draw) -> Result<()> {
    let (p, w, out) = conv_parts(d);
    let mut dw = f32s(be, &w)?;
    ops::conv2d_backward_filter(
        be,
        &f32s(be, d.s(0))?,
        &f32s(be, &d.or(out, 2))?,
        p,
        &mut dw,
    )
}

fn conv2d_backward_bias(be: &dyn Backend, d: &Draw) -> Result<()> {
    let dy = d.s(0);
    let db = if d.related && dy.len() >= 2 {
        vec![dy[1]]
    } else {
        d.s(1).to_vec()
    };
    let mut tdb = f32s(be, &db)?;
    ops::conv2d_backward_bias(be, &f32s(be, dy)?, &mut tdb)
}

fn pool_parts(d: &Draw) -> (PoolKind, Pool2dParams, Option<Shape>) {
    let kind = if d.flags[0] {
        PoolKind::Max
    } else {
        PoolKind::Avg
    };
    let p = Pool2dParams {
        kernel: [d.picks[0] % 4, d.picks[1] % 4],
        stride: [d.picks[2] % 3, 1 + d.picks[3] % 2],
        padding: [d.picks[4] % 2, d.picks[5] % 3],
    };
    let out = shape(d.s(0)).and_then(|s| {
        Pool2dPlan::new(kind, &s, p)
            .and_then(|plan| plan.output_shape())
            .ok()
    });
    (kind, p, out)
}

fn pool2d(be: &dyn Backend, d: &Draw) -> Result<()> {
    let (kind, p, out) = pool_parts(d);
    let mut y = f32s(be, &d.or(out, 1))?;
    ops::pool2d(be, kind, &f32s(be, d.s(0))?, p, &mut y)
}

fn pool2d_backward(be: &dyn Backend, d: &Draw) -> Result<()> {
    let (kind, p, out) = pool_parts(d);
    let x = d.s(0);
    let (y, dy) = (f32s(be, &d.or(out.clone(), 1))?, f32s(be, &d.or(out, 2))?);
    let mut dx = f32s(be, &d.like(x, 3))?;
    ops::pool2d_backward(be, kind, &f32s(be, x)?, &y, &dy, p, &mut dx)
}

fn dropout_parts(d: &Draw) -> (f32, u64, u64) {
    let p = [0.0, 0.5, 0.99, 1.0, -0.5, f32::NAN][d.picks[0] % 6];
    let seed = if d.flags[0] {
        u64::MAX
    } else {
        d.picks[1] as u64
    };
    let offset = if d.flags[1] {
        u64::MAX - d.picks[2] as u64
    } else {
        d.picks[2] as u64
    };
    (p, seed, offset)
}

fn dropout(be: &dyn Backend, d: &Draw) -> Result<()> {
    let (p, seed, offset) = dropout_parts(d);
    let mut y = f32s(be, &d.like(d.s(0), 1))?;
    ops::dropout(be, &f32s(be, d.s(0))?, p, seed, offset, &mut y)
}

fn dropout_backward(be: &dyn Backend, d: &Draw) -> Result<()> {
    let (p, seed, offset) = dropout_parts(d);
    let mut dx = f32s(be, &d.like(d.s(0), 1))?;
    ops::dropout_backward(be, &f32s(be, d.s(0))?, p, seed, offset, &mut dx)
}

/// Source shape, axis, indices and the selected shape of an index op.
fn index_parts(d: &Draw) -> (Vec<usize>, usize, Vec<i64>, Vec<usize>) {
    let src = d.s(0).to_vec();
    let axis = d.axis(0, src.len());
    let len = src.get(axis).copied().unwrap_or(0);
    let values = index_values(d, d.picks[1] % 6, len);
    let selected = if d.related && axis < src.len() {
        let mut s = src.clone();
        s[axis] = values.len();
        s
    } else {
        d.s(1).to_vec()
    };
    (src, axis, values, selected)
}

fn index_select(be: &dyn Backend, d: &Draw) -> Result<()> {
    let (x, axis, values, selected) = index_parts(d);
    let mut y = f32s(be, &selected)?;
    ops::index_select(
        be,
        &f32s(be, &x)?,
        axis,
        &ints(be, &values, d.flags[0])?,
        &mut y,
    )
}

fn index_add(be: &dyn Backend, d: &Draw) -> Result<()> {
    let (dst, axis, values, selected) = index_parts(d);
    let mut t = f32s(be, &dst)?;
    ops::index_add(
        be,
        &f32s(be, &selected)?,
        axis,
        &ints(be, &values, d.flags[0])?,
        &mut t,
    )
}

/// Part shapes, axis and the whole shape of concat and split.
fn concat_parts(d: &Draw) -> (Vec<Vec<usize>>, usize, Vec<usize>) {
    let count = 1 + d.picks[0] % 3;
    let first = d.s(0).to_vec();
    let axis = d.axis(1, first.len());
    let parts: Vec<Vec<usize>> = (0..count)
        .map(|j| match (d.related, axis < first.len()) {
            (true, true) => {
                let mut p = first.clone();
                p[axis] = d.picks[(2 + j) % 8] % 10;
                p
            }
            _ => d.s(j).to_vec(),
        })
        .collect();
    let shapes: Vec<Shape> = parts.iter().filter_map(|p| shape(p)).collect();
    let refs: Vec<&Shape> = shapes.iter().collect();
    let whole = ConcatPlan::new("concat", &refs, axis).ok().map(|p| p.whole);
    (parts, axis, d.or(whole, 3))
}

fn concat(be: &dyn Backend, d: &Draw) -> Result<()> {
    let (parts, axis, whole) = concat_parts(d);
    let ts = parts
        .iter()
        .map(|p| f32s(be, p))
        .collect::<Result<Vec<_>>>()?;
    let refs: Vec<&Tensor> = ts.iter().collect();
    let mut y = f32s(be, &whole)?;
    ops::concat(be, &refs, axis, &mut y)
}

fn split(be: &dyn Backend, d: &Draw) -> Result<()> {
    let (parts, axis, whole) = concat_parts(d);
    let mut ts = parts
        .iter()
        .map(|p| f32s(be, p))
        .collect::<Result<Vec<_>>>()?;
    let mut refs: Vec<&mut Tensor> = ts.iter_mut().collect();
    ops::split(be, &f32s(be, &whole)?, axis, &mut refs)
}

fn dtype_of(pick: usize) -> DType {
    [DType::F32, DType::I64, DType::I32][pick % 3]
}

fn permute(be: &dyn Backend, d: &Draw) -> Result<()> {
    let x = d.s(0);
    let perm: Vec<usize> = if d.related {
        let mut p: Vec<usize> = (0..x.len()).collect();
        for i in (1..p.len()).rev() {
            p.swap(i, d.picks[i % 8] % (i + 1));
        }
        p
    } else {
        d.picks[..d.picks[0] % 6].to_vec()
    };
    let valid = shape(x)
        .and_then(|s| PermutePlan::new(&s, &perm).ok())
        .map(|p| p.output);
    let dtype = dtype_of(d.picks[7]);
    let y_dtype = if d.related {
        dtype
    } else {
        dtype_of(d.picks[6])
    };
    let mut y = typed(be, &d.or(valid, 1), y_dtype)?;
    ops::permute(be, &typed(be, x, dtype)?, &perm, &mut y)
}

fn copy(be: &dyn Backend, d: &Draw) -> Result<()> {
    let dtype = dtype_of(d.picks[0]);
    let dst_dtype = if d.related {
        dtype
    } else {
        dtype_of(d.picks[1])
    };
    let mut dst = typed(be, &d.like(d.s(0), 1), dst_dtype)?;
    ops::copy(be, &typed(be, d.s(0), dtype)?, &mut dst)
}

fn fill(be: &dyn Backend, d: &Draw) -> Result<()> {
    let value = [0.0, -1.5, 1e30, f64::NAN, f64::INFINITY, -7.0][d.picks[1] % 6];
    let mut dst = typed(be, d.s(0), dtype_of(d.picks[0]))?;
    ops::fill(be, &mut dst, value)
}

fn cast(be: &dyn Backend, d: &Draw) -> Result<()> {
    let src = match dtype_of(d.picks[0]) {
        DType::F32 => f32s(be, d.s(0))?,
        int => typed(be, d.s(0), int)?,
    };
    let mut dst = typed(be, &d.like(d.s(0), 1), dtype_of(d.picks[1]))?;
    ops::cast(be, &src, &mut dst)
}

fn random(be: &dyn Backend, d: &Draw) -> Result<()> {
    let dist = [
        Distribution::Uniform {
            low: -1.0,
            high: 1.0,
        },
        Distribution::Uniform {
            low: 1.0,
            high: -1.0,
        },
        Distribution::Normal {
            mean: 0.0,
            std: 1.0,
        },
        Distribution::Normal {
            mean: 0.0,
            std: -1.0,
        },
        Distribution::Uniform {
            low: f32::NAN,
            high: 0.0,
        },
    ][d.picks[0] % 5];
    let seed = if d.flags[0] {
        u64::MAX
    } else {
        d.picks[1] as u64
    };
    let offset = if d.flags[1] {
        u64::MAX
    } else {
        d.picks[2] as u64
    };
    let mut dst = typed(
        be,
        d.s(0),
        if d.flags[2] && !d.related {
            DType::I64
        } else {
            DType::F32
        },
    )?;
    ops::random(be, &mut dst, dist, seed, offset)
}

fn sgd_update(be: &dyn Backend, d: &Draw) -> Result<()> {
    let hp = SgdHyper {
        lr: 0.1,
        momentum: [0.0, 0.9, -0.5][d.picks[0] % 3],
        dampening: [0.0, 0.1][d.picks[1] % 2],
        nesterov: d.flags[1],
        weight_decay: 0.01,
        grad_scale: 1.0,
        first_step: d.flags[2],
    };
    let p = d.s(0);
    let mut tp = f32s(be, p)?;
    let mut v = f32s(be, &d.like(p, 2))?;
    ops::sgd_update(
        be,
        &hp,
        &mut tp,
        &f32s(be, &d.like(p, 1))?,
        d.flags[0].then_some(&mut v),
    )
}

fn adam_update(be: &dyn Backend, d: &Draw) -> Result<()> {
    let hp = AdamHyper {
        lr: 0.01,
        beta1: [0.9, 1.0, 0.0][d.picks[0] % 3],
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 0.01,
        decoupled: d.flags[0],
        step: d.picks[1] as u64,
        grad_scale: 1.0,
    };
    let p = d.s(0);
    let mut tp = f32s(be, p)?;
    let (mut m, mut v) = (f32s(be, &d.like(p, 2))?, f32s(be, &d.like(p, 3))?);
    ops::adam_update(be, &hp, &mut tp, &f32s(be, &d.like(p, 1))?, &mut m, &mut v)
}

fn softmax_cross_entropy(be: &dyn Backend, d: &Draw) -> Result<()> {
    let logits = if d.related {
        vec![d.picks[0] % 10, d.picks[1] % 10]
    } else {
        d.s(0).to_vec()
    };
    let n = logits.first().copied().unwrap_or(0);
    let classes = logits.get(1).copied().unwrap_or(0);
    let count = if d.related {
        n
    } else {
        d.s(1).first().copied().unwrap_or(0)
    };
    let labels = index_values(d, count, classes);
    let smoothing = [0.0, 0.1, 1.0, -0.5][d.picks[2] % 4];
    let mut losses = f32s(be, &if d.related { vec![n] } else { d.s(2).to_vec() })?;
    let mut grad = f32s(be, &d.like(&logits, 3))?;
    ops::softmax_cross_entropy(
        be,
        &f32s(be, &logits)?,
        &ints(be, &labels, d.flags[0])?,
        smoothing,
        1.0,
        &mut losses,
        d.flags[1].then_some(&mut grad),
    )
}

/// Every op, by name.
const OPS: [(&str, OpFn); 34] = [
    ("gemm", gemm),
    ("unary", unary),
    ("unary_backward", unary_backward),
    ("binary", binary),
    ("binary_backward", binary_backward),
    ("reduce", reduce),
    ("reduce_backward", reduce_backward),
    ("argmax", argmax),
    ("softmax", softmax),
    ("softmax_backward", softmax_backward),
    ("conv2d", conv2d),
    ("conv2d_backward_data", conv2d_backward_data),
    ("conv2d_backward_filter", conv2d_backward_filter),
    ("conv2d_backward_bias", conv2d_backward_bias),
    ("pool2d", pool2d),
    ("pool2d_backward", pool2d_backward),
    ("dropout", dropout),
    ("dropout_backward", dropout_backward),
    ("index_select", index_select),
    ("index_add", index_add),
    ("concat", concat),
    ("split", split),
    ("permute", permute),
    ("copy", copy),
    ("fill", fill),
    ("cast", cast),
    ("random", random),
    ("sgd_update", sgd_update),
    ("adam_update", adam_update),
    ("softmax_cross_entropy", softmax_cross_entropy),
    ("lstm_sequence", lstm::lstm_sequence),
    ("lstm_sequence_backward", lstm::lstm_sequence_backward),
    ("lstm_cell", lstm::lstm_cell),
    ("lstm_cell_backward", lstm::lstm_cell_backward),
];

/// Runs every op on `cases_per_op` random draws; `Err` lists each op that panicked,
/// with the minimal draw proptest shrank it to.
pub fn no_panic_on_any_shape_with(
    be: &dyn Backend,
    cases_per_op: u32,
) -> std::result::Result<(), String> {
    let mut failures = crate::compare::Failures::new();
    for (name, op) in OPS {
        let config = Config {
            cases: cases_per_op,
            failure_persistence: None,
            ..Config::default()
        };
        let mut runner = TestRunner::new_with_rng(
            config.clone(),
            TestRng::deterministic_rng(config.rng_algorithm),
        );
        let outcome = runner.run(&draws(), |draw| {
            // Ok or Err are both fine; only a panic (caught by the runner) fails.
            let _ = op(be, &draw);
            Ok::<(), TestCaseError>(())
        });
        failures.record(outcome.map_err(|e| format!("{name}: {e}")));
    }
    failures.finish()
}

/// [`no_panic_on_any_shape_with`] at [`CASES_PER_OP`] cases per op.
pub fn no_panic_on_any_shape(be: &dyn Backend) -> std::result::Result<(), String> {
    no_panic_on_any_shape_with(be, CASES_PER_OP)
}
