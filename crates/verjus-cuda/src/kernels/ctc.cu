// The CTC loss: the log-space forward-backward algorithm, one block per batch
// entry, its threads over the states of the extended target (blank, label 1,
// blank, ..., blank; L = 2 S + 1) and one frame at a time, in the form of
// crates/verjus-native/src/ctc.rs: alpha includes frame t's emission, beta
// excludes it, so the posterior is exp(alpha + beta - total). `alpha [B, T, L]`
// and `beta [B, 2, L]` are scratch. Lengths and labels were checked on the
// host side.

__device__ __forceinline__ float ctc_combine(float a, float b, int max_approx) {
    float m = fmaxf(a, b);
    if (max_approx || m == -__int_as_float(0x7f800000)) return m;
    return m + logf(expf(a - m) + expf(b - m));
}

struct CtcEntry {
    const float* lp;  // [T, C] of this entry
    const int* target;
    i64 classes;
    int blank;
    __device__ int cls(i64 s) const { return (s & 1) ? target[s >> 1] : blank; }
    __device__ bool skips(i64 s) const { return (s & 1) && s >= 3 && target[s >> 1] != target[(s >> 1) - 1]; }
    __device__ float emit(i64 t, i64 s) const { return lp[t * classes + cls(s)]; }
};

// losses [B]; grad [B, T, C] or null. alpha [B, T, L] and beta [B, 2, L] with
// L = 2 * max_target + 1.
extern "C" __global__ void ctc_loss(const float* log_probs, const int* targets, const int* input_lengths,
                                    const int* target_lengths, float* losses, float* grad, float* alpha_all,
                                    float* beta_all, i64 time, i64 classes, i64 max_target, int blank,
                                    int max_approx) {
    const float NEG_INF = -__int_as_float(0x7f800000);
    __shared__ float total_shared;
    i64 b = blockIdx.x;
    i64 frames = input_lengths[b];
    i64 states = 2 * (i64)target_lengths[b] + 1;
    i64 width = 2 * max_target + 1;
    CtcEntry e{log_probs + b * time * classes, targets + b * max_target, classes, blank};
    float* alpha = alpha_all + b * time * width;
    float* beta = beta_all + b * 2 * width;
    float* g = grad ? grad + b * time * classes : nullptr;
    if (g) {
        for (i64 i = threadIdx.x; i < time * classes; i += blockDim.x) g[i] = 0.0f;
    }
    if (frames == 0) {
        if (threadIdx.x == 0) losses[b] = states == 1 ? 0.0f : __int_as_float(0x7f800000);
        return;
    }
    for (i64 s = threadIdx.x; s < states; s += blockDim.x) alpha[s] = s < 2 ? e.emit(0, s) : NEG_INF;
    __syncthreads();
    for (i64 t = 1; t < frames; ++t) {
        const float* prev = alpha + (t - 1) * width;
        float* cur = alpha + t * width;
        for (i64 s = threadIdx.x; s < states; s += blockDim.x) {
            float a = prev[s];
            if (s >= 1) a = ctc_combine(a, prev[s - 1], max_approx);
            if (e.skips(s)) a = ctc_combine(a, prev[s - 2], max_approx);
            cur[s] = a + e.emit(t, s);
        }
        __syncthreads();
    }
    const float* last = alpha + (frames - 1) * width;
    if (threadIdx.x == 0) {
        total_shared = states == 1 ? last[0] : ctc_combine(last[states - 1], last[states - 2], max_approx);
        losses[b] = total_shared == NEG_INF ? __int_as_float(0x7f800000) : -total_shared;
    }
    __syncthreads();
    float total = total_shared;
    if (!g || total == NEG_INF) return;
    if (max_approx) {
        // The best alignment, backtracked through alpha (first of equals in
        // the order stay, advance, skip), as the native backend.
        if (threadIdx.x == 0) {
            i64 s = states - 1;
            if (states > 1 && last[states - 2] > last[s]) s = states - 2;
            for (i64 t = frames - 1; t >= 0; --t) {
                g[t * classes + e.cls(s)] = -1.0f;
                if (t == 0) break;
                const float* prev = alpha + (t - 1) * width;
                i64 best = s;
                if (s >= 1 && prev[s - 1] > prev[best]) best = s - 1;
                if (e.skips(s) && prev[s - 2] > prev[best]) best = s - 2;
                s = best;
            }
        }
        return;
    }
    float* cur = beta;
    float* next = beta + width;
    for (i64 s = threadIdx.x; s < states; s += blockDim.x) cur[s] = s >= states - 2 ? 0.0f : NEG_INF;
    __syncthreads();
    for (i64 t = frames - 1; t >= 0; --t) {
        if (t + 1 < frames) {
            for (i64 s = threadIdx.x; s < states; s += blockDim.x) {
                float v = next[s] + e.emit(t + 1, s);
                if (s + 1 < states) v = ctc_combine(v, next[s + 1] + e.emit(t + 1, s + 1), 0);
                if (s + 2 < states && e.skips(s + 2)) v = ctc_combine(v, next[s + 2] + e.emit(t + 1, s + 2), 0);
                cur[s] = v;
            }
            __syncthreads();
        }
        for (i64 s = threadIdx.x; s < states; s += blockDim.x) {
            float post = expf(alpha[t * width + s] + cur[s] - total);
            atomicAdd(&g[t * classes + e.cls(s)], -post);
        }
        __syncthreads();
        float* tmp = cur;
        cur = next;
        next = tmp;
    }
}
