//! gather, one_hot and cross_entropy: values, gradients, single entries.

use crate::common::*;
use verjus_core::Tensor;
use verjus_rf::*;

fn labels(dims: &[&Dim], sizes: &[usize], values: Vec<i64>, classes: &Dim) -> RfTensor {
    let dims = dims.iter().map(|d| (*d).clone()).collect();
    let value = Tensor::from_vec(sizes.to_vec(), values).unwrap();
    RfTensor::from_tensor(value, dims, None, be(), false)
        .unwrap()
        .with_sparse_dim(Some(classes.clone()))
        .unwrap()
}

#[test]
fn gather_replaces_the_axis_by_the_index_dims() {
    let (v, e) = (Dim::new_static(4, "vocab"), Dim::new_static(2, "emb"));
    let table = float(&[&v, &e], &[4, 2], (0..8).map(|i| i as f32).collect());
    let (b, t) = (batch_dim(), Dim::new_static(3, "t"));
    let ids = labels(&[&b, &t], &[2, 3], vec![3, 0, 1, 1, 1, 2], &v);
    let y = gather(&table, &ids, &v, false).unwrap();
    assert_eq!(names(&y), ["batch", "t", "emb"]);
    assert_eq!(
        vals(&y),
        [6.0, 7.0, 0.0, 1.0, 2.0, 3.0, 2.0, 3.0, 2.0, 3.0, 4.0, 5.0]
    );
    let err = gather(&table, &ids, &b, false).unwrap_err().to_string();
    assert!(
        err.contains("batch") && err.contains("[vocab, emb]"),
        "{err}"
    );
    let ids = RfTensor::from_tensor(
        Tensor::from_vec([2], vec![0i64, 3]).unwrap(),
        vec![e.clone()],
        None,
        be(),
        false,
    )
    .unwrap();
    // emb is shared: entry e picks table[ids[e], e].
    let y = gather(&table, &ids, &v, false).unwrap();
    assert_eq!(
        (names(&y), vals(&y)),
        (vec!["emb".to_owned()], vec![0.0, 7.0])
    );
    gradcheck(
        "gather",
        &[(
            vec![v.clone(), e.clone()],
            vec![4, 2],
            uniform(1, 8, -1.0, 1.0),
        )],
        |x| gather(&x[0], &labels(&[&t], &[3], vec![1, 3, 1], &v), &v, false).unwrap(),
    );
}

#[test]
fn one_hot_and_cross_entropy() {
    let c = Dim::new_static(3, "classes");
    let b = batch_dim();
    let target = labels(&[&b], &[2], vec![2, 0], &c);
    let oh = one_hot(&target).unwrap();
    assert_eq!(names(&oh), ["batch", "classes"]);
    assert_eq!(vals(&oh), [0.0, 0.0, 1.0, 1.0, 0.0, 0.0]);
    let logits = vec![1.0, 2.0, 3.0, 0.5, -1.0, 0.0];
    let x = float(&[&b, &c], &[2, 3], logits.clone());
    let ce = cross_entropy(&x, &target, &c, EstimatedType::Logits).unwrap();
    let lse = |r: &[f32]| r.iter().map(|v| v.exp()).sum::<f32>().ln();
    let want = [lse(&logits[..3]) - 3.0, lse(&logits[3..]) - 0.5];
    assert_close("cross_entropy", &vals(&ce), &want, 1e-6);
    let p = softmax(&x, &c, true).unwrap();
    let ce_p = cross_entropy(&p, &target, &c, EstimatedType::Probs).unwrap();
    assert_close("cross_entropy probs", &vals(&ce_p), &want, 1e-5);
    let err = cross_entropy(
        &x,
        &cast(&target, RfDType::Int64)
            .unwrap()
            .with_sparse_dim(None)
            .unwrap(),
        &c,
        EstimatedType::Logits,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("dense target must be float32"), "{err}");
    assert!(EstimatedType::parse("scores").is_err());
    gradcheck(
        "cross_entropy",
        &[(vec![b.clone(), c.clone()], vec![2, 3], logits)],
        |x| cross_entropy(&x[0], &target, &c, EstimatedType::Logits).unwrap(),
    );
}

#[test]
fn cross_entropy_single_entry() {
    let c = Dim::new_static(3, "classes");
    let lens = [3, 0, 2];
    let t = time(&lens);
    let b = batch_dim();
    let x = (
        vec![b.clone(), t.clone(), c.clone()],
        vec![3, 3, 3],
        uniform(4, 27, -2.0, 2.0),
    );
    check_single_entry("cross_entropy", &lens, &[x], &t, |x, t| {
        let target = cast(&argmax(&x[0], &c, true).unwrap(), RfDType::Int64)
            .unwrap()
            .with_sparse_dim(Some(c.clone()))
            .unwrap();
        let ce = cross_entropy(&x[0], &target, &c, EstimatedType::Logits).unwrap();
        reduce(&ce, ReduceMode::Sum, std::slice::from_ref(t), true).unwrap()
    });
}

fn ints(dims: &[&Dim], sizes: &[usize], values: Vec<i32>) -> RfTensor {
    let dims = dims.iter().map(|d| (*d).clone()).collect();
    let value = Tensor::from_vec(sizes.to_vec(), values).unwrap();
    RfTensor::from_tensor(value, dims, None, be(), false).unwrap()
}

