// Axis permutation (any dtype, by element size): a copy into the permuted
// layout.

// Output dims and, per output axis, the stride of the input axis it comes from.
struct Permutation {
    i64 dims[VJ_MAX_RANK];
    i64 strides[VJ_MAX_RANK];
    int rank;
};

template <typename T>
__device__ void permute(const T* x, T* y, i64 n, const Permutation& P) {
    GRID_STRIDE(i, n) {
        i64 rem = i, off = 0;
        for (int d = P.rank - 1; d >= 0; --d) {
            off += (rem % P.dims[d]) * P.strides[d];
            rem /= P.dims[d];
        }
        y[i] = x[off];
    }
}
extern "C" __global__ void permute_4(const u32* x, u32* y, i64 n, Permutation P) { permute<u32>(x, y, n, P); }
extern "C" __global__ void permute_8(const u64* x, u64* y, i64 n, Permutation P) { permute<u64>(x, y, n, P); }
