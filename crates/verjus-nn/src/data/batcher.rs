//! Batches of texts for a character language model, by similar length.
//!
//! A batch is batch-major int32 token ids: `inputs [B, T]` = `<eot>` then the
//! text's characters, `targets [B, T]` = the characters then `<eot>` (the
//! inputs shifted by one), both padded with `<pad>` past `lengths [B]` (int32,
//! a text's characters + 1); `T` is the batch's longest length.
//!
//! Bucketing, to limit padding: each epoch shuffles the texts, cuts the order
//! into pools of `pool` batches, sorts each pool by length (stably) and cuts it
//! into batches, then shuffles the order of all batches. Texts of a batch thus
//! have nearly the same length (neighbours among `batch_size * pool` sorted
//! texts), while which texts share a batch, and the order of the batches,
//! change from epoch to epoch. Only the last batch of the last pool can be
//! short. Both permutations come from the Philox stream of
//! [`verjus_core::rng`] keyed by the seed and the epoch, so a seed gives the
//! same batches on every machine. Without a seed (evaluation), all texts are
//! sorted by length and batched in that order.

use super::vocab::{CharVocab, EOT, PAD};
use verjus_core::{rng, Error, Result, Tensor};

/// Encoded texts cut into padded batches (see the module docs).
#[derive(Clone, Debug)]
pub struct TextBatcher {
    texts: Vec<Vec<i32>>,
    batch_size: usize,
    pool: usize,
}

/// One padded batch of `B` texts.
#[derive(Debug)]
pub struct TextBatch {
    /// `[B, T]` int32: `<eot>`, then the characters, then `<pad>`.
    pub inputs: Tensor,
    /// `[B, T]` int32: the characters, `<eot>`, then `<pad>`.
    pub targets: Tensor,
    /// `[B]` int32: each text's real frames (its characters + 1).
    pub lengths: Tensor,
    /// The texts' indices in the batcher's list.
    pub texts: Vec<usize>,
    /// The real frames of the batch, the sum of `lengths`.
    pub tokens: usize,
}

impl TextBatcher {
    /// Encodes `texts` with `vocab` (an unknown character is an error naming
    /// the text's index) for batches of `batch_size` texts sorted in pools of
    /// `pool` batches.
    pub fn new<S: AsRef<str>>(
        vocab: &CharVocab,
        texts: &[S],
        batch_size: usize,
        pool: usize,
    ) -> Result<Self> {
        let op = "TextBatcher";
        if batch_size == 0 || pool == 0 {
            return Err(Error::invalid(
                op,
                format!("batch_size and pool must be > 0, got {batch_size} and {pool}"),
            ));
        }
        if texts.is_empty() {
            return Err(Error::invalid(op, "no texts to batch"));
        }
        let texts = texts
            .iter()
            .enumerate()
            .map(|(i, t)| vocab.encode(i, t.as_ref()))
            .collect::<Result<_>>()?;
        Ok(TextBatcher {
            texts,
            batch_size,
            pool,
        })
    }

    /// The number of texts.
    pub fn num_texts(&self) -> usize {
        self.texts.len()
    }

    /// The number of batches of an epoch.
    pub fn num_batches(&self) -> usize {
        self.texts.len().div_ceil(self.batch_size)
    }

    /// The texts per batch (the last batch may hold fewer).
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// The real frames of an epoch: every text's characters + 1.
    pub fn tokens(&self) -> usize {
        self.texts.iter().map(|t| t.len() + 1).sum()
    }

    /// The texts of each batch of epoch `epoch`, in batch order: shuffled and
    /// bucketed from `seed`, or, with `None`, sorted by length.
    pub fn plan(&self, seed: Option<u64>, epoch: u64) -> Vec<Vec<usize>> {
        let mut order: Vec<usize> = (0..self.texts.len()).collect();
        let by_len = |o: &mut [usize]| o.sort_by_key(|&i| self.texts[i].len());
        let Some(seed) = seed else {
            by_len(&mut order);
            return order.chunks(self.batch_size).map(<[_]>::to_vec).collect();
        };
        let w = rng::block(seed, epoch);
        let texts_key = u64::from(w[0]) | (u64::from(w[1]) << 32);
        let batches_key = u64::from(w[2]) | (u64::from(w[3]) << 32);
        permute(&mut order, texts_key);
        let mut batches: Vec<Vec<usize>> = Vec::with_capacity(self.num_batches());
        for pool in order.chunks_mut(self.batch_size * self.pool) {
            by_len(pool);
            batches.extend(pool.chunks(self.batch_size).map(<[_]>::to_vec));
        }
        permute(&mut batches, batches_key);
        batches
    }

