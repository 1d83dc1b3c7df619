//! Losses against host computations: values are batch means, gradients are
//! of the batch sum.

use crate::common::{assert_close, be, host, rand_vec, tensor, zeros_like};
use verjus_core::{ops, Tensor};
use verjus_nn::Loss;

fn labels(v: Vec<i64>) -> Tensor {
    let n = v.len();
    ops::upload(&be(), &Tensor::from_vec([n], v).unwrap()).unwrap()
}

fn log_softmax_rows(x: &[f32], classes: usize) -> Vec<f32> {
    x.chunks(classes)
        .flat_map(|row| {
            let m = row.iter().cloned().fold(f32::MIN, f32::max);
            let lse = m + row.iter().map(|v| (v - m).exp()).sum::<f32>().ln();
            row.iter().map(move |v| v - lse).collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn cross_entropy() {
    let be = be();
    let x = rand_vec(12, 1);
    let logits = tensor(&be, &[3, 4], x.clone());
    let y = labels(vec![2, 0, 3]);
    let mut grad = zeros_like(&be, &logits);
    let loss = Loss::SoftmaxCrossEntropy {
        label_smoothing: 0.0,
    }
    .compute(&be, &logits, &y, Some(&mut grad))
    .unwrap();
    let lp = log_softmax_rows(&x, 4);
    let expected = -(lp[2] + lp[4] + lp[11]) / 3.0;
    assert!((loss - expected).abs() < 1e-5, "{loss} vs {expected}");
    let mut g: Vec<f32> = lp.iter().map(|v| v.exp()).collect();
    for (i, l) in [2, 0, 3].iter().enumerate() {
        g[i * 4 + l] -= 1.0;
    }
    assert_close("gradient", &host(&be, &grad), &g, 1e-5);
    let err = Loss::SoftmaxCrossEntropy {
        label_smoothing: 0.0,
    }
    .compute(&be, &logits, &labels(vec![2, 4, 0]), None)
    .unwrap_err()
    .to_string();
    assert!(err.contains('4'), "{err}");
}

#[test]
fn nll() {
    let be = be();
    let lp = log_softmax_rows(&rand_vec(15, 2), 5);
    let logp = tensor(&be, &[3, 5], lp.clone());
    let mut grad = zeros_like(&be, &logp);
    let loss = Loss::Nll
        .compute(&be, &logp, &labels(vec![4, 1, 0]), Some(&mut grad))
        .unwrap();
    let expected = -(lp[4] + lp[6] + lp[10]) / 3.0;
    assert!((loss - expected).abs() < 1e-5, "{loss} vs {expected}");
    let mut g = vec![0.0; 15];
    g[4] = -1.0;
    g[6] = -1.0;
    g[10] = -1.0;
    assert_eq!(host(&be, &grad), g);
    assert!(Loss::Nll
        .compute(&be, &logp, &labels(vec![0, 5, 0]), None)
        .is_err());
    assert!(Loss::Nll
        .compute(&be, &logp, &labels(vec![0, 1]), None)
        .is_err());
}

#[test]
fn mse() {
    let be = be();
    let (o, t) = (rand_vec(6, 3), rand_vec(6, 4));
    let out = tensor(&be, &[2, 3], o.clone());
    let target = tensor(&be, &[2, 3], t.clone());
    let mut grad = zeros_like(&be, &out);
    let loss = Loss::Mse
        .compute(&be, &out, &target, Some(&mut grad))
        .unwrap();
    let expected: f32 = o
        .iter()
        .zip(&t)
        .map(|(a, b)| (a - b) * (a - b))
        .sum::<f32>()
        / 6.0;
    assert!((loss - expected).abs() < 1e-5);
    let g: Vec<f32> = o.iter().zip(&t).map(|(a, b)| 2.0 * (a - b) / 3.0).collect();
    assert_close("gradient", &host(&be, &grad), &g, 1e-5);
    let wrong = tensor(&be, &[3, 2], t);
    let err = Loss::Mse
        .compute(&be, &out, &wrong, None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("[2, 3]") && err.contains("[3, 2]"), "{err}");
}
