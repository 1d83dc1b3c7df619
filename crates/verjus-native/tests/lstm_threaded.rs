//! The native LSTM at sizes where its steps run on several threads in the
//! blocked gate order (the conformance suite's sizes are too small for that
//! path), against the conformance suite's reference, values and every
//! gradient, with lengths mixed and hidden sizes that are no multiple of the
//! block or of a vector (AVX2's 8 floats, AVX-512's 16).

use verjus_conformance::array::Array;
use verjus_conformance::compare::close;
use verjus_conformance::inputs::uniform;
use verjus_conformance::reference::lstm as reference;
use verjus_conformance::Tolerance;
use verjus_core::ops::{self, LstmArgs, LstmGrads, LstmOutputGrads, LstmOutputs};
use verjus_core::{DType, Shape, Tensor};

/// Runs the forward and backward at `T, B, F, H` and compares every output.
fn check(steps: usize, batch: usize, input: usize, hidden: usize, with_lengths: bool) {
    let be = verjus_native::backend();
    let dev = &*be;
    let (t, b, f, h) = (steps, batch, input, hidden);
    let g = 4 * h;
    let draw = |seed, dims: &[usize]| uniform(seed, dims, -0.5, 0.5);
    let arrays = [
        draw(1, &[t, b, f]),
        draw(2, &[b, h]),
        draw(3, &[b, h]),
        draw(4, &[g, f]),
        draw(5, &[g, h]),
        draw(6, &[g]),
        draw(7, &[g]),
        draw(8, &[t, b, h]),
        draw(9, &[b, h]),
        draw(10, &[b, h]),
    ];
    let [x, h0, c0, w_ih, w_hh, b_ih, b_hh, dy, dh_n, dc_n] = &arrays;
    // {0, 1, T-1, T} and everything between.
    let lengths: Vec<i32> = (0..b)
        .map(|i| [0, 1, t - 1, t, i % (t + 1)][i % 5] as i32)
        .collect();
    let up = |a: &Array| {
        ops::upload(
            dev,
            &Tensor::from_vec(a.dims.clone(), a.data.clone()).unwrap(),
        )
        .unwrap()
    };
    let [tx, th0, tc0, tw_ih, tw_hh, tb_ih, tb_hh, tdy, tdh, tdc] = arrays.each_ref().map(up);
    let tlen = ops::upload(dev, &Tensor::from_vec([b], lengths.clone()).unwrap()).unwrap();
    let args = LstmArgs {
        x: &tx,
        lengths: with_lengths.then_some(&tlen),
        h0: Some(&th0),
        c0: Some(&tc0),
        w_ih: &tw_ih,
        w_hh: &tw_hh,
        b_ih: Some(&tb_ih),
        b_hh: Some(&tb_hh),
    };
    let zeros = |dims: &[usize]| ops::zeros(dev, &Shape::new(dims).unwrap(), DType::F32).unwrap();
    let plan = ops::lstm_plan("lstm_sequence", dev, &args, false).unwrap();
    let mut reserve = zeros(&[ops::lstm_reserve_len(dev, &plan).unwrap()]);
    let (mut y, mut hn, mut cn) = (zeros(&[t, b, h]), zeros(&[b, h]), zeros(&[b, h]));
    let out = LstmOutputs {
        y: &mut y,
        h_n: Some(&mut hn),
        c_n: &mut cn,
        reserve: &mut reserve,
    };
    ops::lstm_sequence(dev, &args, out).unwrap();
    let mut grads = [
        zeros(&[t, b, f]),
        zeros(&[b, h]),
        zeros(&[b, h]),
        zeros(&[g, f]),
        zeros(&[g, h]),
        zeros(&[g]),
        zeros(&[g]),
    ];
    let [dx, dh0, dc0, dw_ih, dw_hh, db_ih, db_hh] = grads.each_mut();
    let dout = LstmOutputGrads {
        dy: Some(&tdy),
        dh_n: Some(&tdh),
        dc_n: Some(&tdc),
    };
    let want_grads = LstmGrads {
        dx: Some(dx),
        dh0: Some(dh0),
        dc0: Some(dc0),
        dw_ih: Some(dw_ih),
        dw_hh: Some(dw_hh),
        db_ih: Some(db_ih),
        db_hh: Some(db_hh),
    };
    ops::lstm_sequence_backward(dev, &args, &y, &reserve, &dout, want_grads).unwrap();

    let r = reference::Lstm {
        x,
        lengths: with_lengths.then_some(&lengths[..]),
        h0: Some(h0),
        c0: Some(c0),
        w_ih,
        w_hh,
        b_ih: Some(b_ih),
        b_hh: Some(b_hh),
    };
    let o = reference::lstm_sequence(&r);
    let gr = reference::lstm_sequence_backward(&r, Some(dy), Some(dh_n), Some(dc_n));
    let want = [
        ("y", &o.y),
        ("h_n", &o.h_n),
        ("c_n", &o.c_n),
        ("dx", &gr.dx),
        ("dh0", &gr.dh0),
        ("dc0", &gr.dc0),
        ("dw_ih", &gr.dw_ih),
        ("dw_hh", &gr.dw_hh),
        ("db_ih", &gr.db_ih),
        ("db_hh", &gr.db_hh),
    ];
    let got = [&y, &hn, &cn].into_iter().chain(grads.iter());
    for ((name, want), got) in want.into_iter().zip(got) {
        let got = ops::download(dev, got).unwrap().to_vec::<f32>().unwrap();
        let what = format!("T={t} B={b} F={f} H={h} lengths={with_lengths}: {name}");
        close(&what, &want.dims, &want.data, &got, Tolerance::GEMM).unwrap();
    }
}

#[test]
fn threaded_steps_match_the_reference_with_lengths() {
    check(6, 64, 7, 72, true);
}

#[test]
fn threaded_steps_match_the_reference_at_full_length() {
    check(4, 40, 5, 96, false);
}

#[test]
fn fused_steps_match_the_reference_with_partial_tiles() {
    // H = 80: five blocks, so two threads own two and three (tiles of fewer
    // than four blocks); B = 47 and 23: last tiles of five rows.
    check(5, 47, 7, 80, true);
    check(3, 23, 9, 128, false);
}

#[test]
fn fused_steps_match_the_reference_with_partial_vectors() {
    // H = 70 and 90: last blocks of 6 and 10 units, so masked vectors on
    // AVX2 and AVX-512 alike, in the forward's gates and the backward's units.
    check(5, 61, 11, 70, true);
    check(3, 50, 6, 90, false);
}
