// Reductions over any set of axes, their gradients, and argmax.
//
// The host splits the input's axes into kept axes (which index the output) and
// reduced axes (which form each output's group), with the input strides of
// each. One team (a warp, or a block for long groups) handles one output.

struct Reduction {
    i64 kdims[VJ_MAX_RANK];
    i64 kstrides[VJ_MAX_RANK];
    i64 rdims[VJ_MAX_RANK];
    i64 rstrides[VJ_MAX_RANK];
    int krank;
    int rrank;
};

__device__ __forceinline__ i64 unravel(const i64* dims, const i64* strides, int rank, i64 i) {
    i64 off = 0;
    for (int d = rank - 1; d >= 0; --d) {
        off += (i % dims[d]) * strides[d];
        i /= dims[d];
    }
    return off;
}

// op: 0 sum, 1 mean, 2 max, 3 min (the order of verjus_core::ops::ReduceOp).
extern "C" __global__ void reduce_f32(const float* x, float* y, i64 n_out, i64 group, int op, int per_block, Reduction R) {
    Team t = team(per_block);
    int how = op <= 1 ? 0 : (op == 2 ? 1 : 2);
    float init = op <= 1 ? 0.0f : __int_as_float(0x7fc00000);
    for (i64 o = t.first; o < n_out; o += t.step) {
        i64 base = unravel(R.kdims, R.kstrides, R.krank, o);
        float acc = init;
        for (i64 g = t.lane; g < group; g += t.width)
            acc = combine(how, acc, x[base + unravel(R.rdims, R.rstrides, R.rrank, g)]);
        acc = team_combine(t, how, acc);
        if (t.lane == 0) y[o] = (op == 1 && group > 0) ? acc / (float)group : acc;
    }
}

// dx from dy: sum spreads dy, mean dy / group, max and min split dy evenly
// between the elements equal to y.
extern "C" __global__ void reduce_backward_f32(const float* x, const float* y, const float* dy, float* dx, i64 n_out, i64 group, int op, int per_block, Reduction R) {
    Team t = team(per_block);
    for (i64 o = t.first; o < n_out; o += t.step) {
        i64 base = unravel(R.kdims, R.kstrides, R.krank, o);
        float g = dy[o];
        if (op >= 2) {
            float best = y[o], ties = 0.0f;
            for (i64 j = t.lane; j < group; j += t.width)
                ties += (x[base + unravel(R.rdims, R.rstrides, R.rrank, j)] == best) ? 1.0f : 0.0f;
            ties = team_combine(t, 0, ties);
            float share = g / ties;
            for (i64 j = t.lane; j < group; j += t.width) {
                i64 k = base + unravel(R.rdims, R.rstrides, R.rrank, j);
                dx[k] = (x[k] == best) ? share : 0.0f;
            }
        } else {
            float share = op == 1 ? g / (float)group : g;
            for (i64 j = t.lane; j < group; j += t.width)
                dx[base + unravel(R.rdims, R.rstrides, R.rrank, j)] = share;
        }
    }
}

// First index of the maximum along the axis of x viewed as [outer, len, inner],
// with the native rule: an element replaces the best only when strictly greater,
// so a NaN at index 0 wins and later NaNs never do.
extern "C" __global__ void argmax_f32(const float* x, i64* y, i64 outer, i64 len, i64 inner) {
    Team t = team(0);
    for (i64 r = t.first; r < outer * inner; r += t.step) {
        const float* row = x + (r / inner) * len * inner + (r % inner);
        float best = -__int_as_float(0x7f800000);
        i64 at = -1;
        for (i64 j = t.lane; j < len; j += 32) {
            float v = row[j * inner];
            if (v == v && (at < 0 || v > best)) { best = v; at = j; }
        }
        for (int o = 16; o > 0; o >>= 1) {
            float ob = __shfl_xor_sync(0xffffffffu, best, o);
            i64 oa = __shfl_xor_sync(0xffffffffu, at, o);
            bool take = oa >= 0 && (at < 0 || ob > best || (ob == best && oa < at));
            if (take) { best = ob; at = oa; }
        }
        if (t.lane == 0) {
            float first = row[0];
            y[r] = (first != first || at < 0) ? 0 : at;
        }
    }
}
