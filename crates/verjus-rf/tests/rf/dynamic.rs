//! slice, split, and concat / pad / merge_dims / split_dims over dynamic
//! dims: values from per-sequence loops, new lengths, errors, gradients,
//! single entries.

use crate::common::*;
use verjus_rf::*;

const LENS: [i32; 4] = [4, 1, 0, 3];

fn x_input(t: &Dim, f: &Dim, seed: u64) -> (Vec<Dim>, Vec<usize>, Vec<f32>) {
    (
        vec![batch_dim(), t.clone(), f.clone()],
        vec![4, 4, 2],
        uniform(seed, 32, -1.0, 1.0),
    )
}

#[test]
fn slice_and_split_static() {
    let (b, f) = (batch_dim(), Dim::new_static(5, "f"));
    let xv: Vec<f32> = (0..10).map(|i| i as f32).collect();
    let x = float(&[&b, &f], &[2, 5], xv);
    let range = |start, end, step| SliceRange {
        start,
        end,
        step,
        size: None,
    };
    let (y, d) = slice(&x, &f, &range(Some(1), Some(4), Some(2)), None).unwrap();
    assert_eq!(
        (d.static_size(), vals(&y)),
        (Some(2), vec![1.0, 3.0, 6.0, 8.0])
    );
    let (y, d) = slice(&x, &f, &range(Some(-2), None, None), None).unwrap();
    assert_eq!(
        (d.static_size(), vals(&y)),
        (Some(2), vec![3.0, 4.0, 8.0, 9.0])
    );
    let (y, _) = slice(&x, &f, &range(None, Some(-3), None), None).unwrap();
    assert_eq!(vals(&y), [0.0, 1.0, 5.0, 6.0]);
    let g = Dim::new_static(3, "g");
    let sized = SliceRange {
        start: Some(2),
        size: Some(SliceSize::Dim(g.clone())),
        ..Default::default()
    };
    let (y, d) = slice(&x, &f, &sized, None).unwrap();
    assert_eq!(
        (d, vals(&y)),
        (g.clone(), vec![2.0, 3.0, 4.0, 7.0, 8.0, 9.0])
    );
    let err = slice(&x, &f, &range(Some(3), Some(7), None), None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("outside dim f of size 5"), "{err}");
    assert!(slice(&x, &f, &range(None, None, Some(0)), None).is_err());
    let err = slice(&x, &f, &range(Some(1), None, None), Some(g.clone()))
        .unwrap_err()
        .to_string();
    assert!(err.contains("sliced size 4"), "{err}");
    let (p, q) = (Dim::new_static(2, "p"), Dim::new_static(3, "q"));
    let parts = split(&x, &f, &[p.clone(), q.clone()]).unwrap();
    assert_eq!(names(&parts[1]), ["batch", "q"]);
    assert_eq!(vals(&parts[0]), [0.0, 1.0, 5.0, 6.0]);
    assert_eq!(vals(&parts[1]), [2.0, 3.0, 4.0, 7.0, 8.0, 9.0]);
    let err = split(&x, &f, std::slice::from_ref(&p))
        .unwrap_err()
        .to_string();
    assert!(err.contains("[p]") && err.contains("size 5 of f"), "{err}");
    let inputs = [(
        vec![b.clone(), f.clone()],
        vec![2, 5],
        uniform(3, 10, -1.0, 1.0),
    )];
    gradcheck("slice", &inputs, |x| {
        slice(&x[0], &f, &range(Some(1), None, Some(2)), None)
            .unwrap()
            .0
    });
    gradcheck("split", &inputs, |x| {
        let parts = split(&x[0], &f, &[p.clone(), q.clone()]).unwrap();
        combine(&parts[1], verjus_core::ops::BinaryOp::Mul, &parts[1], false).unwrap()
    });
}

#[test]
fn slice_of_a_dynamic_dim_is_per_sequence() {
    let (t, f) = (time(&LENS), Dim::new_static(2, "f"));
    let x = x_input(&t, &f, 1);
    let from = |start, step| SliceRange {
        start: Some(start),
        step: Some(step),
        ..Default::default()
    };
    let xt = float(&[&batch_dim(), &t, &f], &[4, 4, 2], x.2.clone());
    let (_, d) = slice(&xt, &t, &from(1, 2), None).unwrap();
    // ceil((len - 1) / 2), at least 0.
    assert_eq!(dim_lengths(&d, 4), [2, 0, 0, 1]);
    let err = slice(&xt, &t, &from(-1, 1), None).unwrap_err().to_string();
    assert!(err.contains("dynamic dim time"), "{err}");
    for (start, step) in [(1, 1), (0, 2), (2, 3)] {
        check_single_entry_new_dim("slice", &LENS, std::slice::from_ref(&x), &t, |x, t| {
            slice(&x[0], t, &from(start, step), None).unwrap()
        });
    }
}

