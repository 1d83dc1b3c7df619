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

// bfloat16 and float16 are stored as their 16 bits (`u16`); the conversions
// give the bits the host's `half` crate gives: round to nearest even, NaN kept
// (bf16 sets the quiet bit), overflow to infinity. No cuda_bf16.h is needed.
typedef unsigned short u16;
__device__ __forceinline__ u16 f32_to_bf16(float v) {
    u32 u = __float_as_uint(v);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (u16)(u >> 16);
}
__device__ __forceinline__ float bf16_to_f32(u16 h) { return __uint_as_float(((u32)h) << 16); }
__device__ __forceinline__ u16 f32_to_f16(float v) {
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
    return h;
}
__device__ __forceinline__ float f16_to_f32(u16 h) {
    float v;
    asm("cvt.f32.f16 %0, %1;" : "=f"(v) : "h"(h));
    return v;
}

extern "C" __global__ void fill_u16(u16* y, i64 n, u16 v) { GRID_STRIDE(i, n) y[i] = v; }

// Every other type converts to and from the 16-bit floats through float32.
#define CAST(name, S, D, expr) \
    extern "C" __global__ void name(const S* x, D* y, i64 n) { GRID_STRIDE(i, n) { S v = x[i]; y[i] = expr; } }
CAST(cast_f32_bf16, float, u16, f32_to_bf16(v))
CAST(cast_i32_bf16, int, u16, f32_to_bf16((float)v))
CAST(cast_i64_bf16, i64, u16, f32_to_bf16((float)v))
CAST(cast_f16_bf16, u16, u16, f32_to_bf16(f16_to_f32(v)))
CAST(cast_bf16_f32, u16, float, bf16_to_f32(v))
CAST(cast_bf16_i32, u16, int, f32_to_i32(bf16_to_f32(v)))
CAST(cast_bf16_i64, u16, i64, f32_to_i64(bf16_to_f32(v)))
CAST(cast_bf16_f16, u16, u16, f32_to_f16(bf16_to_f32(v)))
CAST(cast_f32_f16, float, u16, f32_to_f16(v))
CAST(cast_i32_f16, int, u16, f32_to_f16((float)v))
CAST(cast_i64_f16, i64, u16, f32_to_f16((float)v))
CAST(cast_f16_f32, u16, float, f16_to_f32(v))
CAST(cast_f16_i32, u16, int, f32_to_i32(f16_to_f32(v)))
CAST(cast_f16_i64, u16, i64, f32_to_i64(f16_to_f32(v)))
