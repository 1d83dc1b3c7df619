// Max pooling, forward and backward. It follows the native rule exactly: the
// first maximum of a window in row-major order, NaN counting as the largest
// value; cuDNN does not document which of tied maxima receives the gradient,
// so these are own kernels (average pooling goes through cuDNN).

struct PoolGeom {
    i64 planes, h, w, oh, ow;
    int kh, kw, sh, sw, ph, pw;
};

// Flat index (within the plane) of the window's first maximum, or -1 for a
// window that covers padding only.
__device__ __forceinline__ i64 window_argmax(const float* x, const PoolGeom& G, i64 oy, i64 ox) {
    i64 best_at = -1;
    float best = 0.0f;
    for (int ky = 0; ky < G.kh; ++ky) {
        i64 iy = oy * G.sh - G.ph + ky;
        if (iy < 0 || iy >= G.h) continue;
        for (int kx = 0; kx < G.kw; ++kx) {
            i64 ix = ox * G.sw - G.pw + kx;
            if (ix < 0 || ix >= G.w) continue;
            float v = x[iy * G.w + ix];
            if (best_at < 0 || v > best || (v != v && best == best)) { best = v; best_at = iy * G.w + ix; }
        }
    }
    return best_at;
}

extern "C" __global__ void max_pool2d_f32(const float* x, float* y, PoolGeom G) {
    i64 n = G.planes * G.oh * G.ow;
    GRID_STRIDE(i, n) {
        i64 plane = i / (G.oh * G.ow), r = i % (G.oh * G.ow);
        const float* xp = x + plane * G.h * G.w;
        i64 at = window_argmax(xp, G, r / G.ow, r % G.ow);
        y[i] = at < 0 ? -__int_as_float(0x7f800000) : xp[at];
    }
}

// One thread per input element gathers dy from every window whose first
// maximum it is: deterministic, no atomics.
extern "C" __global__ void max_pool2d_backward_f32(const float* x, const float* dy, float* dx, PoolGeom G) {
    i64 n = G.planes * G.h * G.w;
    GRID_STRIDE(i, n) {
        i64 plane = i / (G.h * G.w), r = i % (G.h * G.w);
        i64 iy = r / G.w, ix = r % G.w;
        const float* xp = x + plane * G.h * G.w;
        const float* dyp = dy + plane * G.oh * G.ow;
        // Windows oy with oy * sh - ph <= iy <= oy * sh - ph + kh - 1.
        i64 ny = iy + G.ph, nx = ix + G.pw;
        i64 oy0 = ny >= G.kh ? (ny - G.kh) / G.sh + 1 : 0;
        i64 oy1 = ny / G.sh;
        i64 ox0 = nx >= G.kw ? (nx - G.kw) / G.sw + 1 : 0;
        i64 ox1 = nx / G.sw;
        float acc = 0.0f;
        for (i64 oy = oy0; oy <= oy1 && oy < G.oh; ++oy)
            for (i64 ox = ox0; ox <= ox1 && ox < G.ow; ++ox)
                if (window_argmax(xp, G, oy, ox) == r) acc += dyp[oy * G.ow + ox];
        dx[i] = acc;
    }
}
