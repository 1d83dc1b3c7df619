//! 2-D convolution (NCHW cross-correlation) as im2col + GEMM.
//!
//! Each image of a batch is an independent product
//! `y_n [c_out x oh*ow] = W [c_out x K] @ col_n [K x oh*ow]` with `K = c_in*kh*kw`
//! and `col_n` the image unfolded into columns (im2col). The products are small
//! (the Fashion-MNIST CNN's largest is 64 x 196 x 288), too small for one GEMM to
//! keep several threads busy, so the batch is split over rayon's threads and each
//! GEMM runs on the thread that owns its image, with a column buffer reused from
//! thread-local scratch. Writing each image's output in place also keeps the NCHW
//! layout without the transpose that one batch-wide GEMM would need. Only a batch
//! smaller than the thread count lets each GEMM spread over the threads instead.
//!
//! The backward ops reuse the column layout: the data gradient is
//! `col = W^T @ dy_n` folded back onto the image (col2im, accumulating where
//! windows overlap); the filter gradient sums `col_n @ dy_n^T` (that is `dw^T`)
//! over the images of each rayon piece, adds the pieces and transposes. A 1x1
//! kernel with unit stride and no padding needs no columns: the image already is
//! the column matrix.

use crate::gemm::{sgemm_on, MatRef, Threads};
use crate::scratch::Scratch;
use rayon::prelude::*;
use verjus_core::ops::Conv2dPlan;
use verjus_core::{Error, Result, Tensor};

/// Sizes of a convolution, with the derived counts the kernels use.
#[derive(Clone, Copy, Debug)]
struct Geom {
    c_in: usize,
    h: usize,
    w: usize,
    c_out: usize,
    kh: usize,
    kw: usize,
    oh: usize,
    ow: usize,
    stride: [usize; 2],
    pad: [usize; 2],
    dil: [usize; 2],
    products: Products,
}

impl Geom {
    fn new(p: &Conv2dPlan) -> Self {
        Geom {
            c_in: p.c_in,
            h: p.h,
            w: p.w,
            c_out: p.c_out,
            kh: p.kh,
            kw: p.kw,
            oh: p.oh,
            ow: p.ow,
            stride: p.params.stride,
            pad: p.params.padding,
            dil: p.params.dilation,
            products: Products::for_batch(p.n),
        }
    }

    /// Rows of the column matrix: `c_in * kh * kw`.
    fn k(&self) -> usize {
        self.c_in * self.kh * self.kw
    }

    /// Output pixels per channel: the columns of the column matrix.
    fn pixels(&self) -> usize {
        self.oh * self.ow
    }

    /// Elements of one input image.
    fn in_image(&self) -> usize {
        self.c_in * self.h * self.w
    }

    /// Elements of one output image.
    fn out_image(&self) -> usize {
        self.c_out * self.pixels()
    }

    /// A 1x1 kernel with unit stride and no padding: the image is its own column matrix.
    fn is_pointwise(&self) -> bool {
        self.kh == 1 && self.kw == 1 && self.stride == [1, 1] && self.pad == [0, 0]
    }

    /// Length of the column buffer (none for pointwise kernels).
    fn col_len(&self) -> usize {
        if self.is_pointwise() {
            0
        } else {
            self.k() * self.pixels()
        }
    }
}

/// The outputs `o` in `0..out_len` whose input position `o*stride + offset - pad`
/// lies in `0..in_len`, as a range `lo..hi` (empty when there are none).
fn valid_range(
    out_len: usize,
    in_len: usize,
    stride: usize,
    offset: usize,
    pad: usize,
) -> (usize, usize) {
    let lo = pad.saturating_sub(offset).div_ceil(stride);
    let hi = (in_len + pad)
        .saturating_sub(offset)
        .div_ceil(stride)
        .min(out_len);
    (lo.min(hi), hi)
}

/// One row of the column matrix: kernel tap `(i, j)` of channel `c`, and the
/// output rows and columns that see the image through it.
struct Tap {
    /// Offset of the channel's plane in the image.
    plane: usize,
    rows: (usize, usize),
    cols: (usize, usize),
    /// Image row and column seen by output `(rows.0, cols.0)`.
    first: (usize, usize),
}

