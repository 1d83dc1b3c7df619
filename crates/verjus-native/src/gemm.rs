//! GEMM through the `gemm` crate (AVX-512 micro-kernels with its `x86-v4`
//! feature, threads from rayon).
//!
//! [`sgemm`] is the slice-level entry the convolution also uses; [`gemm()`] maps a
//! validated batched plan onto it.

use verjus_core::ops::{GemmPlan, PermutePlan};
use verjus_core::{Error, Result, Shape, Tensor};

/// Below this many multiply-adds a product runs on the calling thread: spawning
/// work on the pool costs more than it saves for small matrices.
const PARALLEL_THRESHOLD: usize = 48 * 48 * 48;

/// A row-major matrix operand: `rows x cols` as used in the product, stored
/// transposed when `trans` (then the stored layout is `cols x rows`).
#[derive(Clone, Copy)]
pub(crate) struct MatRef<'a> {
    pub data: &'a [f32],
    pub trans: bool,
}

impl MatRef<'_> {
    /// (column stride, row stride) of the operand as used in the product,
    /// given its stored row length `ld`.
    fn strides(&self, ld: usize) -> (isize, isize) {
        if self.trans {
            (ld as isize, 1)
        } else {
            (1, ld as isize)
        }
    }
}

/// Whether one product may spread over rayon's threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Threads {
    /// Rayon's threads above [`PARALLEL_THRESHOLD`], the calling thread below.
    Auto,
    /// Always the calling thread: for callers that already run many products in parallel.
    Single,
}

/// `c[m x n] = alpha * a[m x k] @ b[k x n] + beta * c`, all row-major and
/// contiguous (`a` stored `k x m` when `a.trans`, `b` stored `n x k` when `b.trans`).
#[allow(clippy::too_many_arguments)] // mirrors the BLAS signature
pub(crate) fn sgemm(
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<'_>,
    b: MatRef<'_>,
    c: &mut [f32],
    alpha: f32,
    beta: f32,
) -> Result<()> {
    sgemm_on(Threads::Auto, m, n, k, a, b, c, alpha, beta)
}

/// [`sgemm`] with an explicit threading choice.
#[allow(clippy::too_many_arguments)] // mirrors the BLAS signature
pub(crate) fn sgemm_on(
    threads: Threads,
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<'_>,
    b: MatRef<'_>,
    c: &mut [f32],
    alpha: f32,
    beta: f32,
) -> Result<()> {
    if a.data.len() < m * k || b.data.len() < k * n || c.len() < m * n {
        return Err(Error::invalid(
            "gemm",
            "operand buffers are smaller than the plan",
        ));
    }
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        // The product is empty: C = beta * C.
        c[..m * n]
            .iter_mut()
            .for_each(|v| *v = if beta == 0.0 { 0.0 } else { beta * *v });
        return Ok(());
    }
    if b.trans && m >= TRANSPOSE_B_MIN_ROWS {
        if !a.trans && m < n {
            // C^T = B_stored @ A^T, written straight into C's row-major layout,
            // with A^T read in place (A viewed column-major): nothing is copied.
            let dst = Strided::col_major(c, n);
            let lhs = Strided::row_major(b.data, k);
            let rhs = Strided::col_major(a.data, k);
            run(threads, n, m, k, dst, lhs, rhs, alpha, beta);
            return Ok(());
        }
        return with_transposed(b.data, n, k, |bt| {
            let b = MatRef {
                data: bt,
                trans: false,
            };
            sgemm_on(threads, m, n, k, a, b, c, alpha, beta)
        });
    }
    let lda = if a.trans { m } else { k };
    let ldb = if b.trans { k } else { n };
    let (a_cs, a_rs) = a.strides(lda);
    let (b_cs, b_rs) = b.strides(ldb);
    let dst = Strided::row_major(c, n);
    let lhs = Strided {
        data: a.data,
        cs: a_cs,
        rs: a_rs,
    };
    let rhs = Strided {
        data: b.data,
        cs: b_cs,
        rs: b_rs,
    };
    run(threads, m, n, k, dst, lhs, rhs, alpha, beta);
    Ok(())
}

