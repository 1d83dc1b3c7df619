//! conv and pool: golden values from naive loops over the masked input,
//! the out dims, errors, gradients, and the batched-vs-single-entry check.

use crate::common::*;
use verjus_core::ops::PoolKind;
use verjus_rf::*;

const LENS: [i32; 3] = [5, 2, 0];

fn window(size: &[usize], strides: &[usize], dilation: &[usize], padding: Padding) -> Window {
    Window {
        size: size.to_vec(),
        strides: strides.to_vec(),
        dilation: dilation.to_vec(),
        padding,
    }
}

/// `(left, right)` padding and out length as the RETURNN rules give them.
fn plan(n: usize, k: usize, s: usize, d: usize, same: bool) -> (usize, usize, usize) {
    let total = if same { (k - 1) * d } else { 0 };
    let (l, r) = (total / 2, total - total / 2);
    let padded = n + l + r;
    let span = (k - 1) * d + 1;
    let out = if padded < span {
        0
    } else {
        (padded - span) / s + 1
    };
    (l, r, out)
}

/// Naive 1-D conv of x `[b, t, c]` (frames past `lens[b]` read as 0) with
/// filter `[o, c, k]` and bias: `[b, o, t']` over the raw length `n`.
fn naive_conv1d(
    x: &[f32],
    (nb, n, c): (usize, usize, usize),
    filter: &[f32],
    (o, k): (usize, usize),
    bias: &[f32],
    (s, d, same): (usize, usize, bool),
    lens: &[i32],
) -> (Vec<f32>, usize) {
    let (l, _, out) = plan(n, k, s, d, same);
    let mut y = vec![0.0; nb * o * out];
    for b in 0..nb {
        for oc in 0..o {
            for t in 0..out {
                let mut acc = bias[oc];
                for j in 0..k {
                    let pos = (t * s + j * d) as i64 - l as i64;
                    if pos < 0 || pos as usize >= n || pos as usize >= lens[b] as usize {
                        continue;
                    }
                    for ci in 0..c {
                        acc += filter[(oc * c + ci) * k + j] * x[(b * n + pos as usize) * c + ci];
                    }
                }
                y[(b * o + oc) * out + t] = acc;
            }
        }
    }
    (y, out)
}

#[test]
fn conv1d_matches_naive_loops() {
    let (b, c, o, fk) = (
        batch_dim(),
        Dim::new_static(2, "c"),
        Dim::new_static(3, "o"),
        Dim::new_static(3, "k"),
    );
    let t = time(&LENS);
    let xv = uniform(1, 3 * 5 * 2, -1.0, 1.0);
    let x = float(&[&b, &t, &c], &[3, 5, 2], xv.clone());
    let fv = uniform(2, 3 * 2 * 3, -1.0, 1.0);
    let filter = float(&[&o, &c, &fk], &[3, 2, 3], fv.clone());
    let bv = vec![0.1, -0.2, 0.3];
    let bias = float(&[&o], &[3], bv.clone());
    for (s, d, padding) in [
        (1, 1, Padding::Same),
        (1, 1, Padding::Valid),
        (2, 1, Padding::Same),
        (2, 1, Padding::Valid),
        (1, 2, Padding::Same),
        (3, 2, Padding::Valid),
    ] {
        let same = padding == Padding::Same;
        let args = ConvArgs {
            in_dim: c.clone(),
            out_dim: o.clone(),
            in_spatial_dims: vec![t.clone()],
            out_spatial_dims: None,
            filter: filter.clone(),
            filter_size: vec![fk.clone()],
            window: window(&[3], &[s], &[d], padding),
            groups: 1,
            bias: Some(bias.clone()),
        };
        let (y, dims) = conv(&x, &args).unwrap();
        let what = format!("conv1d stride {s} dilation {d} same {same}");
        let (want, out) = naive_conv1d(&xv, (3, 5, 2), &fv, (3, 3), &bv, (s, d, same), &LENS);
        assert_eq!(y.dims(), &[b.clone(), o.clone(), dims[0].clone()], "{what}");
        assert_eq!(y.feature_dim(), Some(&o), "{what}");
        assert_eq!(
            dims[0] == t,
            same && s == 1,
            "{what}: out dim is the in dim"
        );
        let want_lens: Vec<usize> = LENS
            .iter()
            .map(|&l| plan(l as usize, 3, s, d, same).2)
            .collect();
        assert_eq!(dim_lengths(&dims[0], 3), want_lens, "{what}: lengths");
        assert_eq!(y.sizes()[2], out, "{what}");
        assert_close(&what, &vals(&y), &want, 1e-5);
    }
}