#[test]
fn concat_of_dynamic_dims_joins_each_sequence() {
    let (f, b) = (Dim::new_static(2, "f"), batch_dim());
    let (t1, t2) = (time(&[2, 0, 1]), time(&[1, 2, 0]));
    let (g, gv) = (
        Dim::new_static(1, "g"),
        vec![7.0, 8.0, 9.0, 10.0, 11.0, 12.0],
    );
    let a = float(
        &[&b, &t1, &f],
        &[3, 2, 2],
        (0..12).map(|i| i as f32).collect(),
    );
    let c = float(
        &[&f, &b, &t2],
        &[2, 3, 2],
        (0..12).map(|i| 100.0 + i as f32).collect(),
    );
    let s = float(&[&b, &g, &f], &[3, 1, 2], gv);
    let (y, d) = concat(
        &[
            (a.clone(), t1.clone()),
            (s.clone(), g.clone()),
            (c.clone(), t2.clone()),
        ],
        None,
    )
    .unwrap();
    assert_eq!(dim_lengths(&d, 3), [4, 3, 2]);
    assert_eq!(y.dims(), &[b.clone(), d.clone(), f.clone()]);
    // Per sequence: a's own frames, then s's one frame, then c's own frames.
    let c_at = |bi: usize, ti: usize, fi: usize| 100.0 + (fi * 6 + bi * 2 + ti) as f32;
    let want_rows: Vec<Vec<[f32; 2]>> = vec![
        vec![
            [0.0, 1.0],
            [2.0, 3.0],
            [7.0, 8.0],
            [c_at(0, 0, 0), c_at(0, 0, 1)],
        ],
        vec![
            [9.0, 10.0],
            [c_at(1, 0, 0), c_at(1, 0, 1)],
            [c_at(1, 1, 0), c_at(1, 1, 1)],
            [0.0, 0.0],
        ],
        vec![[8.0, 9.0], [11.0, 12.0], [0.0, 0.0], [0.0, 0.0]],
    ];
    let want: Vec<f32> = want_rows.iter().flatten().flatten().copied().collect();
    assert_close("dynamic concat", &vals(&y), &want, 0.0);
    gradcheck(
        "dynamic concat",
        &[
            (
                vec![b.clone(), t1.clone(), f.clone()],
                vec![3, 2, 2],
                uniform(4, 12, -1.0, 1.0),
            ),
            (
                vec![f.clone(), b.clone(), t2.clone()],
                vec![2, 3, 2],
                uniform(5, 12, -1.0, 1.0),
            ),
        ],
        |x| {
            concat(
                &[(x[0].clone(), t1.clone()), (x[1].clone(), t2.clone())],
                None,
            )
            .unwrap()
            .0
        },
    );
    let t = time(&LENS);
    let x = x_input(&t, &f, 6);
    let extra = (
        vec![b.clone(), g.clone(), f.clone()],
        vec![4, 1, 2],
        uniform(7, 8, -1.0, 1.0),
    );
    check_single_entry_new_dim("dynamic concat", &LENS, &[x.clone(), extra], &t, |x, t| {
        concat(
            &[
                (x[0].clone(), t.clone()),
                (x[1].clone(), g.clone()),
                (x[0].clone(), t.clone()),
            ],
            None,
        )
        .unwrap()
    });
}