impl Tap {
    /// Whether no output sees the image through this tap (all padding).
    fn is_empty(&self) -> bool {
        self.rows.0 == self.rows.1 || self.cols.0 == self.cols.1
    }
}

impl Geom {
    /// The taps of all rows of the column matrix (the same for every image).
    fn taps(&self) -> Vec<Tap> {
        (0..self.k()).map(|r| self.tap(r)).collect()
    }

    /// The tap of column-matrix row `r`.
    fn tap(&self, r: usize) -> Tap {
        let (c, i, j) = (r / (self.kh * self.kw), r / self.kw % self.kh, r % self.kw);
        let (off_y, off_x) = (i * self.dil[0], j * self.dil[1]);
        let rows = valid_range(self.oh, self.h, self.stride[0], off_y, self.pad[0]);
        let cols = valid_range(self.ow, self.w, self.stride[1], off_x, self.pad[1]);
        // Only read when both ranges are non-empty; then the subtractions are >= 0.
        let first = (
            (rows.0 * self.stride[0] + off_y).saturating_sub(self.pad[0]),
            (cols.0 * self.stride[1] + off_x).saturating_sub(self.pad[1]),
        );
        Tap {
            plane: c * self.h * self.w,
            rows,
            cols,
            first,
        }
    }

    /// Whether an output row is an input row shifted sideways and the next
    /// output row reads the next input row (unit strides, equal widths, as with
    /// "same" padding): then the visible part of a column-matrix row is one
    /// contiguous run of the input plane, up to the edge columns, and is copied
    /// in one piece instead of row by row. A height stride above 1 skips input
    /// rows, so such a run would read the wrong ones.
    fn rows_are_shifts(&self) -> bool {
        self.stride == [1, 1] && self.ow == self.w
    }

    /// For a shift tap: the run `lo..hi` of the tap's visible output rows (as one
    /// slice starting at output row `rows.0`) that maps into the plane, and the
    /// plane index of element `lo`.
    fn shift_run(&self, t: &Tap) -> (usize, usize, usize) {
        let len = (t.rows.1 - t.rows.0) * self.ow;
        // Output element q of the run reads plane index `base + q`, `base` possibly negative.
        let base = (t.first.0 * self.w + t.first.1) as isize - t.cols.0 as isize;
        let plane_len = (self.h * self.w) as isize;
        let lo = (-base).clamp(0, len as isize);
        let hi = (plane_len - base).clamp(lo, len as isize);
        (lo as usize, hi as usize, (base + lo) as usize)
    }
}

/// Unfolds one image `x [c_in, h, w]` into `col [K, oh*ow]` (zeros where a tap
/// falls into the padding).
fn im2col(g: &Geom, taps: &[Tap], x: &[f32], col: &mut [f32]) {
    for (t, row) in taps.iter().zip(col.chunks_exact_mut(g.pixels())) {
        if t.is_empty() {
            row.fill(0.0);
            continue;
        }
        let plane = &x[t.plane..t.plane + g.h * g.w];
        let (y0, y1) = t.rows;
        row[..y0 * g.ow].fill(0.0);
        row[y1 * g.ow..].fill(0.0);
        let body = &mut row[y0 * g.ow..y1 * g.ow];
        if g.rows_are_shifts() {
            let (lo, hi, src) = g.shift_run(t);
            body[lo..hi].copy_from_slice(&plane[src..src + hi - lo]);
            zero_edges(body, g.ow, t.cols);
        } else {
            gather_rows(g, t, plane, body);
        }
    }
}

/// Sets the columns outside `cols` of every row (of `ow` elements) of `body` to zero.
fn zero_edges(body: &mut [f32], ow: usize, (x0, x1): (usize, usize)) {
    for out in body.chunks_exact_mut(ow) {
        zero_few(&mut out[..x0]);
        zero_few(&mut out[x1..]);
    }
}

