//! Random draws and dropout: reproducible, never overlapping, masks shared
//! along dims outside `axis`, identity outside training, gradients.

use crate::common::*;
use verjus_rf::*;

#[test]
fn random_draws_and_dropout() {
    let (b, f) = (Dim::new_static(200, "b"), Dim::new_static(50, "f"));
    set_random_seed(3);
    let u = vals(&random_uniform(&[b.clone(), f.clone()], -1.0, 1.0, &be()).unwrap());
    let again = vals(&random_uniform(&[b.clone(), f.clone()], -1.0, 1.0, &be()).unwrap());
    assert_ne!(u, again, "the stream advances");
    set_random_seed(3);
    assert_eq!(
        u,
        vals(&random_uniform(&[b.clone(), f.clone()], -1.0, 1.0, &be()).unwrap())
    );
    assert!(u.iter().all(|v| (-1.0..1.0).contains(v)));
    let n = vals(&random_normal(&[b.clone(), f.clone()], 2.0, 0.5, &be()).unwrap());
    let mean = n.iter().sum::<f32>() / n.len() as f32;
    assert!((mean - 2.0).abs() < 0.05, "{mean}");
    // An unknown dim that no tensor made from data has given a size.
    assert!(random_normal(&[Dim::new_unknown("u")], 0.0, 1.0, &be()).is_err());

    let x = float(&[&b, &f], &[200, 50], vec![1.0; 10000]);
    assert!(dropout(&x, 0.5, None, false).unwrap().var().ptr_eq(x.var()));
    let y = vals(&dropout(&x, 0.25, None, true).unwrap());
    assert!(y.iter().all(|&v| v == 0.0 || (v - 1.0 / 0.75).abs() < 1e-6));
    let kept = y.iter().filter(|&&v| v > 0.0).count() as f32 / y.len() as f32;
    assert!((kept - 0.75).abs() < 0.03, "{kept}");
    // A mask over f only: each f column is kept or dropped for every b.
    let y = vals(&dropout(&x, 0.5, Some(std::slice::from_ref(&f)), true).unwrap());
    for j in 0..50 {
        assert!((0..200).all(|i| y[i * 50 + j] == y[j]), "column {j}");
    }
    let err = dropout(&x, 0.5, Some(&[batch_dim()]), true)
        .unwrap_err()
        .to_string();
    assert!(err.contains("batch") && err.contains("[b, f]"), "{err}");
    let g = Dim::new_static(3, "g");
    set_random_seed(9);
    gradcheck(
        "dropout",
        &[(vec![g.clone()], vec![3], vec![0.5, -1.0, 2.0])],
        |x| {
            set_random_seed(9);
            dropout(&x[0], 0.5, None, true).unwrap()
        },
    );
}
