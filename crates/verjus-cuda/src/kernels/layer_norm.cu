// Layer normalisation over the last axis and its gradients (formulas in
// verjus_core::ops::layer_norm). One team (a warp, or a block for long rows)
// per row, as in softmax.cu; the mean is summed around the row's first
// element and the variance is that of x - mean, as the native backend does.
// The scale and bias gradients are column sums: one thread per feature walks
// down the rows (neighbouring threads read neighbouring features).

extern "C" __global__ void layer_norm_f32(const float* x, const float* scale, const float* bias, float* y,
                                          float* mean_out, float* rstd_out, i64 rows, i64 d, float eps,
                                          int per_block) {
    Team t = team(per_block);
    for (i64 r = t.first; r < rows; r += t.step) {
        const float* xr = x + r * d;
        float* yr = y + r * d;
        float shift = d > 0 ? xr[0] : 0.0f;
        float s = 0.0f;
        for (i64 j = t.lane; j < d; j += t.width) s += xr[j] - shift;
        s = team_combine(t, 0, s);
        float mean = d > 0 ? shift + s / (float)d : 0.0f;
        float v = 0.0f;
        for (i64 j = t.lane; j < d; j += t.width) {
            float c = xr[j] - mean;
            v += c * c;
        }
        v = team_combine(t, 0, v);
        float rstd = 1.0f / sqrtf((d > 0 ? v / (float)d : 0.0f) + eps);
        for (i64 j = t.lane; j < d; j += t.width) {
            float o = (xr[j] - mean) * rstd;
            if (scale) o *= scale[j];
            if (bias) o += bias[j];
            yr[j] = o;
        }
        if (t.lane == 0) {
            mean_out[r] = mean;
            rstd_out[r] = rstd;
        }
    }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * scale.
extern "C" __global__ void layer_norm_backward_f32(const float* x, const float* scale, const float* mean,
                                                   const float* rstd, const float* dy, float* dx, i64 rows,
                                                   i64 d, int per_block) {
    Team t = team(per_block);
    for (i64 r = t.first; r < rows; r += t.step) {
        const float* xr = x + r * d;
        const float* dyr = dy + r * d;
        float m = mean[r], rs = rstd[r];
        float g_sum = 0.0f, gx_sum = 0.0f;
        for (i64 j = t.lane; j < d; j += t.width) {
            float g = scale ? dyr[j] * scale[j] : dyr[j];
            g_sum += g;
            gx_sum += g * ((xr[j] - m) * rs);
        }
        g_sum = team_combine(t, 0, g_sum);
        gx_sum = team_combine(t, 0, gx_sum);
        float g_mean = g_sum / (float)d, gx_mean = gx_sum / (float)d;
        for (i64 j = t.lane; j < d; j += t.width) {
            float g = scale ? dyr[j] * scale[j] : dyr[j];
            float xhat = (xr[j] - m) * rs;
            dx[r * d + j] = rs * (g - g_mean - xhat * gx_mean);
        }
    }
}

// dscale[j] = sum_r dy * xhat, dbias[j] = sum_r dy (either may be null).
extern "C" __global__ void layer_norm_columns_f32(const float* x, const float* mean, const float* rstd,
                                                  const float* dy, float* dscale, float* dbias, i64 rows,
                                                  i64 d) {
    GRID_STRIDE(j, d) {
        float s = 0.0f, b = 0.0f;
        for (i64 r = 0; r < rows; ++r) {
            float g = dy[r * d + j];
            s += g * ((x[r * d + j] - mean[r]) * rstd[r]);
            b += g;
        }
        if (dscale) dscale[j] = s;
        if (dbias) dbias[j] = b;
    }
}
