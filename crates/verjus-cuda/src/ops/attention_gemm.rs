//! The six batched products of fused attention as GEMM plans, one matrix per
//! entry (`batch = N`, both operands batched, so cuBLAS takes each as one
//! strided-batched call). Kept apart from the launches so that their sizes
//! and transposes, and the strides cuBLAS gets from them, have CPU tests.

use verjus_core::ops::{AttentionPlan, GemmPlan, GemmSpec};

/// `C [m, n] = alpha op(A) op(B)` for each of the plan's entries (overwrites `C`).
fn per_entry(p: &AttentionPlan, (m, n, k): (usize, usize, usize), spec: GemmSpec) -> GemmPlan {
    GemmPlan {
        spec,
        batch: p.entries,
        m,
        n,
        k,
        a_batched: true,
        b_batched: true,
    }
}

/// `s [Tq, Tk] = scale q [Tq, D] k [Tk, D]^T`.
pub(super) fn scores(p: &AttentionPlan) -> GemmPlan {
    let spec = GemmSpec {
        alpha: p.scale,
        ..GemmSpec::new(false, true)
    };
    per_entry(p, (p.queries, p.keys, p.key_feat), spec)
}

/// `out [Tq, Dv] = p [Tq, Tk] v [Tk, Dv]`.
pub(super) fn output(p: &AttentionPlan) -> GemmPlan {
    per_entry(
        p,
        (p.queries, p.value_feat, p.keys),
        GemmSpec::new(false, false),
    )
}

/// `dv [Tk, Dv] = p [Tq, Tk]^T dout [Tq, Dv]`.
pub(super) fn grad_value(p: &AttentionPlan) -> GemmPlan {
    per_entry(
        p,
        (p.keys, p.value_feat, p.queries),
        GemmSpec::new(true, false),
    )
}

/// `dp [Tq, Tk] = dout [Tq, Dv] v [Tk, Dv]^T`.
pub(super) fn grad_weights(p: &AttentionPlan) -> GemmPlan {
    per_entry(
        p,
        (p.queries, p.keys, p.value_feat),
        GemmSpec::new(false, true),
    )
}

/// `dq [Tq, D] = scale ds [Tq, Tk] k [Tk, D]`.
pub(super) fn grad_query(p: &AttentionPlan) -> GemmPlan {
    let spec = GemmSpec {
        alpha: p.scale,
        ..GemmSpec::new(false, false)
    };
    per_entry(p, (p.queries, p.key_feat, p.keys), spec)
}

/// `dk [Tk, D] = scale ds [Tq, Tk]^T q [Tq, D]`.
pub(super) fn grad_key(p: &AttentionPlan) -> GemmPlan {
    let spec = GemmSpec {
        alpha: p.scale,
        ..GemmSpec::new(true, false)
    };
    per_entry(p, (p.keys, p.key_feat, p.queries), spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blas::gemm_call;
    use verjus_core::Shape;

    /// N = 3, Tq = 4, Tk = 5, D = 6, Dv = 7: every size distinct.
    fn plan() -> AttentionPlan {
        AttentionPlan {
            entries: 3,
            queries: 4,
            keys: 5,
            key_feat: 6,
            value_feat: 7,
            has_lengths: false,
            causal: false,
            scale: 0.5,
        }
    }

    /// The plan `GemmPlan::new` derives from the stored operand shapes (which
    /// validates sizes and transposes against the tensors' layouts).
    fn from_shapes(a: [usize; 3], b: [usize; 3], spec: GemmSpec) -> GemmPlan {
        GemmPlan::new(&Shape::new(a).unwrap(), &Shape::new(b).unwrap(), spec).unwrap()
    }

    #[test]
    fn products_match_the_stored_operand_shapes() {
        let p = plan();
        let (n, tq, tk, d, dv) = (3, 4, 5, 6, 7);
        let scaled = |ta, tb| GemmSpec {
            alpha: 0.5,
            ..GemmSpec::new(ta, tb)
        };
        let plain = GemmSpec::new;
        // q [N, Tq, D], k [N, Tk, D], v [N, Tk, Dv], p/ds [N, Tq, Tk], dout [N, Tq, Dv].
        let cases = [
            (scores(&p), [n, tq, d], [n, tk, d], scaled(false, true)),
            (output(&p), [n, tq, tk], [n, tk, dv], plain(false, false)),
            (grad_value(&p), [n, tq, tk], [n, tq, dv], plain(true, false)),
            (
                grad_weights(&p),
                [n, tq, dv],
                [n, tk, dv],
                plain(false, true),
            ),
            (
                grad_query(&p),
                [n, tq, tk],
                [n, tk, d],
                scaled(false, false),
            ),
            (grad_key(&p), [n, tq, tk], [n, tq, d], scaled(true, false)),
        ];
        for (got, a, b, spec) in cases {
            assert_eq!(got, from_shapes(a, b, spec), "{a:?} x {b:?}");
            assert_eq!(got.spec.beta, 0.0, "gradients are overwritten");
        }
    }

    #[test]
    fn every_entry_is_one_strided_matrix() {
        let p = plan();
        // Scores: cuBLAS' first operand is k (stride Tk*D, transposed, ld D),
        // the second q (stride Tq*D, ld D), C is s (stride Tq*Tk, ld Tk).
        let c = gemm_call(&scores(&p));
        assert_eq!((c.m, c.n, c.k, c.batch), (5, 4, 6, 3));
        assert!(c.trans_first && !c.trans_second);
        assert_eq!((c.ld_first, c.ld_second, c.ldc), (6, 6, 5));
        assert_eq!((c.stride_first, c.stride_second, c.stride_c), (30, 24, 20));
        // dv = p^T dout: p is read transposed ([Tq, Tk], ld Tk), dout [Tq, Dv].
        let c = gemm_call(&grad_value(&p));
        assert_eq!((c.m, c.n, c.k, c.batch), (7, 5, 4, 3));
        assert!(!c.trans_first && c.trans_second);
        assert_eq!((c.ld_first, c.ld_second, c.ldc), (7, 5, 7));
        assert_eq!((c.stride_first, c.stride_second, c.stride_c), (28, 20, 35));
        // dk = scale ds^T q: never folded into one large GEMM (q is batched).
        let c = gemm_call(&grad_key(&p));
        assert_eq!((c.m, c.n, c.k, c.batch), (6, 5, 4, 3));
        assert_eq!((c.stride_first, c.stride_second, c.stride_c), (24, 20, 30));
        // out = p v: batched untransposed p with batched v stays batched.
        let c = gemm_call(&output(&p));
        assert_eq!((c.batch, c.stride_second, c.stride_c), (3, 20, 28));
    }
}