/// Zeroes a slice that is usually empty or one element long (a kernel's
/// overhang into the padding): plain stores there, since a `memset` call per
/// image row cost about 4% of the CNN's training step in profiles.
fn zero_few(v: &mut [f32]) {
    match v {
        [] => {}
        [a] => *a = 0.0,
        [a, b] => (*a, *b) = (0.0, 0.0),
        _ => v.fill(0.0),
    }
}

/// im2col of one tap, output row by output row (any stride).
fn gather_rows(g: &Geom, t: &Tap, plane: &[f32], body: &mut [f32]) {
    let (x0, x1) = t.cols;
    for (r, out) in body.chunks_exact_mut(g.ow).enumerate() {
        let start = (t.first.0 + r * g.stride[0]) * g.w + t.first.1;
        zero_few(&mut out[..x0]);
        zero_few(&mut out[x1..]);
        let out = &mut out[x0..x1];
        for (o, v) in out
            .iter_mut()
            .zip(plane[start..].iter().step_by(g.stride[1]))
        {
            *o = *v;
        }
    }
}

/// Folds `col [K, oh*ow]` back onto one image, adding into `dx [c_in, h, w]`.
/// `col` is scratch: its padding entries are zeroed on the way.
fn col2im(g: &Geom, taps: &[Tap], col: &mut [f32], dx: &mut [f32]) {
    for (t, row) in taps.iter().zip(col.chunks_exact_mut(g.pixels())) {
        if t.is_empty() {
            continue;
        }
        let plane = &mut dx[t.plane..t.plane + g.h * g.w];
        let body = &mut row[t.rows.0 * g.ow..t.rows.1 * g.ow];
        if g.rows_are_shifts() {
            // Entries that read padding must not land on the wrapped-around neighbours.
            zero_edges(body, g.ow, t.cols);
            let (lo, hi, dst) = g.shift_run(t);
            let sum = plane[dst..dst + hi - lo].iter_mut().zip(&body[lo..hi]);
            sum.for_each(|(d, v)| *d += v);
        } else {
            scatter_rows(g, t, body, plane);
        }
    }
}

/// col2im of one tap, output row by output row (any stride).
fn scatter_rows(g: &Geom, t: &Tap, body: &[f32], plane: &mut [f32]) {
    let (x0, x1) = t.cols;
    for (r, src) in body.chunks_exact(g.ow).enumerate() {
        let start = (t.first.0 + r * g.stride[0]) * g.w + t.first.1;
        let dst = plane[start..].iter_mut().step_by(g.stride[1]);
        dst.zip(&src[x0..x1]).for_each(|(d, v)| *d += v);
    }
}

fn out_of_memory(op: &str, len: usize) -> Error {
    Error::Device {
        device: "cpu".into(),
        msg: format!("{op}: cannot allocate a column buffer of {len} floats"),
    }
}

/// Runs `f(n, out_n, col)` for every image `n` in parallel, where `out_n` is
/// image `n`'s `per_image`-element slice of `out` and `col` a column buffer of
/// `col_len` elements.
fn for_each_image<F>(
    op: &str,
    out: &mut [f32],
    per_image: usize,
    col_len: usize,
    f: F,
) -> Result<()>
where
    F: Fn(usize, &mut [f32], &mut [f32]) -> Result<()> + Sync,
{
    if per_image == 0 {
        return Ok(());
    }
    out.par_chunks_mut(per_image).enumerate().try_for_each_init(
        || Scratch::take(col_len),
        |scratch, (n, out_n)| match scratch {
            Some(s) => f(n, out_n, &mut s.0[..col_len]),
            None => Err(out_of_memory(op, col_len)),
        },
    )
}

/// How the per-image GEMMs run: each on its own thread when the batch fills
/// rayon's threads, spread over them otherwise (a batch of one large image).
#[derive(Clone, Copy, Debug)]
struct Products(Threads);

impl Products {
    fn for_batch(n: usize) -> Self {
        Products(if n >= rayon::current_num_threads() {
            Threads::Single
        } else {
            Threads::Auto
        })
    }