#[test]
fn gather_per_batch_entry() {
    let (b, t, f, k) = (
        batch_dim(),
        Dim::new_static(3, "t"),
        Dim::new_static(2, "f"),
        Dim::new_static(2, "k"),
    );
    let xv: Vec<f32> = (0..12).map(|i| i as f32).collect();
    // Source [f, batch, t]; x[f, b, t] = f * 6 + b * 3 + t.
    let x = float(&[&f, &b, &t], &[2, 2, 3], xv.clone());
    let idx = ints(&[&b], &[2], vec![2, 0]);
    let y = gather(&x, &idx, &t, false).unwrap();
    assert_eq!(names(&y), ["f", "batch"]);
    assert_eq!(vals(&y), [2.0, 3.0, 8.0, 9.0]);
    // Own index dims go where the axis was.
    let idx = ints(&[&k, &b], &[2, 2], vec![1, 2, 0, 1]);
    let y = gather(&x, &idx, &t, false).unwrap();
    assert_eq!(names(&y), ["f", "batch", "k"]);
    let mut want = Vec::new();
    for fi in 0..2 {
        for bi in 0..2 {
            for ki in 0..2 {
                let ti = [1, 2, 0, 1][ki * 2 + bi];
                want.push(xv[fi * 6 + bi * 3 + ti]);
            }
        }
    }
    assert_eq!(vals(&y), want);
    let bad = ints(&[&b], &[2], vec![3, 0]);
    assert!(gather(&x, &bad, &t, false).is_err());
    let y = gather(&x, &bad, &t, true).unwrap();
    assert_eq!(vals(&y), [2.0, 3.0, 8.0, 9.0]);
    gradcheck(
        "per-entry gather",
        &[(
            vec![f.clone(), b.clone(), t.clone()],
            vec![2, 2, 3],
            uniform(3, 12, -1.0, 1.0),
        )],
        |x| {
            gather(
                &x[0],
                &ints(&[&k, &b], &[2, 2], vec![1, 1, 0, 1]),
                &t,
                false,
            )
            .unwrap()
        },
    );
}

#[test]
fn gather_clips_to_each_sequence_and_single_entries() {
    let lens = [4, 1, 0, 3];
    let (t, f, b) = (time(&lens), Dim::new_static(2, "f"), batch_dim());
    let x = (
        vec![b.clone(), t.clone(), f.clone()],
        vec![4, 4, 2],
        uniform(5, 32, -1.0, 1.0),
    );
    let xt = float(&[&b, &t, &f], &[4, 4, 2], x.2.clone());
    // The last frame of each sequence (index 0 for an empty one).
    let last = ints(&[&b], &[4], vec![9, 9, 9, 9]);
    let y = gather(&xt, &last, &t, true).unwrap();
    let want: Vec<f32> = (0..4)
        .flat_map(|bi| {
            let ti = (lens[bi] - 1).max(0) as usize;
            (0..2).map(move |fi| (bi, ti, fi))
        })
        .map(|(bi, ti, fi)| x.2[(bi * 4 + ti) * 2 + fi])
        .collect();
    assert_eq!(vals(&y), want);
    // Gathering from an empty sequence has nothing to pick: lengths > 0.
    let lens = [4, 1, 2, 3];
    let t = time(&lens);
    let x = (vec![b.clone(), t.clone(), f.clone()], vec![4, 4, 2], x.2);
    check_single_entry("per-entry gather", &lens, &[x], &t, |x, t| {
        let first = ints(&[&b], &[x[0].sizes()[0]], vec![0; x[0].sizes()[0]]);
        let g = gather(&x[0], &first, t, true).unwrap();
        // Broadcast back over time so that the check slices it by length.
        let m = sequence_mask(std::slice::from_ref(t), &be()).unwrap();
        where_(&m, &g, &float(&[], &[], vec![0.0]), true).unwrap()
    });
}

#[test]
fn cross_entropy_with_dense_targets() {
    let (b, c) = (batch_dim(), Dim::new_static(3, "classes"));
    let logits = vec![1.0, 2.0, 3.0, 0.5, -1.0, 0.0];
    let tv = [0.2, 0.3, 0.5, 1.0, 0.0, 0.0];
    let x = float(&[&b, &c], &[2, 3], logits.clone());
    let target = float(&[&c, &b], &[3, 2], vec![0.2, 1.0, 0.3, 0.0, 0.5, 0.0]);
    let log_softmax_row = |r: &[f32]| {
        let lse = r.iter().map(|v| v.exp()).sum::<f32>().ln();
        r.iter().map(|v| v - lse).collect::<Vec<f32>>()
    };
    let want: Vec<f32> = (0..2)
        .map(|i| {
            let lp = log_softmax_row(&logits[i * 3..i * 3 + 3]);
            -(0..3).map(|j| tv[i * 3 + j] * lp[j]).sum::<f32>()
        })
        .collect();
    for kind in [
        EstimatedType::Logits,
        EstimatedType::LogProbs,
        EstimatedType::Probs,
    ] {
        let est = match kind {
            EstimatedType::Logits => x.clone(),
            EstimatedType::LogProbs => log_softmax(&x, &c, true).unwrap(),
            EstimatedType::Probs => softmax(&x, &c, true).unwrap(),
        };
        let ce = cross_entropy(&est, &target, &c, kind).unwrap();
        assert_eq!(names(&ce), ["batch"]);
        assert_close(&format!("dense {kind:?}"), &vals(&ce), &want, 1e-5);
    }
    let wrong = float(&[&b], &[2], vec![0.0, 1.0]);
    let err = cross_entropy(&x, &wrong, &c, EstimatedType::Logits)
        .unwrap_err()
        .to_string();
    assert!(err.contains("over the class dim classes"), "{err}");
    gradcheck(
        "dense cross_entropy",
        &[
            (vec![b.clone(), c.clone()], vec![2, 3], logits),
            (
                vec![c.clone(), b.clone()],
                vec![3, 2],
                vec![0.2, 1.0, 0.3, 0.0, 0.5, 0.0],
            ),
        ],
        |x| cross_entropy(&x[0], &x[1], &c, EstimatedType::Logits).unwrap(),
    );
}
