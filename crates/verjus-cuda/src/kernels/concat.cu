// The slab copy concat and split are made of: each part is a block of rows of
// the whole, at its own offset and pitch.

// rows x width elements: dst[r * dst_pitch + c] = src[r * src_pitch + c].
extern "C" __global__ void copy_rows_f32(const float* src, float* dst, i64 rows, i64 width, i64 src_pitch, i64 dst_pitch) {
    i64 n = rows * width;
    GRID_STRIDE(i, n) {
        i64 r = i / width, c = i % width;
        dst[r * dst_pitch + c] = src[r * src_pitch + c];
    }
}
