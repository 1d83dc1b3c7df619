//! Elementwise unary ops and broadcasting binary ops, with their gradients.
//!
//! The formulas come from the op table in verjus-core
//! (`verjus_core::ops::elementwise::table`): each loop here is a
//! [`UnaryVisitor`] / [`BinaryVisitor`], which `op.specialise(...)` runs with the
//! op's kernel type, so the loop is compiled once per op with that formula
//! inlined (a straight loop the compiler vectorises, no `match` per element),
//! and an op added to the table needs nothing here. Unary loops use the
//! table's vectorisable `fast` formulas and are compiled for the CPU's vector
//! width by [`simd`]. ReLU's backward has its own loop that reads `y` instead
//! of `x` (see [`relu_backward`]). Broadcasting walks runs ([`Broadcast`]).

use crate::broadcast::{zip_grad, zip_with, Broadcast};
use crate::parallel::{for_rows, for_rows2};
use crate::reduce;
use crate::simd::simd;
use verjus_core::ops::{
    BinaryKernel, BinaryOp, BinaryPlan, BinaryVisitor, ReduceOp, ReducePlan, UnaryKernel, UnaryOp,
    UnaryVisitor,
};
use verjus_core::{Result, Tensor};

/// `y = op(x)`.
pub(crate) fn unary(op: UnaryOp, x: &Tensor, y: &mut Tensor) -> Result<()> {
    let x = x.as_slice::<f32>()?;
    let y = y.as_mut_slice::<f32>()?;
    op.specialise(UnaryLoop {
        x,
        y,
        cost: op.cost(),
    });
    Ok(())
}

/// The forward loop of a unary op.
struct UnaryLoop<'a> {
    x: &'a [f32],
    y: &'a mut [f32],
    cost: usize,
}

impl UnaryVisitor for UnaryLoop<'_> {
    type Output = ();

    fn visit<K: UnaryKernel>(self, k: K) {
        let x = self.x;
        for_rows(self.y, 1, self.cost, |start, out| {
            let x = &x[start..start + out.len()];
            simd(
                #[inline(always)]
                || {
                    for (o, &v) in out.iter_mut().zip(x) {
                        *o = k.apply_fast(v);
                    }
                },
            );
        });
    }
}

/// `dx = dy * op'(x, y)`.
pub(crate) fn unary_backward(
    op: UnaryOp,
    x: &Tensor,
    y: &Tensor,
    dy: &Tensor,
    dx: &mut Tensor,
) -> Result<()> {
    let (x, y, dy) = (
        x.as_slice::<f32>()?,
        y.as_slice::<f32>()?,
        dy.as_slice::<f32>()?,
    );
    let dx = dx.as_mut_slice::<f32>()?;
    if op == UnaryOp::Relu {
        relu_backward(y, dy, dx);
        return Ok(());
    }
    op.specialise(UnaryGradLoop {
        x,
        y,
        dy,
        dx,
        cost: op.cost(),
    });
    Ok(())
}

/// The backward loop of a unary op.
struct UnaryGradLoop<'a> {
    x: &'a [f32],
    y: &'a [f32],
    dy: &'a [f32],
    dx: &'a mut [f32],
    cost: usize,
}

impl UnaryVisitor for UnaryGradLoop<'_> {
    type Output = ();

    fn visit<K: UnaryKernel>(self, k: K) {
        let (x, y, dy) = (self.x, self.y, self.dy);
        for_rows(self.dx, 1, self.cost, |start, out| {
            let r = start..start + out.len();
            let inputs = x[r.clone()].iter().zip(&y[r.clone()]).zip(&dy[r]);
            simd(
                #[inline(always)]
                || {
                    for (o, ((&xv, &yv), &g)) in out.iter_mut().zip(inputs) {
                        *o = g * k.derivative_fast(xv, yv);
                    }
                },
            );
        });
    }
}

