// Copies that move elements between layouts: axis permutation (any dtype, by
// element size) and the slab copies concat and split are made of.

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

// rows x width elements: dst[r * dst_pitch + c] = src[r * src_pitch + c].
extern "C" __global__ void copy_rows_f32(const float* src, float* dst, i64 rows, i64 width, i64 src_pitch, i64 dst_pitch) {
    i64 n = rows * width;
    GRID_STRIDE(i, n) {
        i64 r = i / width, c = i % width;
        dst[r * dst_pitch + c] = src[r * src_pitch + c];
    }
}
