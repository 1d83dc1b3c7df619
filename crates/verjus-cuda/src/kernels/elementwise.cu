// Elementwise unary ops, broadcasting binary ops and select, with gradients.
// The scalar formulas port verjus_core::ops::{UnaryOp, BinaryOp}; the op codes
// are the enum's order there (see ops/elementwise.rs on the host side).

// Up to three operands broadcast over an output of `rank` axes (strides 0 on
// broadcast axes). Mirrors the host's `layout::Strided3`.
struct Strided3 {
    i64 dims[VJ_MAX_RANK];
    i64 s0[VJ_MAX_RANK];
    i64 s1[VJ_MAX_RANK];
    i64 s2[VJ_MAX_RANK];
    int rank;
};

__device__ __forceinline__ void offsets3(const Strided3& L, i64 i, i64* o0, i64* o1, i64* o2) {
    i64 a = 0, b = 0, c = 0;
    for (int d = L.rank - 1; d >= 0; --d) {
        i64 k = i % L.dims[d];
        i /= L.dims[d];
        a += k * L.s0[d];
        b += k * L.s1[d];
        c += k * L.s2[d];
    }
    *o0 = a; *o1 = b; *o2 = c;
}

__device__ __forceinline__ float sigmoid_f(float x) {
    if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

__device__ __forceinline__ float unary_apply(int op, float x, float s) {
    switch (op) {
        case 0: return -x;
        case 1: return expf(x);
        case 2: return logf(x);
        case 3: return sqrtf(x);
        case 4: return 1.0f / sqrtf(x);
        case 5: return fabsf(x);
        case 6: return x * x;
        case 7: return 1.0f / x;
        case 8: return x < 0.0f ? 0.0f : x;  // NaN passes through, as in PyTorch
        case 9: return sigmoid_f(x);
        case 10: return tanhf(x);
        case 11: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f));
        case 12: return x * s;
        case 13: return x + s;
        default: return powf(x, s);
    }
}

__device__ __forceinline__ float unary_derivative(int op, float x, float y, float s) {
    switch (op) {
        case 0: return -1.0f;
        case 1: return y;
        case 2: return 1.0f / x;
        case 3: return 0.5f / y;
        case 4: return -0.5f * y / x;
        case 5: return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f);
        case 6: return 2.0f * x;
        case 7: return -y * y;
        case 8: return x > 0.0f ? 1.0f : 0.0f;
        case 9: return y * (1.0f - y);
        case 10: return 1.0f - y * y;
        case 11: {
            float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752440f));
            float pdf = expf(-0.5f * x * x) * 0.3989423f;
            return cdf + x * pdf;
        }
        case 12: return s;
        case 13: return 1.0f;
        default: return s * powf(x, s - 1.0f);
    }
}

extern "C" __global__ void unary_f32(const float* x, float* y, i64 n, int op, float s) {
    GRID_STRIDE(i, n) y[i] = unary_apply(op, x[i], s);
}

extern "C" __global__ void unary_backward_f32(const float* x, const float* y, const float* dy, float* dx, i64 n, int op, float s) {
    GRID_STRIDE(i, n) dx[i] = dy[i] * unary_derivative(op, x[i], y[i], s);
}

__device__ __forceinline__ float binary_apply(int op, float a, float b) {
    switch (op) {
        case 0: return a + b;
        case 1: return a - b;
        case 2: return a * b;
        case 3: return a / b;
        case 4: return fmaxf(a, b);
        case 5: return fminf(a, b);
        case 6: return powf(a, b);
        case 7: return a == b ? 1.0f : 0.0f;
        case 8: return a != b ? 1.0f : 0.0f;
        case 9: return a < b ? 1.0f : 0.0f;
        case 10: return a <= b ? 1.0f : 0.0f;
        case 11: return a > b ? 1.0f : 0.0f;
        default: return a >= b ? 1.0f : 0.0f;
    }
}

__device__ __forceinline__ void binary_partials(int op, float a, float b, float* da, float* db) {
    switch (op) {
        case 0: *da = 1.0f; *db = 1.0f; return;
        case 1: *da = 1.0f; *db = -1.0f; return;
        case 2: *da = b; *db = a; return;
        case 3: *da = 1.0f / b; *db = -a / (b * b); return;
        case 4: if (a >= b) { *da = 1.0f; *db = 0.0f; } else { *da = 0.0f; *db = 1.0f; } return;
        case 5: if (a <= b) { *da = 1.0f; *db = 0.0f; } else { *da = 0.0f; *db = 1.0f; } return;
        case 6: {
            float c = powf(a, b);
            *da = b * powf(a, b - 1.0f);
            *db = a > 0.0f ? c * logf(a) : 0.0f;
            return;
        }
        default: *da = 0.0f; *db = 0.0f; return;
    }
}

// c = a op b; `same` says both operands have the output's layout (no index math).
extern "C" __global__ void binary_f32(const float* a, const float* b, float* c, i64 n, int op, int same, Strided3 L) {
    if (same) {
        GRID_STRIDE(i, n) c[i] = binary_apply(op, a[i], b[i]);
    } else {
        GRID_STRIDE(i, n) {
            i64 oa, ob, unused;
            offsets3(L, i, &oa, &ob, &unused);
            c[i] = binary_apply(op, a[oa], b[ob]);
        }
    }
}

// ga[i] = dy[i] * dc/da and gb[i] = dy[i] * dc/db at every output position i
// (either may be null); the host sums them over broadcast axes afterwards.
extern "C" __global__ void binary_grad_f32(const float* a, const float* b, const float* dy, float* ga, float* gb, i64 n, int op, Strided3 L) {
    GRID_STRIDE(i, n) {
        i64 oa, ob, unused;
        offsets3(L, i, &oa, &ob, &unused);
        float pa, pb;
        binary_partials(op, a[oa], b[ob], &pa, &pb);
        float g = dy[i];
        if (ga) ga[i] = g * pa;
        if (gb) gb[i] = g * pb;
    }
}

// out = cond != 0 ? x : y; the unchosen operand is never read.
extern "C" __global__ void select_f32(const float* cond, const float* x, const float* y, float* out, i64 n, Strided3 L) {
    GRID_STRIDE(i, n) {
        i64 oc, ox, oy;
        offsets3(L, i, &oc, &ox, &oy);
        out[i] = cond[oc] != 0.0f ? x[ox] : y[oy];
    }
}
