// The per-channel bias of a convolution's output (the convolution itself and
// its gradients go through cuDNN).

// y[n, c, :] += b[c] over an NCHW tensor with hw elements per plane.
extern "C" __global__ void add_channel_bias_f32(float* y, const float* b, i64 n, i64 c, i64 hw) {
    i64 total = n * c * hw;
    GRID_STRIDE(i, total) y[i] += b[(i / hw) % c];
}