    /// `c[m x n] = a[m x k] @ b[k x n]`.
    fn set(
        self,
        m: usize,
        n: usize,
        k: usize,
        a: MatRef<'_>,
        b: MatRef<'_>,
        c: &mut [f32],
    ) -> Result<()> {
        sgemm_on(self.0, m, n, k, a, b, c, 1.0, 0.0)
    }

    /// `c[m x n] += a[m x k] @ b[k x n]`.
    fn add(
        self,
        m: usize,
        n: usize,
        k: usize,
        a: MatRef<'_>,
        b: MatRef<'_>,
        c: &mut [f32],
    ) -> Result<()> {
        sgemm_on(self.0, m, n, k, a, b, c, 1.0, 1.0)
    }
}

fn plain(data: &[f32]) -> MatRef<'_> {
    MatRef { data, trans: false }
}

fn transposed(data: &[f32]) -> MatRef<'_> {
    MatRef { data, trans: true }
}

/// `y = conv2d(x, w) + bias`.
pub(crate) fn conv2d(
    plan: &Conv2dPlan,
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    y: &mut Tensor,
) -> Result<()> {
    let g = Geom::new(plan);
    let (x, w) = (x.as_slice::<f32>()?, w.as_slice::<f32>()?);
    let bias = bias.map(Tensor::as_slice::<f32>).transpose()?;
    let y = y.as_mut_slice::<f32>()?;
    let (k, pixels, in_image) = (g.k(), g.pixels(), g.in_image());
    let taps = g.taps();
    for_each_image("conv2d", y, g.out_image(), g.col_len(), |n, y_n, col| {
        let x_n = &x[n * in_image..(n + 1) * in_image];
        let cols = if g.is_pointwise() {
            x_n
        } else {
            im2col(&g, &taps, x_n, col);
            col
        };
        g.products
            .set(g.c_out, pixels, k, plain(w), plain(cols), y_n)?;
        if let Some(b) = bias {
            for (plane, &b) in y_n.chunks_exact_mut(pixels).zip(b) {
                plane.iter_mut().for_each(|v| *v += b);
            }
        }
        Ok(())
    })
}

/// `dx = W^T @ dy` folded back onto the input (overwrites `dx`).
pub(crate) fn conv2d_backward_data(
    plan: &Conv2dPlan,
    dy: &Tensor,
    w: &Tensor,
    dx: &mut Tensor,
) -> Result<()> {
    let g = Geom::new(plan);
    let (dy, w) = (dy.as_slice::<f32>()?, w.as_slice::<f32>()?);
    let dx = dx.as_mut_slice::<f32>()?;
    let (k, pixels, out_image) = (g.k(), g.pixels(), g.out_image());
    let taps = g.taps();
    let op = "conv2d_backward_data";
    for_each_image(op, dx, g.in_image(), g.col_len(), |n, dx_n, col| {
        let dy_n = &dy[n * out_image..(n + 1) * out_image];
        if g.is_pointwise() {
            return g
                .products
                .set(k, pixels, g.c_out, transposed(w), plain(dy_n), dx_n);
        }
        g.products
            .set(k, pixels, g.c_out, transposed(w), plain(dy_n), col)?;
        dx_n.fill(0.0);
        col2im(&g, &taps, col, dx_n);
        Ok(())
    })
}

