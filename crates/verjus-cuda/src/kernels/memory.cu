// Fills and casts: bandwidth-bound loops over contiguous elements.

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