#[test]
fn pad_of_a_dynamic_dim_pads_at_each_end() {
    let (t, f, b) = (time(&[2, 0, 1]), Dim::new_static(1, "f"), batch_dim());
    let x = float(
        &[&b, &t, &f],
        &[3, 2, 1],
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
    );
    let (y, dims) = pad(&x, std::slice::from_ref(&t), &[(1, 2)], None, -1.0).unwrap();
    assert_eq!(dim_lengths(&dims[0], 3), [5, 3, 4]);
    // Padding frames of the new dim hold the value too.
    assert_eq!(
        vals(&y),
        [-1.0, 1.0, 2.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, 5.0, -1.0, -1.0, -1.0]
    );
    gradcheck(
        "dynamic pad",
        &[(
            vec![b.clone(), t.clone(), f.clone()],
            vec![3, 2, 1],
            uniform(8, 6, -1.0, 1.0),
        )],
        |x| {
            pad(&x[0], std::slice::from_ref(&t), &[(1, 1)], None, 0.5)
                .unwrap()
                .0
        },
    );
    let t = time(&LENS);
    let x = x_input(&t, &Dim::new_static(2, "f"), 9);
    for padding in [(0, 2), (2, 0), (1, 3)] {
        check_single_entry_new_dim(
            "dynamic pad",
            &LENS,
            std::slice::from_ref(&x),
            &t,
            |x, t| {
                let (y, dims) = pad(&x[0], std::slice::from_ref(t), &[padding], None, 3.0).unwrap();
                (y, dims[0].clone())
            },
        );
    }
}

#[test]
fn merge_and_split_dynamic_dims() {
    let (t, f, b) = (time(&LENS), Dim::new_static(2, "f"), batch_dim());
    let x = x_input(&t, &f, 10);
    let xt = float(&[&b, &t, &f], &[4, 4, 2], x.2.clone());
    let (y, m) = merge_dims(&xt, &[t.clone(), f.clone()], None).unwrap();
    assert_eq!(dim_lengths(&m, 4), [8, 2, 0, 6]);
    assert_eq!(vals(&y), x.2);
    let err = merge_dims(&xt, &[f.clone(), t.clone()], None)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("dim time is dynamic but not the first of [f, time]"),
        "{err}"
    );
    let err = merge_dims(&xt, &[b.clone(), t.clone()], None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("time"), "{err}");
    let back = split_dims(&y, &m, &[t.clone(), f.clone()]).unwrap();
    assert_eq!((back.dims(), vals(&back)), (xt.dims(), x.2.clone()));
    let err = split_dims(&y, &m, &[Dim::new_static(4, "s"), f.clone()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("lose its lengths"), "{err}");
    let other = time(&[1, 1, 0, 3]);
    let err = split_dims(&y, &m, &[other, f.clone()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("are not the lengths of time*f"), "{err}");
    assert_eq!(m, t.mul_dim(&f, false).unwrap());
    let err = t.mul_dim(&time(&LENS), false).unwrap_err().to_string();
    assert!(
        err.contains("two dynamic dims have no product dim"),
        "{err}"
    );
    check_single_entry_new_dim("merge_dims", &LENS, &[x], &t, |x, t| {
        merge_dims(&x[0], &[t.clone(), f.clone()], None).unwrap()
    });
}

#[test]
fn integer_labels_keep_dtype_and_sparse_dim() {
    let (t, v) = (time(&[3, 1]), Dim::new_static(10, "vocab"));
    let value = verjus_core::Tensor::from_vec([2, 3], vec![4i32, 5, 6, 7, 0, 0]).unwrap();
    let labels = RfTensor::from_tensor(value, vec![batch_dim(), t.clone()], None, be(), false)
        .unwrap()
        .with_sparse_dim(Some(v.clone()))
        .unwrap();
    let (p, dims) = pad(&labels, std::slice::from_ref(&t), &[(1, 0)], None, 9.0).unwrap();
    assert_eq!((p.dtype(), p.sparse_dim()), (RfDType::Int32, Some(&v)));
    assert_eq!(vals(&p), [9.0, 4.0, 5.0, 6.0, 9.0, 7.0, 0.0, 0.0]);
    let from1 = SliceRange {
        start: Some(1),
        ..Default::default()
    };
    let (s, _) = slice(&p, &dims[0], &from1, None).unwrap();
    assert_eq!(
        (s.dtype(), vals(&s)),
        (RfDType::Int32, vec![4.0, 5.0, 6.0, 7.0, 0.0, 0.0])
    );
    let (c, _) = concat(&[(labels.clone(), t.clone()), (labels, t.clone())], None).unwrap();
    assert_eq!(c.dtype(), RfDType::Int32);
    assert_eq!(
        vals(&c),
        [4.0, 5.0, 6.0, 4.0, 5.0, 6.0, 7.0, 7.0, 0.0, 0.0, 0.0, 0.0]
    );
}