/// `dw = sum over images of dy_n @ col_n^T` (overwrites `dw`).
///
/// The sum is formed transposed, `dw^T = sum of col_n @ dy_n^T`, which suits the
/// GEMM's kernel shape better (about 15% faster at the CNN's sizes), and
/// transposed into `dw` at the end.
pub(crate) fn conv2d_backward_filter(
    plan: &Conv2dPlan,
    x: &Tensor,
    dy: &Tensor,
    dw: &mut Tensor,
) -> Result<()> {
    let g = Geom::new(plan);
    let (x, dy) = (x.as_slice::<f32>()?, dy.as_slice::<f32>()?);
    let dw = dw.as_mut_slice::<f32>()?;
    let (k, pixels) = (g.k(), g.pixels());
    let (in_image, out_image, col_len) = (g.in_image(), g.out_image(), g.col_len());
    let (taps, dw_len) = (g.taps(), dw.len());
    let op = "conv2d_backward_filter";
    // Each rayon piece sums its images into its own partial, allocated on first use.
    let accumulate = |mut acc: Vec<f32>, n: usize| -> Result<Vec<f32>> {
        if acc.is_empty() {
            acc = zeroed(op, dw_len)?;
        }
        let x_n = &x[n * in_image..(n + 1) * in_image];
        let dy_n = transposed(&dy[n * out_image..(n + 1) * out_image]);
        if g.is_pointwise() {
            g.products
                .add(k, g.c_out, pixels, plain(x_n), dy_n, &mut acc)?;
        } else {
            let mut s = Scratch::take(col_len).ok_or_else(|| out_of_memory(op, col_len))?;
            let col = &mut s.0[..col_len];
            im2col(&g, &taps, x_n, col);
            g.products
                .add(k, g.c_out, pixels, plain(col), dy_n, &mut acc)?;
        }
        Ok(acc)
    };
    // Fixed contiguous groups of images, summed in order: the result does not
    // depend on how rayon schedules them, nor on the number of threads (a
    // fold per rayon piece grouped the images by work stealing, so two runs
    // differed in the last bits).
    let parts = plan.n.min(FILTER_PARTIALS);
    let partials = (0..parts)
        .into_par_iter()
        .with_max_len(1)
        .map(|p| (p * plan.n / parts..(p + 1) * plan.n / parts).try_fold(Vec::new(), accumulate))
        .collect::<Result<Vec<_>>>()?;
    let total = partials.into_iter().fold(Vec::new(), add_partials);
    // `total` is unallocated for an empty batch, and whenever `dw` is empty (so k > 0 below).
    if total.is_empty() {
        dw.fill(0.0);
    } else {
        for (o, row) in dw.chunks_exact_mut(k).enumerate() {
            row.iter_mut()
                .zip(total[o..].iter().step_by(g.c_out))
                .for_each(|(d, t)| *d = *t);
        }
    }
    Ok(())
}

/// How many partial filter gradients `conv2d_backward_filter` sums (each over
/// a fixed group of images): enough to keep every thread busy.
const FILTER_PARTIALS: usize = 16;

/// The sum of two partial gradients, either of which may be unallocated (empty).
fn add_partials(mut a: Vec<f32>, b: Vec<f32>) -> Vec<f32> {
    if a.is_empty() {
        return b;
    }
    a.iter_mut().zip(&b).for_each(|(x, y)| *x += y);
    a
}

fn zeroed(op: &str, len: usize) -> Result<Vec<f32>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len)
        .map_err(|_| out_of_memory(op, len))?;
    v.resize(len, 0.0);
    Ok(v)
}

/// `db[o] = sum over n, h, w of dy[n, o, h, w]` (overwrites `db`).
pub(crate) fn conv2d_backward_bias(dy: &Tensor, db: &mut Tensor) -> Result<()> {
    let (n, c) = (dy.dims()[0], dy.dims()[1]);
    let pixels = dy.dims()[2] * dy.dims()[3];
    let dy = dy.as_slice::<f32>()?;
    db.as_mut_slice::<f32>()?
        .par_iter_mut()
        .enumerate()
        .for_each(|(o, d)| {
            *d = (0..n)
                .map(|i| sum(&dy[(i * c + o) * pixels..(i * c + o + 1) * pixels]))
                .sum();
        });
    Ok(())
}

