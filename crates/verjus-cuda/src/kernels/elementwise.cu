// Elementwise unary ops, broadcasting binary ops and select, with gradients.
// The per-op formulas (unary_apply, unary_derivative, binary_apply,
// binary_partials, switching on the op's code) are written before this file
// from verjus_core's op table by src/elementwise_source.rs.

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

extern "C" __global__ void unary_f32(const float* x, float* y, i64 n, int op, float s) {
    GRID_STRIDE(i, n) y[i] = unary_apply(op, x[i], s);
}

extern "C" __global__ void unary_backward_f32(const float* x, const float* y, const float* dy, float* dx, i64 n, int op, float s) {
    GRID_STRIDE(i, n) dx[i] = dy[i] * unary_derivative(op, x[i], y[i], s);
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