    /// The padded batch of the texts `rows` (indices into the batcher's list).
    pub fn batch(&self, rows: &[usize]) -> Result<TextBatch> {
        let op = "TextBatcher::batch";
        if rows.is_empty() {
            return Err(Error::invalid(op, "no texts in the batch"));
        }
        if let Some(&bad) = rows.iter().find(|&&r| r >= self.texts.len()) {
            return Err(Error::invalid(
                op,
                format!("text {bad} is outside [0, {})", self.texts.len()),
            ));
        }
        let lens: Vec<usize> = rows.iter().map(|&r| self.texts[r].len() + 1).collect();
        let t = lens.iter().copied().max().unwrap_or(1);
        let (b, mut tokens) = (rows.len(), 0);
        let mut inputs = vec![PAD; b * t];
        let mut targets = vec![PAD; b * t];
        for (i, (&r, &len)) in rows.iter().zip(&lens).enumerate() {
            let ids = &self.texts[r];
            let row = i * t;
            inputs[row] = EOT;
            inputs[row + 1..row + len].copy_from_slice(ids);
            targets[row..row + len - 1].copy_from_slice(ids);
            targets[row + len - 1] = EOT;
            tokens += len;
        }
        let lengths = lens
            .iter()
            .map(|&l| i32::try_from(l).map_err(|_| Error::invalid(op, format!("text of {l} ids"))))
            .collect::<Result<Vec<i32>>>()?;
        Ok(TextBatch {
            inputs: Tensor::from_vec([b, t], inputs)?,
            targets: Tensor::from_vec([b, t], targets)?,
            lengths: Tensor::from_vec([b], lengths)?,
            texts: rows.to_vec(),
            tokens,
        })
    }

    /// The batches of epoch `epoch` (see [`plan`](Self::plan)).
    pub fn batches(
        &self,
        seed: Option<u64>,
        epoch: u64,
    ) -> impl Iterator<Item = Result<TextBatch>> + '_ {
        self.plan(seed, epoch)
            .into_iter()
            .map(|rows| self.batch(&rows))
    }
}