#[test]
fn conv2d_with_groups_and_even_window() {
    let (b, c, o) = (
        batch_dim(),
        Dim::new_static(4, "c"),
        Dim::new_static(2, "o"),
    );
    let (h, w) = (Dim::new_static(4, "h"), Dim::new_static(3, "w"));
    let (kh, kw, cg) = (
        Dim::new_static(2, "kh"),
        Dim::new_static(3, "kw"),
        Dim::new_static(2, "c/2"),
    );
    let xv = uniform(3, 2 * 4 * 4 * 3, -1.0, 1.0);
    // Source in another order: [h, b, w, c].
    let x = float(&[&h, &b, &w, &c], &[4, 2, 3, 4], xv.clone());
    let fv = uniform(4, 2 * 2 * 2 * 3, -1.0, 1.0);
    let filter = float(&[&kh, &kw, &o, &cg], &[2, 3, 2, 2], fv.clone());
    let args = ConvArgs {
        in_dim: c.clone(),
        out_dim: o.clone(),
        in_spatial_dims: vec![h.clone(), w.clone()],
        out_spatial_dims: None,
        filter: filter.clone(),
        filter_size: vec![kh.clone(), kw.clone()],
        window: window(&[2, 3], &[1, 2], &[1, 1], Padding::Same),
        groups: 2,
        bias: None,
    };
    let (y, dims) = conv(&x, &args).unwrap();
    assert_eq!(dims[0], h);
    assert_eq!(dims[1].static_size(), Some(2));
    assert_eq!(y.sizes(), [2, 2, 4, 2]);
    // "same": kh 2 pads (0, 1), kw 3 with stride 2 pads (1, 1).
    let at = |hi: i64, bi: usize, wi: i64, ci: usize| -> f32 {
        if !(0..4).contains(&hi) || !(0..3).contains(&wi) {
            0.0
        } else {
            xv[((hi as usize * 2 + bi) * 3 + wi as usize) * 4 + ci]
        }
    };
    let mut want = Vec::new();
    for bi in 0..2 {
        for oc in 0..2 {
            let g = oc; // one output channel per group
            for yi in 0..4 {
                for xi in 0..2 {
                    let mut acc = 0.0;
                    for i in 0..2 {
                        for j in 0..3 {
                            for cl in 0..2 {
                                let f = fv[((i * 3 + j) * 2 + oc) * 2 + cl];
                                acc += f * at(yi + i as i64, bi, xi * 2 + j as i64 - 1, g * 2 + cl);
                            }
                        }
                    }
                    want.push(acc);
                }
            }
        }
    }
    assert_close("conv2d groups", &vals(&y), &want, 1e-5);
    let mut bad = args.clone();
    bad.groups = 1;
    let err = conv(&x, &bad).unwrap_err().to_string();
    assert!(err.contains("does not fit") && err.contains("c/2"), "{err}");
    let mut bad = args;
    bad.in_spatial_dims = vec![h.clone(), o.clone()];
    let err = conv(&x, &bad).unwrap_err().to_string();
    assert!(err.contains("dim o is not in"), "{err}");
}