/// `dx = dy * relu'(x)` read from `y` alone: `y > 0` exactly where `x > 0`
/// (`max(x, 0)` is 0 for NaN, and `NaN > 0` is false), so the input need not be
/// streamed in. ReLU backward is bandwidth-bound on large activations, and one
/// input stream fewer is a quarter less traffic.
fn relu_backward(y: &[f32], dy: &[f32], dx: &mut [f32]) {
    for_rows(dx, 1, 1, |start, out| {
        let r = start..start + out.len();
        simd(
            #[inline(always)]
            || {
                for (o, (&yv, &g)) in out.iter_mut().zip(y[r.clone()].iter().zip(&dy[r])) {
                    *o = g * if yv > 0.0 { 1.0 } else { 0.0 };
                }
            },
        );
    });
}

/// `c = a op b` with broadcasting.
pub(crate) fn binary(plan: &BinaryPlan, a: &Tensor, b: &Tensor, c: &mut Tensor) -> Result<()> {
    let (a, b) = (a.as_slice::<f32>()?, b.as_slice::<f32>()?);
    let c = c.as_mut_slice::<f32>()?;
    let bc = Broadcast::new(plan.out.dims(), &plan.a_strides, &plan.b_strides);
    plan.op.specialise(BinaryLoop {
        bc: &bc,
        a,
        b,
        c,
        cost: plan.op.cost(),
    });
    Ok(())
}

/// The forward loop of a binary op.
struct BinaryLoop<'a> {
    bc: &'a Broadcast,
    a: &'a [f32],
    b: &'a [f32],
    c: &'a mut [f32],
    cost: usize,
}

impl BinaryVisitor for BinaryLoop<'_> {
    type Output = ();

    fn visit<K: BinaryKernel>(self, k: K) {
        let (bc, a, b) = (self.bc, self.a, self.b);
        for_rows(self.c, 1, self.cost, |start, out| {
            bc.runs(a, b, start, start + out.len(), |r, ra, rb| {
                zip_with(&mut out[r.start - start..r.end - start], ra, rb, |x, y| {
                    k.apply(x, y)
                });
            });
        });
    }
}

/// Gradients of `c = a op b`: `da`, `db` = `dy` times the partial, summed over
/// the axes along which that operand was broadcast.
pub(crate) fn binary_backward(
    plan: &BinaryPlan,
    a: &Tensor,
    b: &Tensor,
    dy: &Tensor,
    da: Option<&mut Tensor>,
    db: Option<&mut Tensor>,
) -> Result<()> {
    let (a, b, dy) = (
        a.as_slice::<f32>()?,
        b.as_slice::<f32>()?,
        dy.as_slice::<f32>()?,
    );
    let bc = Broadcast::new(plan.out.dims(), &plan.a_strides, &plan.b_strides);
    let ctx = GradCtx {
        plan,
        bc: &bc,
        a,
        b,
        dy,
        cost: plan.op.cost(),
    };
    plan.op.specialise(BinaryGradLoop { ctx, da, db })
}

/// The backward loop of a binary op: both gradients in one pass when neither
/// operand was broadcast, otherwise each on its own.
struct BinaryGradLoop<'a, 't> {
    ctx: GradCtx<'a>,
    da: Option<&'t mut Tensor>,
    db: Option<&'t mut Tensor>,
}

impl BinaryVisitor for BinaryGradLoop<'_, '_> {
    type Output = Result<()>;

    fn visit<K: BinaryKernel>(self, k: K) -> Result<()> {
        let ctx = &self.ctx;
        let numel = ctx.plan.out.numel();
        let (a_full, b_full) = (ctx.plan.a.numel() == numel, ctx.plan.b.numel() == numel);
        match (self.da, self.db) {
            (Some(da), Some(db)) if a_full && b_full => {
                let (a, b, dy) = (ctx.a, ctx.b, ctx.dy);
                let (da, db) = (da.as_mut_slice::<f32>()?, db.as_mut_slice::<f32>()?);
                for_rows2(da, 1, db, 1, ctx.cost, |start, ra, rb| {
                    let r = start..start + ra.len();
                    let inputs = dy[r.clone()].iter().zip(&a[r.clone()]).zip(&b[r]);
                    for ((oa, ob), ((&g, &x), &y)) in ra.iter_mut().zip(rb).zip(inputs) {
                        let (p, q) = k.partials(x, y);
                        (*oa, *ob) = (g * p, g * q);
                    }
                });
            }
            (da, db) => {
                if let Some(da) = da {
                    let pa = move |x, y| k.partials(x, y).0;
                    ctx.operand_grad(&ctx.plan.a_strides, a_full, da, pa)?;
                }
                if let Some(db) = db {
                    let pb = move |x, y| k.partials(x, y).1;
                    ctx.operand_grad(&ctx.plan.b_strides, b_full, db, pb)?;
                }
            }
        }
        Ok(())
    }
}

