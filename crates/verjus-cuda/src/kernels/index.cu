// Index checks, index_select (gather of slices) and index_add (scatter-add of
// slices) along an axis of a tensor viewed as [outer, len, inner].

// first_bad[0] becomes the smallest position j whose index is outside [0, len)
// (it starts at u64 max); the host then reads that index to name it.
template <typename I>
__device__ void check_indices(const I* idx, i64 count, i64 len, u64* first_bad) {
    GRID_STRIDE(j, count) {
        i64 v = (i64)idx[j];
        if (v < 0 || v >= len) atomicMin(first_bad, (u64)j);
    }
}
extern "C" __global__ void check_indices_i64(const i64* idx, i64 count, i64 len, u64* first_bad) { check_indices<i64>(idx, count, len, first_bad); }
extern "C" __global__ void check_indices_i32(const int* idx, i64 count, i64 len, u64* first_bad) { check_indices<int>(idx, count, len, first_bad); }

// y[o, j, :] = x[o, idx[j], :] for checked indices.
template <typename I>
__device__ void index_select(const float* x, const I* idx, float* y, i64 outer, i64 len, i64 inner, i64 count) {
    i64 n = outer * count * inner;
    GRID_STRIDE(i, n) {
        i64 k = i % inner, r = i / inner;
        i64 j = r % count, o = r / count;
        y[i] = x[(o * len + (i64)idx[j]) * inner + k];
    }
}
extern "C" __global__ void index_select_i64(const float* x, const i64* idx, float* y, i64 outer, i64 len, i64 inner, i64 count) { index_select<i64>(x, idx, y, outer, len, inner, count); }
extern "C" __global__ void index_select_i32(const float* x, const int* idx, float* y, i64 outer, i64 len, i64 inner, i64 count) { index_select<int>(x, idx, y, outer, len, inner, count); }

// dst[o, idx[j], :] += src[o, j, :]; repeated indices add up (atomically).
template <typename I>
__device__ void index_add(const float* src, const I* idx, float* dst, i64 outer, i64 len, i64 inner, i64 count) {
    i64 n = outer * count * inner;
    GRID_STRIDE(i, n) {
        i64 k = i % inner, r = i / inner;
        i64 j = r % count, o = r / count;
        atomicAdd(&dst[(o * len + (i64)idx[j]) * inner + k], src[i]);
    }
}
extern "C" __global__ void index_add_i64(const float* src, const i64* idx, float* dst, i64 outer, i64 len, i64 inner, i64 count) { index_add<i64>(src, idx, dst, outer, len, inner, count); }
extern "C" __global__ void index_add_i32(const float* src, const int* idx, float* dst, i64 outer, i64 len, i64 inner, i64 count) { index_add<int>(src, idx, dst, outer, len, inner, count); }
