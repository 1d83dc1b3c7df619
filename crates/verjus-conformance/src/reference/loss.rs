//! Reference softmax cross-entropy with label smoothing.
//!
//! The target row puts `1 - s + s / classes` on the label and `s / classes`
//! elsewhere; `loss = -sum(target * log_softmax(logits))` and
//! `dlogits = (softmax(logits) - target) * grad_scale`. Losses are not scaled.

use crate::array::Array;

/// Per-example losses and the scaled gradient of the logits `[n, classes]`.
pub fn softmax_cross_entropy(
    logits: &Array,
    labels: &[i64],
    smoothing: f32,
    grad_scale: f32,
) -> (Vec<f32>, Array) {
    let (n, classes) = (logits.dims[0], logits.dims[1]);
    assert_eq!(labels.len(), n, "reference softmax_cross_entropy: labels");
    let s = f64::from(smoothing);
    let mut losses = Vec::with_capacity(n);
    let mut grad = Array::zeros(logits.dims.clone());
    for (i, &label) in labels.iter().enumerate() {
        let row = &logits.data[i * classes..(i + 1) * classes];
        let label = usize::try_from(label)
            .ok()
            .filter(|&l| l < classes)
            .expect("reference softmax_cross_entropy: label in range");
        let max = row
            .iter()
            .map(|&v| f64::from(v))
            .fold(f64::NEG_INFINITY, f64::max);
        let lse = max
            + row
                .iter()
                .map(|&v| (f64::from(v) - max).exp())
                .sum::<f64>()
                .ln();
        let mut loss = 0f64;
        for (c, &v) in row.iter().enumerate() {
            let target = s / classes as f64 + if c == label { 1.0 - s } else { 0.0 };
            let log_p = f64::from(v) - lse;
            loss -= target * log_p;
            grad.data[i * classes + c] = ((log_p.exp() - target) * f64::from(grad_scale)) as f32;
        }
        losses.push(loss as f32);
    }
    (losses, grad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cross_entropy_by_hand() {
        // Two equal logits: loss ln 2, gradient (0.5 - 1, 0.5).
        let logits = Array::new([1, 2], vec![3.0, 3.0]);
        let (l, g) = softmax_cross_entropy(&logits, &[0], 0.0, 1.0);
        assert!((l[0] - 2f32.ln()).abs() < 1e-7);
        assert_eq!(g.data, vec![-0.5, 0.5]);
        // Smoothing 0.5 over two classes: target (0.75, 0.25); loss is still ln 2.
        let (l, g) = softmax_cross_entropy(&logits, &[1], 0.5, 2.0);
        assert!((l[0] - 2f32.ln()).abs() < 1e-7);
        assert_eq!(g.data, vec![0.5, -0.5]);
        // A single class has zero loss and gradient.
        let (l, g) = softmax_cross_entropy(&Array::new([1, 1], vec![7.0]), &[0], 0.1, 1.0);
        assert_eq!((l, g.data), (vec![0.0], vec![0.0]));
    }
}