/// The inputs of a binary backward, shared by the two operands' gradients.
struct GradCtx<'a> {
    plan: &'a BinaryPlan,
    bc: &'a Broadcast,
    a: &'a [f32],
    b: &'a [f32],
    dy: &'a [f32],
    cost: usize,
}

impl GradCtx<'_> {
    /// `out = dy * partial(a, b)` over the whole output shape.
    fn full_grad(&self, out: &mut [f32], partial: impl Fn(f32, f32) -> f32 + Sync + Send) {
        let (bc, a, b, dy) = (self.bc, self.a, self.b, self.dy);
        for_rows(out, 1, self.cost, |start, out| {
            bc.runs(a, b, start, start + out.len(), |r, ra, rb| {
                let seg = &mut out[r.start - start..r.end - start];
                zip_grad(seg, &dy[r], ra, rb, &partial);
            });
        });
    }

    /// The gradient of the operand read through `strides` into `dx`: written
    /// directly when it has the output's size, otherwise summed over the
    /// broadcast axes as it is formed.
    fn operand_grad(
        &self,
        strides: &[usize],
        full: bool,
        dx: &mut Tensor,
        partial: impl Fn(f32, f32) -> f32 + Sync + Send,
    ) -> Result<()> {
        let dx = dx.as_mut_slice::<f32>()?;
        if full {
            self.full_grad(dx, partial);
            return Ok(());
        }
        let out = &self.plan.out;
        let axes: Vec<usize> = (0..out.rank())
            .filter(|&i| strides[i] == 0 && out.dims()[i] != 1)
            .collect();
        let rplan = ReducePlan::new(ReduceOp::Sum, out, &axes)?;
        if matches!(self.plan.op, BinaryOp::Add | BinaryOp::Sub) {
            // A constant partial (1 or -1): sum dy itself.
            reduce::reduce_slice(&rplan, self.dy, dx);
            let p = partial(1.0, 1.0);
            if p != 1.0 {
                dx.iter_mut().for_each(|v| *v *= p);
            }
        } else {
            let (bc, a, b, dy) = (self.bc, self.a, self.b, self.dy);
            let grad = reduce::GradSum {
                bc,
                a,
                b,
                dy,
                partial,
            };
            reduce::sum_grad(&rplan, &grad, dx);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use verjus_core::{DType, Shape};

    fn tensor(dims: &[usize], data: Vec<f32>) -> Tensor {
        Tensor::from_vec(dims.to_vec(), data).unwrap()
    }

    fn seq(n: usize) -> Vec<f32> {
        (0..n).map(|i| (i % 97) as f32 * 0.25 - 7.0).collect()
    }

    /// `c = a op b` by explicit multi-indices, the definition of broadcasting.
    fn naive(op: BinaryOp, a: &Tensor, b: &Tensor) -> Vec<f32> {
        let plan = BinaryPlan::new(op, a.shape(), b.shape()).unwrap();
        let (av, bv) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
        let dims = plan.out.dims();
        (0..plan.out.numel())
            .map(|flat| {
                let (mut rem, mut ai, mut bi) = (flat, 0, 0);
                for k in (0..dims.len()).rev() {
                    let i = rem % dims[k];
                    rem /= dims[k];
                    ai += i * plan.a_strides[k];
                    bi += i * plan.b_strides[k];
                }
                op.apply(av[ai], bv[bi])
            })
            .collect()
    }

    fn run_binary(op: BinaryOp, a: &Tensor, b: &Tensor) -> Vec<f32> {
        let plan = BinaryPlan::new(op, a.shape(), b.shape()).unwrap();
        let mut c = Tensor::zeros_host(&plan.out, DType::F32).unwrap();
        binary(&plan, a, b, &mut c).unwrap();
        c.to_vec().unwrap()
    }

    #[test]
    fn binary_matches_explicit_broadcasting() {
        let cases: &[(&[usize], &[usize])] = &[
            (&[2, 3], &[2, 3]),
            (&[2, 3], &[]),
            (&[1], &[4, 3]),
            (&[4, 3], &[3]),
            (&[2, 3, 2, 2], &[1, 3, 1, 1]),
            (&[2, 1, 3], &[4, 1]),
            (&[3, 1], &[1, 5]),
            // Large enough to split over the pool at chunk boundaries inside runs.
            (&[301, 257], &[257]),
            (&[7, 33, 301], &[33, 1]),
        ];
        for &(sa, sb) in cases {
            let a = tensor(sa, seq(Shape::new(sa).unwrap().numel()));
            let b = tensor(
                sb,
                seq(Shape::new(sb).unwrap().numel())
                    .iter()
                    .map(|v| v + 0.5)
                    .collect(),
            );
            for op in [BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Max, BinaryOp::Lt] {
                assert_eq!(
                    run_binary(op, &a, &b),
                    naive(op, &a, &b),
                    "{op:?} {sa:?} {sb:?}"
                );
                assert_eq!(
                    run_binary(op, &b, &a),
                    naive(op, &b, &a),
                    "{op:?} {sb:?} {sa:?}"
                );
            }
        }
    }

    #[test]
    fn unary_and_its_gradient() {
        let x = tensor(&[4], vec![-2.0, -0.5, 0.0, 3.0]);
        let mut y = tensor(&[4], vec![0.0; 4]);
        unary(UnaryOp::Relu, &x, &mut y).unwrap();
        assert_eq!(y.to_vec::<f32>().unwrap(), [0.0, 0.0, 0.0, 3.0]);
        unary(UnaryOp::Sigmoid, &x, &mut y).unwrap();
        let dy = tensor(&[4], vec![1.0, 2.0, 3.0, 4.0]);
        let mut dx = tensor(&[4], vec![0.0; 4]);
        unary_backward(UnaryOp::Sigmoid, &x, &y, &dy, &mut dx).unwrap();
        // sigmoid'(0) = 1/4, so dx[2] = 3/4.
        assert_eq!(dx.to_vec::<f32>().unwrap()[2], 0.75);
        unary_backward(UnaryOp::Scale(-3.0), &x, &y, &dy, &mut dx).unwrap();
        assert_eq!(dx.to_vec::<f32>().unwrap(), [-3.0, -6.0, -9.0, -12.0]);
    }

    fn grads(op: BinaryOp, a: &Tensor, b: &Tensor, dy: &Tensor) -> (Vec<f32>, Vec<f32>) {
        let plan = BinaryPlan::new(op, a.shape(), b.shape()).unwrap();
        // Pre-filled with garbage: the gradients must overwrite, not accumulate.
        let mut da = tensor(a.dims(), vec![9.0; a.numel()]);
        let mut db = tensor(b.dims(), vec![9.0; b.numel()]);
        binary_backward(&plan, a, b, dy, Some(&mut da), Some(&mut db)).unwrap();
        (da.to_vec().unwrap(), db.to_vec().unwrap())
    }

    #[test]
    fn backward_sums_over_broadcast_axes() {
        let a = tensor(&[2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let b = tensor(&[3], vec![10.0, 20.0, 30.0]);
        let dy = tensor(&[2, 3], vec![1.0, 1.0, 1.0, 2.0, 2.0, 2.0]);
        let (da, db) = grads(BinaryOp::Sub, &a, &b, &dy);
        assert_eq!(da, [1.0, 1.0, 1.0, 2.0, 2.0, 2.0]);
        assert_eq!(db, [-3.0, -3.0, -3.0]);
        let (da, db) = grads(BinaryOp::Mul, &a, &b, &dy);
        assert_eq!(da, [10.0, 20.0, 30.0, 20.0, 40.0, 60.0]);
        // db[c] = sum_n dy[n, c] * a[n, c]
        assert_eq!(db, [9.0, 12.0, 15.0]);
        // A scalar operand gets the sum over everything.
        let s = tensor(&[], vec![2.0]);
        let (ds, da) = grads(BinaryOp::Mul, &s, &a, &dy);
        assert_eq!(ds, [1.0 + 2.0 + 3.0 + 8.0 + 10.0 + 12.0]);
        assert_eq!(da, [2.0, 2.0, 2.0, 4.0, 4.0, 4.0]);
    }

    /// Gradients by explicit multi-indices, accumulated in f64.
    fn naive_grads(op: BinaryOp, a: &Tensor, b: &Tensor, dy: &[f32]) -> (Vec<f32>, Vec<f32>) {
        let plan = BinaryPlan::new(op, a.shape(), b.shape()).unwrap();
        let (av, bv) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
        let (mut da, mut db) = (vec![0f64; av.len()], vec![0f64; bv.len()]);
        let dims = plan.out.dims();
        for (flat, &g) in dy.iter().enumerate() {
            let (mut rem, mut ai, mut bi) = (flat, 0, 0);
            for k in (0..dims.len()).rev() {
                let i = rem % dims[k];
                rem /= dims[k];
                ai += i * plan.a_strides[k];
                bi += i * plan.b_strides[k];
            }
            let (p, q) = op.partials(av[ai], bv[bi]);
            da[ai] += f64::from(g * p);
            db[bi] += f64::from(g * q);
        }
        let f = |v: Vec<f64>| v.into_iter().map(|x| x as f32).collect();
        (f(da), f(db))
    }

    #[test]
    fn backward_matches_explicit_sums() {
        let cases: &[(&[usize], &[usize])] = &[
            (&[2, 1, 3], &[4, 1]),
            (&[301, 257], &[257]),
            (&[7, 33, 301], &[33, 1]),
            (&[100_003], &[]),
            (&[4, 3, 50, 60], &[1, 3, 1, 1]),
        ];
        // b is never 0 (it is a multiple of 1/4 plus 0.3), so div is finite.
        for &(sa, sb) in cases {
            let a = tensor(sa, seq(Shape::new(sa).unwrap().numel()));
            let b = tensor(
                sb,
                seq(Shape::new(sb).unwrap().numel())
                    .iter()
                    .map(|v| v + 0.3)
                    .collect(),
            );
            let plan = BinaryPlan::new(BinaryOp::Mul, a.shape(), b.shape()).unwrap();
            let dy: Vec<f32> = seq(plan.out.numel() + 3)[3..].to_vec();
            let dyt = tensor(plan.out.dims(), dy.clone());
            for op in [BinaryOp::Mul, BinaryOp::Div, BinaryOp::Sub] {
                let (da, db) = grads(op, &a, &b, &dyt);
                let (wa, wb) = naive_grads(op, &a, &b, &dy);
                for (got, want) in [(da, wa), (db, wb)] {
                    for (g, w) in got.iter().zip(&want) {
                        assert!(
                            (g - w).abs() <= 1e-4 * w.abs().max(1.0),
                            "{op:?} {sa:?} {sb:?}: {g} vs {w}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn same_shape_backward_and_single_gradient() {
        let a = tensor(&[3], vec![1.0, 5.0, 2.0]);
        let b = tensor(&[3], vec![4.0, 5.0, 1.0]);
        let dy = tensor(&[3], vec![1.0, 2.0, 3.0]);
        // Ties of maximum go to a.
        assert_eq!(
            grads(BinaryOp::Max, &a, &b, &dy),
            (vec![0.0, 2.0, 3.0], vec![1.0, 0.0, 0.0])
        );
        let plan = BinaryPlan::new(BinaryOp::Div, a.shape(), b.shape()).unwrap();
        let mut db = tensor(&[3], vec![0.0; 3]);
        binary_backward(&plan, &a, &b, &dy, None, Some(&mut db)).unwrap();
        // d(a/b)/db = -a / b^2
        assert_eq!(db.to_vec::<f32>().unwrap(), [-1.0 / 16.0, -0.4, -6.0]);
    }
}
