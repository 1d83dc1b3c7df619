// Fills, casts, random fills and dropout: bandwidth-bound loops over
// contiguous elements. Random draws follow verjus_core::rng exactly: element i
// of a draw at (seed, offset) takes lane i % 4 of Philox block offset + i / 4,
// so one thread per block hashes each block once and every device agrees.

extern "C" __global__ void fill_f32(float* y, i64 n, float v) { GRID_STRIDE(i, n) y[i] = v; }
extern "C" __global__ void fill_i32(int* y, i64 n, int v) { GRID_STRIDE(i, n) y[i] = v; }
extern "C" __global__ void fill_i64(i64* y, i64 n, i64 v) { GRID_STRIDE(i, n) y[i] = v; }

// Rust's `as`: float to integer truncates toward zero, saturates, NaN gives 0.
__device__ __forceinline__ int f32_to_i32(float v) {
    if (v != v) return 0;
    if (v >= 2147483648.0f) return 2147483647;
    if (v <= -2147483648.0f) return (int)(-2147483647 - 1);
    return (int)v;
}
__device__ __forceinline__ i64 f32_to_i64(float v) {
    if (v != v) return 0;
    if (v >= 9223372036854775808.0f) return 9223372036854775807LL;
    if (v <= -9223372036854775808.0f) return (i64)(-9223372036854775807LL - 1);
    return (i64)v;
}

extern "C" __global__ void cast_f32_i32(const float* x, int* y, i64 n) { GRID_STRIDE(i, n) y[i] = f32_to_i32(x[i]); }
extern "C" __global__ void cast_f32_i64(const float* x, i64* y, i64 n) { GRID_STRIDE(i, n) y[i] = f32_to_i64(x[i]); }
extern "C" __global__ void cast_i32_f32(const int* x, float* y, i64 n) { GRID_STRIDE(i, n) y[i] = (float)x[i]; }
extern "C" __global__ void cast_i64_f32(const i64* x, float* y, i64 n) { GRID_STRIDE(i, n) y[i] = (float)x[i]; }
extern "C" __global__ void cast_i32_i64(const int* x, i64* y, i64 n) { GRID_STRIDE(i, n) y[i] = (i64)x[i]; }
// i64 to i32 wraps (keeps the low 32 bits), as Rust's `as` does.
extern "C" __global__ void cast_i64_i32(const i64* x, int* y, i64 n) {
    GRID_STRIDE(i, n) y[i] = (int)(u32)(u64)x[i];
}

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

// Inverted dropout: kept where the 24-bit draw is >= threshold (rng::keeps).
extern "C" __global__ void dropout_f32(const float* x, float* y, i64 n, u64 seed, u64 offset, u32 threshold, float scale) {
    i64 blocks = (n + 3) / 4;
    GRID_STRIDE(b, blocks) {
        Philox4 w = philox_block(seed, offset + (u64)b);
        for (int l = 0; l < 4; ++l) {
            i64 i = 4 * b + l;
            if (i < n) y[i] = x[i] * (((w.v[l] >> 8) >= threshold) ? scale : 0.0f);
        }
    }
}
