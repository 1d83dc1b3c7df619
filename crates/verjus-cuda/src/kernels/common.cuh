// Shared by every verjus kernel module (prepended to each source before NVRTC
// compiles it, so no include paths are needed).
//
// Indices are 64-bit: verjus allows tensors of up to 2^34 elements. Kernels use
// grid-stride loops, so any grid the host picks covers the whole range.

typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int u32;

#define VJ_MAX_RANK 12

// Whether 32-bit indices cover `n` elements and a grid-stride step past them
// (at most 2^24 threads in any grid the host launches) without overflow.
__device__ __forceinline__ bool fits_i32(i64 n) {
    return n < (1LL << 31) - (1LL << 24);
}

#define GRID_STRIDE(i, n) \
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (i64)blockDim.x * gridDim.x)

// One warp per item: `item` counts warps across the grid, `lane` is the lane.
#define WARP_STRIDE(item, lane, n)                                                       \
    const int lane = threadIdx.x & 31;                                                   \
    for (i64 item = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; item < (n);       \
         item += ((i64)blockDim.x * gridDim.x) >> 5)

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Maximum where NaN wins (as the native backend's softmax does).
__device__ __forceinline__ float nan_max(float a, float b) {
    return (a != a) ? a : ((b != b) ? b : fmaxf(a, b));
}

__device__ __forceinline__ float warp_nan_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = nan_max(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Philox-4x32-10, exactly as verjus_core::rng: counter (lo, hi, 0, 0), key (lo, hi).
struct Philox4 { u32 v[4]; };

__device__ __forceinline__ Philox4 philox_block(u64 seed, u64 block) {
    u32 c0 = (u32)block, c1 = (u32)(block >> 32), c2 = 0, c3 = 0;
    u32 k0 = (u32)seed, k1 = (u32)(seed >> 32);
    for (int round = 0; round < 10; ++round) {
        if (round > 0) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
        u32 hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        u32 hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        u32 n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
    }
    Philox4 r; r.v[0] = c0; r.v[1] = c1; r.v[2] = c2; r.v[3] = c3;
    return r;
}

__device__ __forceinline__ float unit_uniform(u32 w) {
    return (float)(w >> 8) * (1.0f / 16777216.0f);
}

// A group of threads that works on one item: a warp, or (for long items) a whole
// block. `combine` codes: 0 sum, 1 max and 2 min (both ignoring NaN like
// f32::max / f32::min), 3 max where NaN wins.
struct Team {
    i64 first, step;
    int lane, width;
    bool block;
};

__device__ __forceinline__ Team team(int per_block) {
    Team t;
    t.block = per_block != 0;
    if (t.block) {
        t.first = blockIdx.x; t.step = gridDim.x; t.lane = threadIdx.x; t.width = blockDim.x;
    } else {
        i64 g = (i64)blockIdx.x * blockDim.x + threadIdx.x;
        t.first = g >> 5; t.step = ((i64)blockDim.x * gridDim.x) >> 5; t.lane = threadIdx.x & 31; t.width = 32;
    }
    return t;
}

__device__ __forceinline__ float combine(int how, float a, float b) {
    switch (how) {
        case 0: return a + b;
        case 1: return fmaxf(a, b);
        case 2: return fminf(a, b);
        default: return nan_max(a, b);
    }
}

__device__ __forceinline__ float combine_identity(int how) {
    if (how == 0) return 0.0f;
    if (how == 3) return -__int_as_float(0x7f800000);
    return __int_as_float(0x7fc00000);
}

__device__ __forceinline__ float warp_combine(int how, float v) {
    for (int o = 16; o > 0; o >>= 1) v = combine(how, v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Combines `v` over the team; every thread of the team gets the result.
__device__ __forceinline__ float team_combine(const Team& t, int how, float v) {
    v = warp_combine(how, v);
    if (!t.block) return v;
    __shared__ float part[32];
    __syncthreads();
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        int warps = blockDim.x >> 5;
        float w = threadIdx.x < warps ? part[threadIdx.x] : combine_identity(how);
        w = warp_combine(how, w);
        if (threadIdx.x == 0) part[0] = w;
    }
    __syncthreads();
    return part[0];
}