/// Seeded Fisher–Yates shuffle: swap `i` with a uniform `j <= i`, from the end.
fn permute<T>(items: &mut [T], seed: u64) {
    for i in (1..items.len()).rev() {
        let w = rng::block(seed, i as u64);
        let bits = u64::from(w[0]) | (u64::from(w[1]) << 32);
        // Multiply-shift maps 64 random bits onto [0, i] (bias below 2^-32).
        let j = ((u128::from(bits) * (i as u128 + 1)) >> 64) as usize;
        items.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Texts of lengths 0..n (cycling through a few letters).
    fn texts(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| "abcde".chars().cycle().skip(i).take(i % 37).collect())
            .collect()
    }

    fn batcher(n: usize, b: usize, pool: usize) -> (CharVocab, Vec<String>, TextBatcher) {
        let t = texts(n);
        let v = CharVocab::build(&t);
        let batcher = TextBatcher::new(&v, &t, b, pool).unwrap();
        (v, t, batcher)
    }

    #[test]
    fn a_batch_is_the_shifted_texts_padded() {
        let v = CharVocab::build(&["ab", "c"]);
        let batcher = TextBatcher::new(&v, &["ab", "c", ""], 3, 1).unwrap();
        let batch = batcher.batch(&[1, 0, 2]).unwrap();
        let (a, b, c) = (v.id('a').unwrap(), v.id('b').unwrap(), v.id('c').unwrap());
        assert_eq!(batch.inputs.dims(), &[3, 3]);
        assert_eq!(
            batch.inputs.to_vec::<i32>().unwrap(),
            [EOT, c, PAD, EOT, a, b, EOT, PAD, PAD]
        );
        assert_eq!(
            batch.targets.to_vec::<i32>().unwrap(),
            [c, EOT, PAD, a, b, EOT, EOT, PAD, PAD]
        );
        assert_eq!(batch.lengths.to_vec::<i32>().unwrap(), [2, 3, 1]);
        assert_eq!(batch.tokens, 6);
        assert_eq!(batch.texts, [1, 0, 2]);
        assert_eq!(batcher.tokens(), 6);
        let e = batcher.batch(&[3]).unwrap_err().to_string();
        assert!(e.contains("text 3 is outside [0, 3)"), "{e}");
        assert!(batcher.batch(&[]).is_err());
    }

    #[test]
    fn bad_settings_and_unknown_characters_are_errors() {
        let v = CharVocab::build(&["ab"]);
        let e = TextBatcher::new(&v, &["ab", "abc"], 2, 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("text 1") && e.contains("'c'"), "{e}");
        assert!(TextBatcher::new(&v, &["ab"], 0, 1).is_err());
        assert!(TextBatcher::new(&v, &["ab"], 1, 0).is_err());
        assert!(TextBatcher::new::<&str>(&v, &[], 1, 1).is_err());
    }

    #[test]
    fn every_text_once_per_epoch_and_the_order_follows_seed_and_epoch() {
        let (_, _, batcher) = batcher(203, 8, 4);
        let plan = |seed, epoch| batcher.plan(seed, epoch);
        let a = plan(Some(5), 0);
        assert_eq!(a.len(), batcher.num_batches());
        assert_eq!(a.len(), 26);
        assert_eq!(a.iter().filter(|b| b.len() != 8).count(), 1);
        let mut all: Vec<usize> = a.concat();
        all.sort_unstable();
        assert_eq!(all, (0..203).collect::<Vec<_>>());
        assert_eq!(a, plan(Some(5), 0));
        assert_ne!(a, plan(Some(5), 1));
        assert_ne!(a, plan(Some(6), 0));
        // Membership changes across epochs, not only the order of batches.
        let sets = |p: Vec<Vec<usize>>| {
            let mut s: Vec<Vec<usize>> = p
                .into_iter()
                .map(|mut b| {
                    b.sort_unstable();
                    b
                })
                .collect();
            s.sort();
            s
        };
        assert_ne!(sets(a), sets(plan(Some(5), 1)));
    }

    #[test]
    fn bucketing_limits_padding() {
        let (_, _, batcher) = batcher(400, 10, 8);
        let padded = |plan: &[Vec<usize>]| -> usize {
            plan.iter()
                .map(|rows| {
                    let b = batcher.batch(rows).unwrap();
                    b.inputs.numel()
                })
                .sum()
        };
        let bucketed = padded(&batcher.plan(Some(1), 0));
        // The same texts in random batches (a pool of one batch sorts nothing).
        let (_, _, unsorted) = self::batcher(400, 10, 1);
        let random = padded(&unsorted.plan(Some(1), 0));
        assert!(bucketed * 10 < random * 8, "{bucketed} vs {random}");
        assert!(batcher.tokens() <= bucketed);
        // Without a seed, sorted by length: the least padding.
        let sorted = batcher.plan(None, 0);
        assert!(padded(&sorted) <= bucketed);
        let lens: Vec<usize> = sorted.concat().iter().map(|&i| i % 37).collect();
        assert!(lens.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn batches_decode_to_their_texts() {
        let (v, t, batcher) = batcher(50, 7, 2);
        let mut seen = 0;
        for batch in batcher.batches(Some(9), 3) {
            let batch = batch.unwrap();
            let width = batch.inputs.dims()[1];
            let inputs = batch.inputs.to_vec::<i32>().unwrap();
            let lengths = batch.lengths.to_vec::<i32>().unwrap();
            for (i, &r) in batch.texts.iter().enumerate() {
                let row = &inputs[i * width..(i + 1) * width];
                assert_eq!(v.decode(row).unwrap(), t[r]);
                assert_eq!(lengths[i] as usize, t[r].len() + 1);
                assert!(row[lengths[i] as usize..].iter().all(|&x| x == PAD));
            }
            seen += batch.texts.len();
        }
        assert_eq!(seen, 50);
    }
}
