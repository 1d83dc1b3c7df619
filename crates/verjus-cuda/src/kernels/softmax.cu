// Softmax, log-softmax and their gradients along one axis, and the fused
// softmax cross-entropy. A tensor is viewed as [outer, len, inner] around the
// axis; one team (a warp, or a block for long rows) handles one row of `len`
// elements `inner` apart. Arithmetic follows the native backend: the row
// maximum lets NaN win, exponentials are of `x - max`.

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

// losses[i] = -sum_c target[i, c] * log_softmax(logits[i])[c] with the smoothed
// target (1 - s + s / classes on the label, s / classes elsewhere); dlogits (if
// not null) = (softmax - target) * grad_scale. Labels were checked on the host side.
template <typename L>
__device__ void cross_entropy(const float* logits, const L* labels, float* losses, float* dlogits, i64 n, i64 classes, float smoothing, float grad_scale, int per_block) {
    Team t = team(per_block);
    float off = smoothing / (float)classes;
    for (i64 r = t.first; r < n; r += t.step) {
        const float* row = logits + r * classes;
        i64 label = (i64)labels[r];
        float m = -__int_as_float(0x7f800000);
        for (i64 c = t.lane; c < classes; c += t.width) m = nan_max(m, row[c]);
        m = team_combine(t, 3, m);
        float s = 0.0f;
        for (i64 c = t.lane; c < classes; c += t.width) s += expf(row[c] - m);
        s = team_combine(t, 0, s);
        float lse = m + logf(s);
        float loss = 0.0f;
        for (i64 c = t.lane; c < classes; c += t.width) {
            float target = off + (c == label ? 1.0f - smoothing : 0.0f);
            float log_p = row[c] - lse;
            loss -= target * log_p;
            if (dlogits) dlogits[r * classes + c] = (expf(log_p) - target) * grad_scale;
        }
        loss = team_combine(t, 0, loss);
        if (t.lane == 0) losses[r] = loss;
    }
}

extern "C" __global__ void cross_entropy_i64(const float* logits, const i64* labels, float* losses, float* dlogits, i64 n, i64 classes, float smoothing, float grad_scale, int per_block) {
    cross_entropy<i64>(logits, labels, losses, dlogits, n, classes, smoothing, grad_scale, per_block);
}

extern "C" __global__ void cross_entropy_i32(const float* logits, const int* labels, float* losses, float* dlogits, i64 n, i64 classes, float smoothing, float grad_scale, int per_block) {
    cross_entropy<int>(logits, labels, losses, dlogits, n, classes, smoothing, grad_scale, per_block);
}
