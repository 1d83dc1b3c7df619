// Fused attention's row kernels (the products are cuBLAS GEMMs, see
// ops/attention.rs). Scores are [N, Tq, Tk]; row r = n * Tq + i is query i of
// entry n. Query i sees keys 0..visible (verjus_core::ops::AttentionPlan::
// visible): min(causal ? i + 1 : Tk, Tk, lengths[n]); `lengths` is null when
// every key counts. One team (a warp, or a block for long rows) per row.
// Arithmetic follows the native backend (crates/verjus-native/src/attention.rs).

__device__ __forceinline__ i64 attention_visible(const int* lengths, int causal, i64 r, i64 tq, i64 tk) {
    i64 n = r / tq, i = r % tq;
    i64 count = causal ? (i + 1 < tk ? i + 1 : tk) : tk;
    if (lengths) {
        i64 len = (i64)lengths[n];
        if (len < count) count = len;
    }
    return count;
}

// In place: s [N*Tq, Tk] -> p = softmax over the visible keys (0 elsewhere);
// lse [N*Tq] = max + log(sum exp(s - max)), -inf for a row that sees nothing.
extern "C" __global__ void attention_softmax_f32(float* s, float* lse, const int* lengths, int causal, i64 rows, i64 tq, i64 tk, int per_block) {
    Team t = team(per_block);
    for (i64 r = t.first; r < rows; r += t.step) {
        float* row = s + r * tk;
        i64 visible = attention_visible(lengths, causal, r, tq, tk);
        float m = -__int_as_float(0x7f800000);
        for (i64 j = t.lane; j < visible; j += t.width) m = fmaxf(m, row[j]);
        m = team_combine(t, 1, m);
        float sum = 0.0f;
        for (i64 j = t.lane; j < visible; j += t.width) sum += expf(row[j] - m);
        sum = team_combine(t, 0, sum);
        float inv = 1.0f / sum;
        for (i64 j = t.lane; j < tk; j += t.width) row[j] = j < visible ? expf(row[j] - m) * inv : 0.0f;
        if (t.lane == 0) lse[r] = visible > 0 ? m + logf(sum) : -__int_as_float(0x7f800000);
    }
}

// In place: s [N*Tq, Tk] (recomputed scores) -> p = exp(s - lse) over the
// visible keys, 0 elsewhere and on rows whose lse is -inf.
extern "C" __global__ void attention_probs_f32(float* s, const float* lse, const int* lengths, int causal, i64 rows, i64 tq, i64 tk, int per_block) {
    Team t = team(per_block);
    for (i64 r = t.first; r < rows; r += t.step) {
        float* row = s + r * tk;
        float l = lse[r];
        i64 visible = l == -__int_as_float(0x7f800000) ? 0 : attention_visible(lengths, causal, r, tq, tk);
        for (i64 j = t.lane; j < tk; j += t.width) row[j] = j < visible ? expf(row[j] - l) : 0.0f;
    }
}

// In place: dp [N*Tq, Tk] -> ds = p * (dp - delta), delta = sum_c dout[r, c] * out[r, c]
// over the Dv value features of row r (p is 0 wherever a key is not seen).
extern "C" __global__ void attention_grad_scores_f32(const float* p, float* dp, const float* out, const float* dout, i64 rows, i64 tk, i64 dv, int per_block) {
    Team t = team(per_block);
    for (i64 r = t.first; r < rows; r += t.step) {
        float delta = 0.0f;
        for (i64 c = t.lane; c < dv; c += t.width) delta += dout[r * dv + c] * out[r * dv + c];
        delta = team_combine(t, 0, delta);
        const float* pr = p + r * tk;
        float* dr = dp + r * tk;
        for (i64 j = t.lane; j < tk; j += t.width) dr[j] = pr[j] * (dr[j] - delta);
    }
}
