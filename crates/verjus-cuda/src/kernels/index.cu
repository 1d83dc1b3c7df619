// Index checks, index_select (gather of slices) and index_add (scatter-add of
// slices) along an axis of a tensor viewed as [outer, len, inner].

// The deferred range check (src/deferred/): rec is the device's record, rec[0]
// the scratch word (u64 max when clear), rec[1] = 1 + the number of the first
// failed check (0: none), rec[2] its bad position, rec[3] its bad value.

// rec[0] becomes the smallest position j whose index is outside [0, len).
template <typename I>
__device__ void check_indices(const I* idx, i64 count, i64 len, u64* rec) {
    GRID_STRIDE(j, count) {
        i64 v = (i64)idx[j];
        if (v < 0 || v >= len) atomicMin(&rec[0], (u64)j);
    }
}
extern "C" __global__ void check_indices_i64(const i64* idx, i64 count, i64 len, u64* rec) { check_indices<i64>(idx, count, len, rec); }
extern "C" __global__ void check_indices_i32(const int* idx, i64 count, i64 len, u64* rec) { check_indices<int>(idx, count, len, rec); }

// Launched after check_indices over the same `count` indices (one thread
// works): a failure of check `number` goes into rec[1..3] unless an earlier
// check failed first; rec[0] is reset.
template <typename I>
__device__ void commit_check(const I* idx, i64 count, u64 number, u64* rec) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    u64 pos = rec[0];
    if (pos == ~0ull) return;
    if (rec[1] == 0) {
        rec[1] = number + 1;
        rec[2] = pos;
        rec[3] = pos < (u64)count ? (u64)(i64)idx[pos] : 0;
    }
    rec[0] = ~0ull;
}
extern "C" __global__ void commit_check_i64(const i64* idx, i64 count, u64 number, u64* rec) { commit_check<i64>(idx, count, number, rec); }
extern "C" __global__ void commit_check_i32(const int* idx, i64 count, u64 number, u64* rec) { commit_check<int>(idx, count, number, rec); }

// y[o, j, :] = x[o, idx[j], :]; 0 where idx[j] is out of range (the deferred
// check reports it, the result is discarded).
template <typename I>
__device__ void index_select(const float* x, const I* idx, float* y, i64 outer, i64 len, i64 inner, i64 count) {
    i64 n = outer * count * inner;
    GRID_STRIDE(i, n) {
        i64 k = i % inner, r = i / inner;
        i64 j = r % count, o = r / count;
        i64 v = (i64)idx[j];
        y[i] = (v >= 0 && v < len) ? x[(o * len + v) * inner + k] : 0.0f;
    }
}
extern "C" __global__ void index_select_i64(const float* x, const i64* idx, float* y, i64 outer, i64 len, i64 inner, i64 count) { index_select<i64>(x, idx, y, outer, len, inner, count); }
extern "C" __global__ void index_select_i32(const float* x, const int* idx, float* y, i64 outer, i64 len, i64 inner, i64 count) { index_select<int>(x, idx, y, outer, len, inner, count); }

// dst[o, idx[j], :] += src[o, j, :]; repeated indices add up (atomically), an
// out-of-range idx[j] adds nothing (the deferred check reports it).
template <typename I>
__device__ void index_add(const float* src, const I* idx, float* dst, i64 outer, i64 len, i64 inner, i64 count) {
    i64 n = outer * count * inner;
    GRID_STRIDE(i, n) {
        i64 k = i % inner, r = i / inner;
        i64 j = r % count, o = r / count;
        i64 v = (i64)idx[j];
        if (v >= 0 && v < len) atomicAdd(&dst[(o * len + v) * inner + k], src[i]);
    }
}
extern "C" __global__ void index_add_i64(const float* src, const i64* idx, float* dst, i64 outer, i64 len, i64 inner, i64 count) { index_add<i64>(src, idx, dst, outer, len, inner, count); }
extern "C" __global__ void index_add_i32(const float* src, const int* idx, float* dst, i64 outer, i64 len, i64 inner, i64 count) { index_add<int>(src, idx, dst, outer, len, inner, count); }
