//! Reference CTC loss by enumeration: every sequence of one class per frame
//! is an alignment; those that collapse (merge repeats, then drop blanks) to
//! the target are summed (or, for the Viterbi approximation, maximised).
//! Exponential in the frames, so only for tiny sizes, and obviously right.

use crate::array::Array;

/// One batch of a CTC call: `log_probs [B, T, C]`, `targets [B, S]` (row
/// major), per-entry lengths, the blank class and the approximation.
#[derive(Clone, Debug)]
pub struct CtcCase {
    pub log_probs: Array,
    pub targets: Vec<i32>,
    pub max_target: usize,
    pub input_lengths: Vec<i32>,
    pub target_lengths: Vec<i32>,
    pub blank: usize,
    pub max_approx: bool,
}

/// Per-entry losses and the gradient `d loss[b] / d log_probs[b, t, c]`; an
/// entry no alignment produces has loss `+inf` and gradient zero.
pub fn ctc_loss(case: &CtcCase) -> (Vec<f32>, Array) {
    let dims = &case.log_probs.dims;
    let (batch, time, classes) = (dims[0], dims[1], dims[2]);
    let mut losses = Vec::with_capacity(batch);
    let mut grad = Array::zeros(dims.clone());
    for b in 0..batch {
        let frames = case.input_lengths[b] as usize;
        let start = b * case.max_target;
        let target = &case.targets[start..start + case.target_lengths[b] as usize];
        let lp = |t: usize, c: usize| f64::from(case.log_probs.data[(b * time + t) * classes + c]);
        // Every alignment that yields the target, with its log-score.
        let mut found: Vec<(Vec<usize>, f64)> = Vec::new();
        let mut path = vec![0usize; frames];
        loop {
            if collapse(&path, case.blank) == target {
                let score = path.iter().enumerate().map(|(t, &c)| lp(t, c)).sum();
                found.push((path.clone(), score));
            }
            if !next(&mut path, classes) {
                break;
            }
        }
        if found.is_empty() {
            losses.push(f32::INFINITY);
            continue;
        }
        let best = found.iter().map(|f| f.1).fold(f64::NEG_INFINITY, f64::max);
        if case.max_approx {
            let (path, _) = found.iter().find(|f| f.1 == best).expect("a best path");
            for (t, &c) in path.iter().enumerate() {
                grad.data[(b * time + t) * classes + c] = -1.0;
            }
            losses.push(-best as f32);
            continue;
        }
        let log_z = best + found.iter().map(|f| (f.1 - best).exp()).sum::<f64>().ln();
        let mut g = vec![0f64; time * classes];
        for (path, score) in &found {
            let post = (score - log_z).exp();
            for (t, &c) in path.iter().enumerate() {
                g[t * classes + c] -= post;
            }
        }
        for (i, v) in g.into_iter().enumerate() {
            grad.data[b * time * classes + i] = v as f32;
        }
        losses.push(-log_z as f32);
    }
    (losses, grad)
}

/// The labels an alignment stands for: repeats merged, blanks dropped.
fn collapse(path: &[usize], blank: usize) -> Vec<i32> {
    let mut out = Vec::new();
    let mut prev = None;
    for &c in path {
        if Some(c) != prev && c != blank {
            out.push(c as i32);
        }
        prev = Some(c);
    }
    out
}

/// Advances `path` to the next sequence in counting order; false after the last.
fn next(path: &mut [usize], classes: usize) -> bool {
    for c in path.iter_mut() {
        *c += 1;
        if *c < classes {
            return true;
        }
        *c = 0;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(lp: Vec<f32>, dims: [usize; 3], target: Vec<i32>, max_approx: bool) -> CtcCase {
        CtcCase {
            log_probs: Array::new(dims, lp),
            max_target: target.len(),
            target_lengths: vec![target.len() as i32],
            targets: target,
            input_lengths: vec![dims[1] as i32],
            blank: 0,
            max_approx,
        }
    }

    #[test]
    fn ctc_by_hand() {
        // Two frames, classes {blank, a}, uniform probabilities 1/2: the target
        // "a" has the alignments (a a), (_ a), (a _), so p = 3/4.
        let half = 0.5f32.ln();
        let c = case(vec![half; 4], [1, 2, 2], vec![1], false);
        let (l, g) = ctc_loss(&c);
        assert!((l[0] - (4.0f32 / 3.0).ln()).abs() < 1e-6);
        // Class a is occupied at frame 0 by 2 of the 3 alignments.
        assert!((g.data[1] + 2.0 / 3.0).abs() < 1e-6);
        // Target "a a" needs three frames: two give no alignment.
        let c = case(vec![half; 4], [1, 2, 2], vec![1, 1], false);
        assert_eq!(ctc_loss(&c).0, vec![f32::INFINITY]);
        // Viterbi over "a" with p(a) = 0.9 at frame 0 and 0.2 at frame 1: (a a)
        // scores 0.18, (a _) 0.72, (_ a) 0.02.
        let lp = [0.1f32, 0.9, 0.8, 0.2].map(f32::ln).to_vec();
        let (l, g) = ctc_loss(&case(lp, [1, 2, 2], vec![1], true));
        assert!((l[0] + 0.72f32.ln()).abs() < 1e-6);
        assert_eq!(g.data, vec![0.0, -1.0, -1.0, 0.0]);
    }
}