/// `c[m x n] = a[m x k] @ b[k x n] (+ c when `accumulate`)` on the calling
/// thread, every operand row-major with its own row stride (`ldc`, `lda`,
/// `ldb` elements): for callers that run the products of disjoint column
/// blocks of one buffer on several threads themselves (the LSTM's steps).
///
/// # Safety
/// `a`, `b` must be valid for reads and `c` for writes of their `m x k`,
/// `k x n`, `m x n` extents at the given strides, and no other thread may
/// write what this product reads or touch what it writes while it runs.
#[allow(clippy::too_many_arguments)] // mirrors the BLAS signature
pub(crate) unsafe fn sgemm_strided(
    m: usize,
    n: usize,
    k: usize,
    c: *mut f32,
    ldc: usize,
    a: *const f32,
    lda: usize,
    b: *const f32,
    ldb: usize,
    accumulate: bool,
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            for r in 0..m {
                // SAFETY: row r of `c` holds n elements (the caller's contract).
                unsafe { std::slice::from_raw_parts_mut(c.add(r * ldc), n) }.fill(0.0);
            }
        }
        return;
    }
    // SAFETY: the caller's contract covers every read and write.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c,
            1,
            ldc as isize,
            accumulate,
            a,
            1,
            lda as isize,
            b,
            1,
            ldb as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

/// A matrix as the `gemm` crate sees it: data with column and row strides.
struct Strided<T> {
    data: T,
    cs: isize,
    rs: isize,
}

impl<T> Strided<T> {
    /// Row-major with rows of `ld` elements.
    fn row_major(data: T, ld: usize) -> Self {
        Strided {
            data,
            cs: 1,
            rs: ld as isize,
        }
    }

    /// Column-major with columns of `ld` elements.
    fn col_major(data: T, ld: usize) -> Self {
        Strided {
            data,
            cs: ld as isize,
            rs: 1,
        }
    }
}

/// `dst[m x n] = alpha * lhs[m x k] @ rhs[k x n] + beta * dst`; the callers
/// have checked that every operand holds its `m`, `n`, `k` extent at its strides.
#[allow(clippy::too_many_arguments)] // mirrors the BLAS signature
fn run(
    threads: Threads,
    m: usize,
    n: usize,
    k: usize,
    dst: Strided<&mut [f32]>,
    lhs: Strided<&[f32]>,
    rhs: Strided<&[f32]>,
    alpha: f32,
    beta: f32,
) {
    let parallelism = if threads == Threads::Auto && m * n * k >= PARALLEL_THRESHOLD {
        gemm::Parallelism::Rayon(0)
    } else {
        gemm::Parallelism::None
    };
    // SAFETY: the callers checked that the buffers hold m*k, k*n and m*n
    // elements laid out at the given strides; `dst` is borrowed mutably, so it
    // does not alias `lhs` or `rhs`. gemm computes
    // dst = alpha_dst * dst + beta_prod * lhs @ rhs, reading dst only when asked.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.data.as_mut_ptr(),
            dst.cs,
            dst.rs,
            beta != 0.0,
            lhs.data.as_ptr(),
            lhs.cs,
            lhs.rs,
            rhs.data.as_ptr(),
            rhs.cs,
            rhs.rs,
            beta,
            alpha,
            false,
            false,
            false,
            parallelism,
        );
    }
}

/// From this many rows of `A` on, a transposed `B` is not the right-hand side
/// of the crate's product: its kernels read such a column-major right-hand side
/// at about half speed (measured: `[128, 512] @ [512, 512]^T` took 0.97 ms
/// against 0.44 ms for numpy). When `A` is the smaller operand (a Linear
/// forward, `x [128, 784] @ W^T`) the product is formed as `C^T = B_stored @
/// A^T` into `C` viewed column-major, with `A^T` read in place (interleaved A/B
/// against copying `A` transposed first, as before stop 12: 0.86-0.89 of the
/// time for `x [128, 784] @ W^T`, 0.90-0.91 for `[128, 512] @ [512, 512]^T`);
/// otherwise `B` is copied into row-major order. With few rows the product is
/// too small to repay a copy.
const TRANSPOSE_B_MIN_ROWS: usize = 16;

