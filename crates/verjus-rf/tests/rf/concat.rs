//! concat and pad: values, the returned dims, out_dim, errors, gradients.

use crate::common::*;
use verjus_rf::*;

#[test]
fn concat_joins_parts_in_any_order() {
    let (b, f, g) = (
        batch_dim(),
        Dim::new_static(2, "f"),
        Dim::new_static(1, "g"),
    );
    let x = float(&[&b, &f], &[2, 2], vec![1.0, 2.0, 3.0, 4.0]);
    let y = float(&[&g, &b], &[1, 2], vec![10.0, 20.0]);
    let (z, d) = concat(&[(x.clone(), f.clone()), (y.clone(), g.clone())], None).unwrap();
    assert_eq!(
        (d.static_size(), names(&z)),
        (Some(3), vec!["batch".to_owned(), "f+1".to_owned()])
    );
    // The joined dim is `f + g` by dim arithmetic, as RETURNN's: one dim for
    // the same parts, equal to the formula written in model code.
    assert_eq!(d, f.add_dim(&g, false).unwrap());
    assert_eq!(vals(&z), [1.0, 2.0, 10.0, 3.0, 4.0, 20.0]);
    let out = Dim::new_static(3, "joined");
    let (z, d) = concat(
        &[(x.clone(), f.clone()), (y.clone(), g.clone())],
        Some(out.clone()),
    )
    .unwrap();
    assert_eq!(d, out);
    assert_eq!(z.dims()[1], out);
    let err = concat(&[(x.clone(), f.clone())], Some(out))
        .unwrap_err()
        .to_string();
    assert!(err.contains("joined size 2"), "{err}");
    let other = float(&[&g], &[1], vec![0.0]);
    let err = concat(&[(x.clone(), f.clone()), (other, g.clone())], None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("[batch, f]") && err.contains("[g]"), "{err}");
    gradcheck(
        "concat",
        &[
            (
                vec![b.clone(), f.clone()],
                vec![2, 2],
                uniform(1, 4, -1.0, 1.0),
            ),
            (
                vec![g.clone(), b.clone()],
                vec![1, 2],
                uniform(2, 2, -1.0, 1.0),
            ),
        ],
        |x| {
            concat(
                &[(x[0].clone(), f.clone()), (x[1].clone(), g.clone())],
                None,
            )
            .unwrap()
            .0
        },
    );
}

#[test]
fn pad_adds_entries_and_returns_new_dims() {
    let (b, f) = (batch_dim(), Dim::new_static(2, "f"));
    let x = float(&[&b, &f], &[2, 2], vec![1.0, 2.0, 3.0, 4.0]);
    let (y, dims) = pad(&x, std::slice::from_ref(&f), &[(1, 2)], None, -1.0).unwrap();
    assert_eq!((dims.len(), dims[0].static_size()), (1, Some(5)));
    assert_eq!(names(&y), ["batch", "f"]);
    assert_ne!(y.dims()[1], f);
    assert_eq!(
        vals(&y),
        [-1.0, 1.0, 2.0, -1.0, -1.0, -1.0, 3.0, 4.0, -1.0, -1.0]
    );
    let err = pad(&x, std::slice::from_ref(&f), &[], None, 0.0)
        .unwrap_err()
        .to_string();
    assert!(err.contains("paddings"), "{err}");
    gradcheck(
        "pad",
        &[(
            vec![b.clone(), f.clone()],
            vec![2, 2],
            uniform(3, 4, -1.0, 1.0),
        )],
        |x| {
            pad(&x[0], std::slice::from_ref(&f), &[(0, 1)], None, 0.0)
                .unwrap()
                .0
        },
    );
}
