// Depthwise 1-D convolution, channels last, and its gradients (formulas in
// verjus_core::ops::depthwise). One thread per output element (neighbouring
// threads take neighbouring channels, so every read is coalesced); the filter
// and bias gradients take one thread per (channel, tap) and per channel,
// summing down all output rows.

// The input frame tap k of output frame t reads, or -1 outside 0..frames.
__device__ __forceinline__ i64 dw_source(i64 t, i64 k, i64 left, i64 dilation, i64 frames) {
    i64 s = t + k * dilation - left;
    return (s >= 0 && s < frames) ? s : -1;
}

extern "C" __global__ void depthwise_f32(const float* x, const float* filter, const float* bias, float* y,
                                         i64 batch, i64 frames, i64 channels, i64 taps, i64 out_frames,
                                         i64 left, i64 dilation) {
    GRID_STRIDE(i, batch * out_frames * channels) {
        i64 c = i % channels, row = i / channels;
        i64 t = row % out_frames, n = row / out_frames;
        float acc = bias ? bias[c] : 0.0f;
        for (i64 k = 0; k < taps; ++k) {
            i64 s = dw_source(t, k, left, dilation, frames);
            if (s >= 0) acc += filter[c * taps + k] * x[(n * frames + s) * channels + c];
        }
        y[i] = acc;
    }
}

// dx[n, s, c] = sum_k filter[c, k] dy[n, s + left - k d, c] over valid output frames.
extern "C" __global__ void depthwise_dx_f32(const float* filter, const float* dy, float* dx, i64 batch,
                                            i64 frames, i64 channels, i64 taps, i64 out_frames, i64 left,
                                            i64 dilation) {
    GRID_STRIDE(i, batch * frames * channels) {
        i64 c = i % channels, row = i / channels;
        i64 s = row % frames, n = row / frames;
        float acc = 0.0f;
        for (i64 k = 0; k < taps; ++k) {
            i64 t = s + left - k * dilation;
            if (t >= 0 && t < out_frames) acc += filter[c * taps + k] * dy[(n * out_frames + t) * channels + c];
        }
        dx[i] = acc;
    }
}

// dfilter[c, k] = sum_{n, t} dy[n, t, c] x[n, source(t, k), c] (one thread per
// (c, k), channels fastest); dbias[c] = sum_{n, t} dy[n, t, c] by the k = 0 threads.
extern "C" __global__ void depthwise_dfilter_f32(const float* x, const float* dy, float* dfilter, float* dbias,
                                                 i64 batch, i64 frames, i64 channels, i64 taps,
                                                 i64 out_frames, i64 left, i64 dilation) {
    GRID_STRIDE(i, channels * taps) {
        i64 c = i % channels, k = i / channels;
        float acc = 0.0f, bias_acc = 0.0f;
        for (i64 n = 0; n < batch; ++n) {
            for (i64 t = 0; t < out_frames; ++t) {
                float g = dy[(n * out_frames + t) * channels + c];
                bias_acc += g;
                i64 s = dw_source(t, k, left, dilation, frames);
                if (s >= 0) acc += g * x[(n * frames + s) * channels + c];
            }
        }
        if (dfilter) dfilter[c * taps + k] = acc;
        if (dbias && k == 0) dbias[c] = bias_acc;
    }
}