thread_local! {
    /// Scratch for [`with_transposed`], kept per thread so that the copy does not
    /// allocate on every call.
    static TRANSPOSE_SCRATCH: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Calls `f` with the `rows x cols` row-major matrix `data` transposed
/// (`cols x rows`, row-major), in a per-thread scratch buffer, using the
/// permute kernel's tiled transpose.
fn with_transposed<R>(
    data: &[f32],
    rows: usize,
    cols: usize,
    f: impl FnOnce(&[f32]) -> Result<R>,
) -> Result<R> {
    let plan = PermutePlan::new(&Shape::new([rows, cols])?, &[1, 0])?;
    // Taken, not borrowed, so that a nested call on this thread cannot conflict.
    // Grown (and zeroed) only when too small: the transpose overwrites every
    // element, and zero-filling megabytes per call showed in profiles.
    let mut scratch = TRANSPOSE_SCRATCH.with(|s| s.take());
    let len = rows * cols;
    if scratch.len() < len {
        scratch.resize(len, 0.0);
    }
    let out = &mut scratch[..len];
    crate::permute::permute_as(&plan, &data[..len], out);
    let result = f(out);
    TRANSPOSE_SCRATCH.with(|s| s.set(scratch));
    result
}

/// The batched GEMM of the op set; bfloat16 and float16 operands are widened
/// to float32 first (exactly), so the product is the float32 one of their values.
pub(crate) fn gemm(plan: &GemmPlan, a: &Tensor, b: &Tensor, c: &mut Tensor) -> Result<()> {
    let (m, n, k) = (plan.m, plan.n, plan.k);
    let (wide_a, wide_b) = (crate::memory::widened(a)?, crate::memory::widened(b)?);
    let (a, b) = (wide_a.as_ref().unwrap_or(a), wide_b.as_ref().unwrap_or(b));
    let (a, b) = (a.as_slice::<f32>()?, b.as_slice::<f32>()?);
    let c = c.as_mut_slice::<f32>()?;
    if plan.a_batched && !plan.b_batched && !plan.spec.trans_a {
        // Row-major A matrices sharing one B stack into a single taller
        // product, which the kernel parallelises better than many small ones.
        let (ta, tb) = (
            MatRef {
                data: a,
                trans: false,
            },
            MatRef {
                data: b,
                trans: plan.spec.trans_b,
            },
        );
        return sgemm(
            plan.batch * m,
            n,
            k,
            ta,
            tb,
            c,
            plan.spec.alpha,
            plan.spec.beta,
        );
    }
    let a_step = if plan.a_batched { m * k } else { 0 };
    let b_step = if plan.b_batched { k * n } else { 0 };
    for i in 0..plan.batch {
        let ai = MatRef {
            data: &a[i * a_step..i * a_step + m * k],
            trans: plan.spec.trans_a,
        };
        let bi = MatRef {
            data: &b[i * b_step..i * b_step + k * n],
            trans: plan.spec.trans_b,
        };
        sgemm(
            m,
            n,
            k,
            ai,
            bi,
            &mut c[i * m * n..(i + 1) * m * n],
            plan.spec.alpha,
            plan.spec.beta,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use verjus_core::ops::GemmSpec;

    #[test]
    fn batched_a_with_shared_b_is_one_product() {
        // Two 2x3 matrices times one 3x2 (given transposed, 2x3), accumulated.
        let a = Tensor::from_vec([2, 2, 3], (1..=12).map(|v| v as f32).collect()).unwrap();
        let bt = Tensor::from_vec([2, 3], vec![1.0, 0.0, 1.0, 0.0, 1.0, 0.0]).unwrap();
        let mut c = Tensor::from_vec([2, 2, 2], vec![1.0f32; 8]).unwrap();
        let spec = GemmSpec::new(false, true).accumulate();
        let plan = GemmPlan::new(a.shape(), bt.shape(), spec).unwrap();
        gemm(&plan, &a, &bt, &mut c).unwrap();
        // Row r of A times B = (a_r0 + a_r2, a_r1), plus the 1 already in C.
        let want = [5.0, 3.0, 11.0, 6.0, 17.0, 9.0, 23.0, 12.0];
        assert_eq!(c.to_vec::<f32>().unwrap(), want);
    }
}
