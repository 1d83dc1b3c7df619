// Max pooling, forward and backward. It follows the native rule exactly: the
// first maximum of a window in row-major order, NaN counting as the largest
// value; cuDNN does not document which of tied maxima receives the gradient,
// so these are own kernels (average pooling goes through cuDNN).

struct PoolGeom {
    i64 planes, h, w, oh, ow;
    int kh, kw, sh, sw, ph, pw;
};

// Index arithmetic is 32-bit where the tensors allow (see fits_i32): 64-bit
// division is emulated on the GPU and made the backward 2.5x slower than
// PyTorch's on an H100.

// Flat index (within the plane) of the window's first maximum, or -1 for a
// window that covers padding only.
template <typename I>
__device__ __forceinline__ I window_argmax(const float* x, const PoolGeom& G, I oy, I ox) {
    I h = (I)G.h, w = (I)G.w, best_at = -1;
    float best = 0.0f;
    for (int ky = 0; ky < G.kh; ++ky) {
        I iy = oy * G.sh - G.ph + ky;
        if (iy < 0 || iy >= h) continue;
        for (int kx = 0; kx < G.kw; ++kx) {
            I ix = ox * G.sw - G.pw + kx;
            if (ix < 0 || ix >= w) continue;
            float v = x[iy * w + ix];
            if (best_at < 0 || v > best || (v != v && best == best)) { best = v; best_at = iy * w + ix; }
        }
    }
    return best_at;
}

template <typename I>
__device__ __forceinline__ void max_pool(const float* x, float* y, const PoolGeom& G) {
    I plane_in = (I)(G.h * G.w), ow = (I)G.ow, plane_out = (I)(G.oh * G.ow);
    I n = (I)G.planes * plane_out;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (I)blockDim.x * gridDim.x) {
        I plane = i / plane_out, r = i - plane * plane_out;
        const float* xp = x + (i64)plane * plane_in;
        I at = window_argmax<I>(xp, G, r / ow, r % ow);
        y[i] = at < 0 ? -__int_as_float(0x7f800000) : xp[at];
    }
}

extern "C" __global__ void max_pool2d_f32(const float* x, float* y, PoolGeom G) {
    if (fits_i32(G.planes * max(G.h * G.w, G.oh * G.ow))) max_pool<int>(x, y, G);
    else max_pool<i64>(x, y, G);
}

// One thread per input element gathers dy from every window whose first
// maximum it is: deterministic, no atomics.
template <typename I>
__device__ __forceinline__ void max_pool_backward(const float* x, const float* dy, float* dx, const PoolGeom& G) {
    I h = (I)G.h, w = (I)G.w, oh = (I)G.oh, ow = (I)G.ow, plane_in = h * w;
    I n = (I)G.planes * plane_in;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (I)blockDim.x * gridDim.x) {
        I plane = i / plane_in, r = i - plane * plane_in;
        I iy = r / w, ix = r - iy * w;
        const float* xp = x + (i64)plane * plane_in;
        const float* dyp = dy + (i64)plane * oh * ow;
        // Windows oy with oy * sh - ph <= iy <= oy * sh - ph + kh - 1.
        I ny = iy + G.ph, nx = ix + G.pw;
        I oy0 = ny >= G.kh ? (ny - G.kh) / G.sh + 1 : 0;
        I oy1 = ny / G.sh;
        I ox0 = nx >= G.kw ? (nx - G.kw) / G.sw + 1 : 0;
        I ox1 = nx / G.sw;
        float acc = 0.0f;
        for (I oy = oy0; oy <= oy1 && oy < oh; ++oy)
            for (I ox = ox0; ox <= ox1 && ox < ow; ++ox)
                if (window_argmax<I>(xp, G, oy, ox) == r) acc += dyp[oy * ow + ox];
        dx[i] = acc;
    }
}

extern "C" __global__ void max_pool2d_backward_f32(const float* x, const float* dy, float* dx, PoolGeom G) {
    if (fits_i32(G.planes * max(G.h * G.w, G.oh * G.ow))) max_pool_backward<int>(x, dy, dx, G);
    else max_pool_backward<i64>(x, dy, dx, G);
}
