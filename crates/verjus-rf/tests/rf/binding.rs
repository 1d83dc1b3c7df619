//! Dims bound after they are made, and again per batch (`Dim::set_lengths`):
//! the same dim object takes each batch's lengths, masks follow them, dims
//! derived by formula are made anew, and static dims refuse.

use crate::common::*;
use verjus_rf::*;

#[test]
fn a_dim_takes_each_batch_lengths() {
    let (b, t) = (batch_dim(), Dim::new_unknown("t"));
    assert_eq!((t.size(), t.is_dynamic()), (None, false));
    let mut sums = Vec::new();
    for lens in [[3, 1], [2, 4]] {
        t.set_lengths(Some(lengths(&lens))).unwrap();
        let n = *lens.iter().max().unwrap() as usize;
        assert_eq!(t.size(), Some(n));
        let x = float(&[&b, &t], &[2, n], vec![1.0; 2 * n]);
        let s = reduce(&x, ReduceMode::Sum, std::slice::from_ref(&t), true).unwrap();
        sums.push(vals(&s));
        let plus_one = t.add(1, false).unwrap();
        assert_eq!(
            dim_lengths(&plus_one, 2),
            [lens[0] as usize + 1, lens[1] as usize + 1]
        );
    }
    assert_eq!(sums, [vec![3.0, 1.0], vec![2.0, 4.0]]);
    assert_eq!(t.lengths_template().map(|(d, _)| d), Some(vec![b.clone()]));
    t.set_lengths(None).unwrap();
    assert_eq!((t.size(), t.is_dynamic()), (None, false));
}

#[test]
fn a_scalar_size_binds_without_a_mask() {
    let d = Dim::new_unknown("beam");
    let three = RfTensor::from_tensor(
        verjus_core::Tensor::from_vec(Vec::<usize>::new(), vec![3i32]).unwrap(),
        vec![],
        None,
        be(),
        false,
    )
    .unwrap();
    d.set_lengths(Some(three)).unwrap();
    assert_eq!((d.size_or_seen(), d.is_dynamic()), (Some(3), false));
    assert!(d.mask().unwrap().is_none());
}

#[test]
fn bad_bindings_are_errors() {
    let f = Dim::new_static(3, "f");
    let err = f.set_lengths(Some(lengths(&[1, 2]))).unwrap_err();
    assert!(err.to_string().contains("static (3)"), "{err}");
    let t = Dim::new_unknown("t");
    let err = t.set_lengths(Some(lengths(&[1, -2]))).unwrap_err();
    assert!(err.to_string().contains(">= 0"), "{err}");
    let own = RfTensor::from_tensor(
        verjus_core::Tensor::from_vec([2], vec![1i32, 2]).unwrap(),
        vec![t.clone()],
        None,
        be(),
        false,
    )
    .unwrap();
    let err = t.set_lengths(Some(own)).unwrap_err();
    assert!(err.to_string().contains("over the dim itself"), "{err}");
}