#[test]
fn conv_gradients_and_single_entries() {
    let (b, c, o, k) = (
        batch_dim(),
        Dim::new_static(2, "c"),
        Dim::new_static(2, "o"),
        Dim::new_static(2, "k"),
    );
    let t = time(&[3, 2]);
    let args = |x: &[RfTensor], s: usize, padding: Padding, t: &Dim| ConvArgs {
        in_dim: c.clone(),
        out_dim: o.clone(),
        in_spatial_dims: vec![t.clone()],
        out_spatial_dims: None,
        filter: x[1].clone(),
        filter_size: vec![k.clone()],
        window: window(&[2], &[s], &[1], padding),
        groups: 1,
        bias: Some(x[2].clone()),
    };
    let inputs = [
        (
            vec![b.clone(), t.clone(), c.clone()],
            vec![2, 3, 2],
            uniform(5, 12, -1.0, 1.0),
        ),
        (
            vec![o.clone(), c.clone(), k.clone()],
            vec![2, 2, 2],
            uniform(6, 8, -1.0, 1.0),
        ),
        (vec![o.clone()], vec![2], vec![0.5, -0.5]),
    ];
    for (s, padding) in [(1, Padding::Same), (2, Padding::Valid)] {
        gradcheck("conv", &inputs, |x| {
            conv(&x[0], &args(x, s, padding.clone(), &t)).unwrap().0
        });
    }
    let lens = [5, 1, 0, 3];
    let t = time(&lens);
    let inputs = [
        (
            vec![b.clone(), t.clone(), c.clone()],
            vec![4, 5, 2],
            uniform(7, 40, -1.0, 1.0),
        ),
        (
            vec![o.clone(), c.clone(), k.clone()],
            vec![2, 2, 2],
            uniform(8, 8, -1.0, 1.0),
        ),
        (vec![o.clone()], vec![2], vec![0.5, -0.5]),
    ];
    for (s, padding) in [
        (1, Padding::Same),
        (2, Padding::Same),
        (1, Padding::Valid),
        (2, Padding::Valid),
        (1, Padding::Explicit(vec![1])),
    ] {
        let name = format!("conv stride {s} {padding:?}");
        check_single_entry_new_dim(&name, &lens, &inputs, &t, |x, t| {
            let (y, dims) = conv(&x[0], &args(x, s, padding.clone(), t)).unwrap();
            (y, dims[0].clone())
        });
    }
}

/// Naive 1-D pool of x `[b, t, c]` over its first `lens[b]` frames: `[b, c, t']`.
fn naive_pool1d(
    x: &[f32],
    (nb, n, c): (usize, usize, usize),
    kind: PoolKind,
    (k, s, same): (usize, usize, bool),
    lens: &[i32],
) -> Vec<f32> {
    let (l, _, out) = plan(n, k, s, 1, same);
    let mut y = Vec::new();
    for b in 0..nb {
        let (_, _, own) = plan(lens[b] as usize, k, s, 1, same);
        for ci in 0..c {
            for t in 0..out {
                let frames: Vec<f32> = (0..k)
                    .map(|j| (t * s + j) as i64 - l as i64)
                    .filter(|&p| p >= 0 && p < lens[b] as i64)
                    .map(|p| x[(b * n + p as usize) * c + ci])
                    .collect();
                let v = if t >= own || frames.is_empty() {
                    0.0
                } else {
                    match kind {
                        PoolKind::Max => frames.iter().copied().fold(f32::NEG_INFINITY, f32::max),
                        PoolKind::Avg => frames.iter().sum::<f32>() / frames.len() as f32,
                    }
                };
                y.push(v);
            }
        }
    }
    y
}

