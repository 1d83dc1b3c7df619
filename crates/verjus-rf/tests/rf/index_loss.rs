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
