// Fused optimizer steps, one pass over parameter, gradient and state; the
// formulas are the native backend's (PyTorch's), per-step constants from the host.

extern "C" __global__ void sgd_f32(float* p, const float* g, float* v, i64 n, float lr, float momentum, float dampening, int nesterov, float weight_decay, float grad_scale, int first_step) {
    GRID_STRIDE(i, n) {
        float d = grad_scale * g[i] + weight_decay * p[i];
        if (v) {
            float vi = first_step ? d : momentum * v[i] + (1.0f - dampening) * d;
            v[i] = vi;
            float step = nesterov ? d + momentum * vi : vi;
            p[i] -= lr * step;
        } else {
            p[i] -= lr * d;
        }
    }
}

// step_size = lr / (1 - b1^t), bias2_sqrt = sqrt(1 - b2^t), decay = 1 - lr * wd
// (AdamW) or 1, l2 = wd (Adam) or 0.
extern "C" __global__ void adam_f32(float* p, const float* g, float* m, float* v, i64 n, float beta1, float beta2, float eps, float grad_scale, float step_size, float bias2_sqrt, float decay, float l2) {
    GRID_STRIDE(i, n) {
        float pi = p[i];
        float gi = grad_scale * g[i] + l2 * pi;
        pi *= decay;
        float mi = beta1 * m[i] + (1.0f - beta1) * gi;
        float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        float denom = sqrtf(vi) / bias2_sqrt + eps;
        p[i] = pi - step_size * mi / denom;
    }
}
