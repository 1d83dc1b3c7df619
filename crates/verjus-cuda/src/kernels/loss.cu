// The fused softmax cross-entropy from logits with integer labels. One team (a
// warp, or a block for many classes) handles one example's row of logits, with
// the arithmetic of softmax.cu: the row maximum lets NaN win, exponentials are
// of `x - max`.

// losses[i] = -sum_c target[i, c] * log_softmax(logits[i])[c] with the smoothed
// target (1 - s + s / classes on the label, s / classes elsewhere); dlogits (if
// not null) = (softmax - target) * grad_scale. A label is only compared with
// class numbers, so one out of range reads nothing out of bounds (the deferred
// check of src/deferred/ reports it; the result is discarded).
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