/// A sum with 16 independent accumulators, so that it vectorises.
fn sum(v: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 16];
    let chunks = v.chunks_exact(16);
    let tail: f32 = chunks.remainder().iter().sum();
    for c in chunks {
        lanes.iter_mut().zip(c).for_each(|(l, x)| *l += x);
    }
    lanes.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use crate::NativeBackend;
    use verjus_core::ops::{self, Conv2dParams};
    use verjus_core::Tensor;

    fn t(dims: &[usize], v: Vec<f32>) -> Tensor {
        Tensor::from_vec(dims.to_vec(), v).unwrap()
    }

    fn params(stride: [usize; 2], padding: [usize; 2], dilation: [usize; 2]) -> Conv2dParams {
        Conv2dParams {
            stride,
            padding,
            dilation,
        }
    }

    #[test]
    fn one_channel_3x3_by_hand() {
        // Image 0 is 1..9, image 1 is ten times that.
        let img: Vec<f32> = (1..=9).map(|v| v as f32).collect();
        let x = t(
            &[2, 1, 3, 3],
            [img.clone(), img.iter().map(|v| v * 10.0).collect()].concat(),
        );
        // y[i, j] = x[i-1, j] + 2 x[i, j+1] + 3 x[i+1, j-1] + 0.5.
        let w = t(
            &[1, 1, 3, 3],
            vec![0.0, 1.0, 0.0, 0.0, 0.0, 2.0, 3.0, 0.0, 0.0],
        );
        let b = t(&[1], vec![0.5]);
        let p = params([1, 1], [1, 1], [1, 1]);
        let mut y = t(&[2, 1, 3, 3], vec![0.0; 18]);
        ops::conv2d(&NativeBackend, &x, &w, Some(&b), p, &mut y).unwrap();
        let y = y.to_vec::<f32>().unwrap();
        let expect = [4.0, 18.0, 15.0, 11.0, 35.0, 27.0, 20.0, 23.0, 6.0];
        assert_eq!(y[..9], expect.map(|v| v + 0.5));
        assert_eq!(y[9..], expect.map(|v| v * 10.0 + 0.5));

        let dy = t(&[2, 1, 3, 3], vec![1.0; 18]);
        let mut dx = t(&[2, 1, 3, 3], vec![f32::NAN; 18]);
        ops::conv2d_backward_data(&NativeBackend, &dy, &w, p, &mut dx).unwrap();
        let dx_image = [1.0, 3.0, 3.0, 4.0, 6.0, 3.0, 3.0, 5.0, 2.0];
        assert_eq!(dx.to_vec::<f32>().unwrap(), [dx_image, dx_image].concat());

        let mut dw = t(&[1, 1, 3, 3], vec![f32::NAN; 9]);
        ops::conv2d_backward_filter(&NativeBackend, &x, &dy, p, &mut dw).unwrap();
        // Sum of x over the positions each tap reads, for both images (1 + 10).
        let taps = [12.0, 21.0, 16.0, 27.0, 45.0, 33.0, 24.0, 39.0, 28.0];
        assert_eq!(dw.to_vec::<f32>().unwrap(), taps.map(|v| v * 11.0));

        let mut db = t(&[1], vec![f32::NAN]);
        ops::conv2d_backward_bias(&NativeBackend, &dy, &mut db).unwrap();
        assert_eq!(db.to_vec::<f32>().unwrap(), [18.0]);
    }

    /// Deterministic values in [-1, 1).
    fn values(n: usize, seed: usize) -> Vec<f32> {
        (0..n)
            .map(|i| ((i * 7919 + seed * 104_729) % 2000) as f32 / 1000.0 - 1.0)
            .collect()
    }

    /// Direct convolution by the definition.
    fn naive(x: &Tensor, w: &Tensor, p: Conv2dParams, out: &[usize]) -> Vec<f32> {
        let (xd, wd) = (x.dims(), w.dims());
        let (xs, ws) = (x.as_slice::<f32>().unwrap(), w.as_slice::<f32>().unwrap());
        let mut y = vec![0.0; out.iter().product()];
        for (e, y) in y.iter_mut().enumerate() {
            let (n, o, oy, ox) = (
                e / (out[1] * out[2] * out[3]),
                e / (out[2] * out[3]) % out[1],
                e / out[3] % out[2],
                e % out[3],
            );
            for c in 0..xd[1] {
                for i in 0..wd[2] {
                    for j in 0..wd[3] {
                        let iy =
                            (oy * p.stride[0] + i * p.dilation[0]) as isize - p.padding[0] as isize;
                        let ix =
                            (ox * p.stride[1] + j * p.dilation[1]) as isize - p.padding[1] as isize;
                        if (0..xd[2] as isize).contains(&iy) && (0..xd[3] as isize).contains(&ix) {
                            let xv =
                                xs[((n * xd[1] + c) * xd[2] + iy as usize) * xd[3] + ix as usize];
                            *y += xv * ws[((o * wd[1] + c) * wd[2] + i) * wd[3] + j];
                        }
                    }
                }
            }
        }
        y
    }

    fn dot(a: &Tensor, b: &Tensor) -> f64 {
        let (a, b) = (a.as_slice::<f32>().unwrap(), b.as_slice::<f32>().unwrap());
        a.iter()
            .zip(b)
            .map(|(x, y)| f64::from(*x) * f64::from(*y))
            .sum()
    }

    /// Forward against the direct definition; both backward ops through the
    /// adjoint identity `<conv(x, w), dy> = <x, dx> = <w, dw>`.
    #[test]
    fn matches_the_definition_across_geometries() {
        let cases = [
            // n, c_in, h, w, c_out, kh, kw, stride, padding, dilation
            (2, 3, 7, 6, 4, 3, 3, [1, 1], [1, 1], [1, 1]),
            (2, 3, 7, 6, 4, 3, 2, [2, 1], [0, 1], [1, 1]),
            (1, 2, 9, 8, 3, 3, 3, [2, 3], [1, 2], [2, 1]),
            (3, 4, 5, 5, 2, 1, 1, [1, 1], [0, 0], [1, 1]),
            (2, 2, 5, 5, 2, 1, 1, [2, 2], [0, 0], [1, 1]),
            (1, 2, 4, 4, 2, 5, 5, [1, 1], [2, 2], [1, 1]),
            (2, 3, 5, 7, 4, 3, 3, [1, 1], [2, 2], [2, 2]),
            (0, 2, 5, 5, 3, 3, 3, [1, 1], [1, 1], [1, 1]),
            // Height stride 2 with the output as wide as the input.
            (2, 3, 9, 6, 4, 3, 3, [2, 1], [1, 1], [1, 1]),
            (1, 2, 8, 5, 3, 3, 1, [2, 1], [0, 0], [1, 1]),
        ];
        for (case, &(n, c, h, wd, o, kh, kw, s, pad, d)) in cases.iter().enumerate() {
            let p = params(s, pad, d);
            let x = t(&[n, c, h, wd], values(n * c * h * wd, 1));
            let w = t(&[o, c, kh, kw], values(o * c * kh * kw, 2));
            let plan = verjus_core::ops::Conv2dPlan::new(x.shape(), w.shape(), p).unwrap();
            let out = plan.output_shape().unwrap();
            let mut y = t(out.dims(), vec![f32::NAN; out.numel()]);
            ops::conv2d(&NativeBackend, &x, &w, None, p, &mut y).unwrap();
            let reference = naive(&x, &w, p, out.dims());
            let y_vals = y.to_vec::<f32>().unwrap();
            for (a, b) in y_vals.iter().zip(&reference) {
                assert!((a - b).abs() < 1e-4, "case {case}: {a} vs {b}");
            }

            let dy = t(out.dims(), values(out.numel(), 3));
            let mut dx = t(x.dims(), vec![f32::NAN; x.numel()]);
            let mut dw = t(w.dims(), vec![f32::NAN; w.numel()]);
            ops::conv2d_backward_data(&NativeBackend, &dy, &w, p, &mut dx).unwrap();
            ops::conv2d_backward_filter(&NativeBackend, &x, &dy, p, &mut dw).unwrap();
            let (lhs, by_x, by_w) = (dot(&y, &dy), dot(&x, &dx), dot(&w, &dw));
            let tol = 1e-4 * (1.0 + lhs.abs());
            assert!(
                (lhs - by_x).abs() < tol,
                "case {case}: <y,dy> {lhs} vs <x,dx> {by_x}"
            );
            assert!(
                (lhs - by_w).abs() < tol,
                "case {case}: <y,dy> {lhs} vs <w,dw> {by_w}"
            );
        }
    }
}
