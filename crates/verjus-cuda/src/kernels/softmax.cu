// Softmax, log-softmax and their gradients along one axis. A tensor is viewed
// as [outer, len, inner] around the axis; one team (a warp, or a block for long
// rows) handles one row of `len` elements `inner` apart. Arithmetic follows the
// native backend: the row maximum lets NaN win, exponentials are of `x - max`.

__device__ __forceinline__ const float* row_of(const float* p, i64 r, i64 len, i64 inner) {
    return p + (r / inner) * len * inner + (r % inner);
}

extern "C" __global__ void softmax_f32(const float* x, float* y, i64 outer, i64 len, i64 inner, int log, int per_block) {
    Team t = team(per_block);
    for (i64 r = t.first; r < outer * inner; r += t.step) {
        const float* xr = row_of(x, r, len, inner);
        float* yr = y + (xr - x);
        float m = -__int_as_float(0x7f800000);
        for (i64 j = t.lane; j < len; j += t.width) m = nan_max(m, xr[j * inner]);
        m = team_combine(t, 3, m);
        float s = 0.0f;
        for (i64 j = t.lane; j < len; j += t.width) s += expf(xr[j * inner] - m);
        s = team_combine(t, 0, s);
        if (log) {
            float ls = logf(s);
            for (i64 j = t.lane; j < len; j += t.width) yr[j * inner] = (xr[j * inner] - m) - ls;
        } else {
            float inv = 1.0f / s;
            for (i64 j = t.lane; j < len; j += t.width) yr[j * inner] = expf(xr[j * inner] - m) * inv;
        }
    }
}

// softmax: dx = y * (dy - sum(dy * y)); log-softmax: dx = dy - exp(y) * sum(dy).
extern "C" __global__ void softmax_backward_f32(const float* y, const float* dy, float* dx, i64 outer, i64 len, i64 inner, int log, int per_block) {
    Team t = team(per_block);
    for (i64 r = t.first; r < outer * inner; r += t.step) {
        i64 base = row_of(y, r, len, inner) - y;
        float s = 0.0f;
        for (i64 j = t.lane; j < len; j += t.width) {
            i64 k = base + j * inner;
            s += log ? dy[k] : dy[k] * y[k];
        }
        s = team_combine(t, 0, s);
        for (i64 j = t.lane; j < len; j += t.width) {
            i64 k = base + j * inner;
            dx[k] = log ? dy[k] - expf(y[k]) * s : y[k] * (dy[k] - s);
        }
    }
}
