// Dropout with its mask drawn from the shared Philox stream, laid out as
// random.cu's fills (element i takes lane i % 4 of block offset + i / 4), so a
// GPU keeps exactly the elements the CPU keeps.

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
