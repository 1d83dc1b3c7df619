//! full, expand_dim, merge_dims, split_dims: values, dims, errors, gradients.

use crate::common::*;
use verjus_rf::*;

#[test]
fn full_and_expand_dim() {
    let (f, g) = (Dim::new_static(2, "f"), Dim::new_static(3, "g"));
    let ones = full(&[f.clone(), g.clone()], 1.0, RfDType::Float32, &be()).unwrap();
    assert_eq!(
        (names(&ones), vals(&ones)),
        (vec!["f".to_owned(), "g".to_owned()], vec![1.0; 6])
    );
    // An unknown dim: an error until data over it was made, then that size.
    let unknown = Dim::new_unknown("beam");
    let err = full(std::slice::from_ref(&unknown), 0.0, RfDType::Float32, &be())
        .unwrap_err()
        .to_string();
    assert!(err.contains("beam"), "{err}");
    float(&[&unknown], &[3], vec![1.0, 2.0, 3.0]);
    let zeros = full(&[unknown], 0.0, RfDType::Float32, &be()).unwrap();
    assert_eq!(vals(&zeros), [0.0; 3]);
    let x = float(&[&batch_dim()], &[2], vec![1.0, 2.0]);
    assert_eq!(vals(&full_like(&x, 7.0).unwrap()), [7.0, 7.0]);
    let y = expand_dim(&x, &g).unwrap();
    assert_eq!(names(&y), ["batch", "g"]);
    assert_eq!(vals(&y), [1.0, 1.0, 1.0, 2.0, 2.0, 2.0]);
    assert!(expand_dim(&y, &g).is_err());
    let lens = expand_dim(&lengths(&[3, 1]), &f).unwrap();
    assert_eq!(lens.dtype(), RfDType::Int32);
}

#[test]
fn merge_and_split_dims() {
    let (a, b, c) = (
        Dim::new_static(2, "a"),
        Dim::new_static(3, "b"),
        Dim::new_static(2, "c"),
    );
    let v: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let x = float(&[&a, &b, &c], &[2, 3, 2], v.clone());
    // Merge c and a (not adjacent, in that order): [b, (c, a)] -> at a's place.
    let (y, m) = merge_dims(&x, &[c.clone(), a.clone()], None).unwrap();
    assert_eq!(m.static_size(), Some(4));
    assert_eq!(names(&y), ["c*a", "b"]);
    // The merged dim is `c * a` by dim arithmetic, as RETURNN's.
    assert_eq!(m, c.mul_dim(&a, false).unwrap());
    let with_feature = x.clone().with_feature_dim(Some(c.clone())).unwrap();
    let (merged, _) = merge_dims(&with_feature, &[c.clone(), a.clone()], None).unwrap();
    assert_eq!(merged.feature_dim(), Some(&m));
    // y[(c, a), b] = x[a, b, c]
    let mut want = Vec::new();
    for ci in 0..2 {
        for ai in 0..2 {
            for bi in 0..3 {
                want.push(v[ai * 6 + bi * 2 + ci]);
            }
        }
    }
    assert_eq!(vals(&y), want);
    let back = split_dims(&y, &m, &[c.clone(), a.clone()]).unwrap();
    assert_eq!(names(&back), ["c", "a", "b"]);
    let back = back
        .copy_transpose(&[a.clone(), b.clone(), c.clone()])
        .unwrap();
    assert_eq!(vals(&back), v);
    let err = split_dims(&y, &m, std::slice::from_ref(&b))
        .unwrap_err()
        .to_string();
    assert!(err.contains("[b]") && err.contains("size 4"), "{err}");
    let t = time(&[2, 1]);
    let dynamic = float(&[&batch_dim(), &t], &[2, 2], vec![0.0; 4]);
    assert!(merge_dims(&dynamic, &[batch_dim(), t.clone()], None).is_err());
    gradcheck(
        "merge_dims",
        &[(
            vec![a.clone(), b.clone(), c.clone()],
            vec![2, 3, 2],
            uniform(5, 12, -1.0, 1.0),
        )],
        |x| merge_dims(&x[0], &[c.clone(), a.clone()], None).unwrap().0,
    );
}