#[test]
fn pool1d_matches_naive_loops() {
    let (b, c) = (batch_dim(), Dim::new_static(2, "c"));
    let t = time(&LENS);
    let xv = uniform(9, 30, -1.0, 1.0);
    let x = float(&[&b, &t, &c], &[3, 5, 2], xv.clone());
    for kind in [PoolKind::Max, PoolKind::Avg] {
        for (k, s, padding) in [
            (2, 2, Padding::Valid),
            (3, 2, Padding::Same),
            (3, 1, Padding::Same),
            (2, 1, Padding::Valid),
        ] {
            let same = padding == Padding::Same;
            let what = format!("{kind:?} pool k {k} s {s} {padding:?}");
            let (y, dims) = pool(
                &x,
                kind,
                &window(&[k], &[s], &[1], padding),
                std::slice::from_ref(&t),
                None,
            )
            .unwrap();
            assert_eq!(y.dims(), &[b.clone(), c.clone(), dims[0].clone()], "{what}");
            let want = naive_pool1d(&xv, (3, 5, 2), kind, (k, s, same), &LENS);
            // Past each sequence's end only the max pool is defined (0).
            let got = vals(&y);
            let out = y.sizes()[2];
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let (bi, ti) = (i / (2 * out), i % out);
                let own = plan(LENS[bi] as usize, k, s, 1, same).2;
                if ti < own || kind == PoolKind::Max {
                    assert_close(&what, &[*g], &[*w], 1e-5);
                }
            }
        }
    }
    let err = pool(
        &x,
        PoolKind::Max,
        &window(&[2], &[2], &[2], Padding::Valid),
        std::slice::from_ref(&t),
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("dilation_rate") && err.contains("[time]"),
        "{err}"
    );
    assert!(parse_pool_mode("min").is_err());
}

#[test]
fn pool2d_static_same_average_skips_padding() {
    let (b, h, w) = (
        batch_dim(),
        Dim::new_static(3, "h"),
        Dim::new_static(3, "w"),
    );
    let xv: Vec<f32> = (0..9).map(|i| i as f32).collect();
    let x = float(&[&b, &h, &w], &[1, 3, 3], xv);
    let win = window(&[2, 2], &[2, 2], &[1, 1], Padding::Same);
    let (y, dims) = pool(&x, PoolKind::Avg, &win, &[h.clone(), w.clone()], None).unwrap();
    assert_eq!(
        dims.iter().map(|d| d.static_size()).collect::<Vec<_>>(),
        [Some(2), Some(2)]
    );
    // "same" with window 2 pads (0, 1): windows {0,1,3,4}, {2,5}, {6,7}, {8}.
    assert_close("avg 2d", &vals(&y), &[2.0, 3.5, 6.5, 8.0], 1e-6);
    let (y, _) = pool(&x, PoolKind::Max, &win, &[h.clone(), w.clone()], None).unwrap();
    assert_eq!(vals(&y), [4.0, 5.0, 7.0, 8.0]);
}

#[test]
fn pool_gradients_and_single_entries() {
    let (b, c) = (batch_dim(), Dim::new_static(2, "c"));
    let t = time(&[4, 3]);
    let inputs = [(
        vec![b.clone(), t.clone(), c.clone()],
        vec![2, 4, 2],
        uniform(10, 16, -1.0, 1.0),
    )];
    for kind in [PoolKind::Max, PoolKind::Avg] {
        gradcheck("pool", &inputs, |x| {
            pool(
                &x[0],
                kind,
                &window(&[3], &[2], &[1], Padding::Same),
                std::slice::from_ref(&t),
                None,
            )
            .unwrap()
            .0
        });
    }
    let lens = [5, 1, 0, 3];
    let t = time(&lens);
    let inputs = [(
        vec![b.clone(), t.clone(), c.clone()],
        vec![4, 5, 2],
        uniform(11, 40, -1.0, 1.0),
    )];
    for kind in [PoolKind::Max, PoolKind::Avg] {
        for (k, s, padding) in [
            (2, 2, Padding::Valid),
            (3, 2, Padding::Same),
            (2, 1, Padding::Same),
        ] {
            let name = format!("{kind:?} pool k {k} s {s} {padding:?}");
            check_single_entry_new_dim(&name, &lens, &inputs, &t, |x, t| {
                let (y, dims) = pool(
                    &x[0],
                    kind,
                    &window(&[k], &[s], &[1], padding.clone()),
                    std::slice::from_ref(t),
                    None,
                )
                .unwrap();
                (y, dims[0].clone())
            });
        }
    }
}
