// Random fills from the shared Philox stream. Draws follow verjus_core::rng
// exactly: element i of a draw at (seed, offset) takes lane i % 4 of Philox
// block offset + i / 4, so one thread per block hashes each block once and
// every device agrees.

// One thread per Philox block: elements 4b .. 4b + 3.
extern "C" __global__ void random_uniform(float* y, i64 n, u64 seed, u64 offset, float low, float high) {
    i64 blocks = (n + 3) / 4;
    GRID_STRIDE(b, blocks) {
        Philox4 w = philox_block(seed, offset + (u64)b);
        for (int l = 0; l < 4; ++l) {
            i64 i = 4 * b + l;
            if (i < n) y[i] = low + (high - low) * unit_uniform(w.v[l]);
        }
    }
}

// Box-Muller on lanes (0, 1) and (2, 3), as rng::box_muller.
__device__ __forceinline__ void box_muller(u32 w0, u32 w1, float* z0, float* z1) {
    float u1 = (float)((w0 >> 8) + 1) * (1.0f / 16777216.0f);
    float u2 = unit_uniform(w1);
    float r = sqrtf(-2.0f * logf(u1));
    float theta = 6.28318530717958647692f * u2;
    *z0 = r * cosf(theta);
    *z1 = r * sinf(theta);
}

extern "C" __global__ void random_normal(float* y, i64 n, u64 seed, u64 offset, float mean, float std) {
    i64 blocks = (n + 3) / 4;
    GRID_STRIDE(b, blocks) {
        Philox4 w = philox_block(seed, offset + (u64)b);
        float z[4];
        box_muller(w.v[0], w.v[1], &z[0], &z[1]);
        box_muller(w.v[2], w.v[3], &z[2], &z[3]);
        for (int l = 0; l < 4; ++l) {
            i64 i = 4 * b + l;
            if (i < n) y[i] = mean + std * z[l];
        }
    }
}
