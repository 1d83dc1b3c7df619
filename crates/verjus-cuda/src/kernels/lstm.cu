// The LSTM's own kernels: the fused gates of one step (`lstm_cell`, whose
// products are cuBLAS GEMMs) and its backward, and the fix-ups of the cuDNN
// sequence path (padding frames and sequences of length 0). One thread per
// (sequence, hidden unit); gates are PyTorch's i, f, g, o, each `hidden` wide.
// Null pointers stand for absent operands (zeros) or unwanted outputs.

__device__ __forceinline__ float lstm_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// `gates [B, 4H]` holds x W_ih^T + h W_hh^T and receives the activations
// i, f, g, o (what the backward reads); c = f * c0 + i * g and h = o * tanh(c)
// go to `c` and `c_keep`, and to `h` and `h2`.
extern "C" __global__ void lstm_cell_forward(float* gates, const float* b_ih, const float* b_hh, const float* c0,
                                             float* c, float* c_keep, float* h, float* h2, i64 batch, i64 hidden) {
    GRID_STRIDE(e, batch * hidden) {
        i64 b = e / hidden, j = e % hidden;
        float* g = gates + b * 4 * hidden + j;
        float pre[4];
        for (int k = 0; k < 4; ++k) {
            i64 col = k * hidden + j;
            float bias = (b_ih ? b_ih[col] : 0.0f) + (b_hh ? b_hh[col] : 0.0f);
            pre[k] = g[k * hidden] + bias;
        }
        float i = lstm_sigmoid(pre[0]), f = lstm_sigmoid(pre[1]), gt = tanhf(pre[2]), o = lstm_sigmoid(pre[3]);
        float ct = f * (c0 ? c0[e] : 0.0f) + i * gt;
        float ht = o * tanhf(ct);
        g[0] = i;
        g[hidden] = f;
        g[2 * hidden] = gt;
        g[3 * hidden] = o;
        c[e] = ct;
        c_keep[e] = ct;
        h[e] = ht;
        if (h2) h2[e] = ht;
    }
}

// From the activations `acts [B, 4H]`, the new cell `c`, the old one `c0` and
// the gradients of h (`dh_a + dh_b`) and of c (`dc`): the pre-activation
// gradients `dgates [B, 4H]` and the gradient of c0 (`dc0`).
extern "C" __global__ void lstm_cell_backward(const float* acts, const float* c, const float* c0, const float* dh_a,
                                              const float* dh_b, const float* dc, float* dgates, float* dc0,
                                              i64 batch, i64 hidden) {
    GRID_STRIDE(e, batch * hidden) {
        i64 b = e / hidden, j = e % hidden;
        const float* a = acts + b * 4 * hidden + j;
        float i = a[0], f = a[hidden], g = a[2 * hidden], o = a[3 * hidden];
        float dh = (dh_a ? dh_a[e] : 0.0f) + (dh_b ? dh_b[e] : 0.0f);
        float tc = tanhf(c[e]);
        float dct = (dc ? dc[e] : 0.0f) + dh * o * (1.0f - tc * tc);
        float cp = c0 ? c0[e] : 0.0f;
        float* d = dgates + b * 4 * hidden + j;
        d[0] = dct * g * i * (1.0f - i);
        d[hidden] = dct * cp * f * (1.0f - f);
        d[2 * hidden] = dct * i * (1.0f - g * g);
        d[3 * hidden] = dh * tc * o * (1.0f - o);
        if (dc0) dc0[e] = dct * f;
    }
}

// v[t, b, :] = 0 for every frame t >= lengths[b] of `v [steps, batch, width]`.
extern "C" __global__ void lstm_mask_frames(float* v, const int* lengths, i64 steps, i64 batch, i64 width) {
    GRID_STRIDE(e, steps * batch * width) {
        i64 row = e / width;
        if (row / batch >= (i64)lengths[row % batch]) v[e] = 0.0f;
    }
}

// dst[b, :] = fill[b, :] (0 without `fill`) for the sequences of length 0,
// src[b, :] for the others (`dst`, `src`, `fill` are [batch, width]; `src`
// may be `dst`).
extern "C" __global__ void lstm_empty_rows(float* dst, const float* src, const float* fill, const int* lengths,
                                           i64 batch, i64 width) {
    GRID_STRIDE(e, batch * width) {
        if (lengths[e / width] == 0) {
            dst[e] = fill ? fill[e] : 0.0f;
        } else if (dst != src) {
            dst[e] = src[e];
        }
    }
}
