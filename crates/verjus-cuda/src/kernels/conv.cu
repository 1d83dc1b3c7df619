// The per-channel bias of a convolution's output and its gradient (the
// convolution itself and its gradients go through cuDNN). cuDNN's own bias
// gradient (calc_bias_diff_nchw_packed) took 0.5-1 ms for a [1024, 32, 28, 28]
// gradient on an H100, a third of the whole CNN step; these kernels read it at
// memory speed.
//
// Index arithmetic is 32-bit where the tensor allows: 64-bit division and
// remainder are emulated in software on the GPU, and dominated these kernels.

template <typename I>
__device__ __forceinline__ void add_channel_bias(float* y, const float* b, I total, I c, I hw) {
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (I)blockDim.x * gridDim.x)
        y[i] += b[(i / hw) % c];
}

// y[n, c, :] += b[c] over an NCHW tensor with hw elements per plane.
extern "C" __global__ void add_channel_bias_f32(float* y, const float* b, i64 n, i64 c, i64 hw) {
    i64 total = n * c * hw;
    if (fits_i32(total)) add_channel_bias<int>(y, b, (int)total, (int)c, (int)hw);
    else add_channel_bias<i64>(y, b, total, c, hw);
}

// The channel sums of dy [n, c, hw], first pass: block b sums channel b % c
// over the samples [k * per, (k + 1) * per), k = b / c, into part[b]. The grid
// is exactly c * chunks blocks. No atomics: the result does not depend on
// timing.
extern "C" __global__ void channel_sum_partial_f32(const float* dy, float* part, i64 n, i64 c, i64 hw, i64 per) {
    i64 b = blockIdx.x;
    i64 ch = b % c, k = b / c;
    i64 end = min(n, (k + 1) * per);
    float acc = 0.0f;
    for (i64 s = k * per; s < end; ++s) {
        const float* plane = dy + (s * c + ch) * hw;
        for (i64 j = threadIdx.x; j < hw; j += blockDim.x) acc += plane[j];
    }
    Team t;
    t.block = true; t.first = b; t.step = gridDim.x; t.lane = threadIdx.x; t.width = blockDim.x;
    acc = team_combine(t, 0, acc);
    if (threadIdx.x == 0) part[b] = acc;
}

// Second pass: db[ch] = the sum of part[k * c + ch] over the chunks k, one
// warp per channel.
extern "C" __global__ void channel_sum_finish_f32(const float* part, float* db, i64 c, i64 chunks) {
    WARP_STRIDE(ch, lane, c) {
        float acc = 0.0f;
        for (i64 k = lane; k < chunks; k += 32) acc += part[k * c + ch];
        acc = warp_sum(acc);
        if (lane == 0) db[ch] = acc;
    }
}
