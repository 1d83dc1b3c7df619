//! An in-memory dataset and its minibatches.
//!
//! Targets are either integer class labels `[N]` (i64, for classification
//! losses) or f32 values `[N, ...]` (for regression with `Loss::Mse`); batches
//! gather whichever there is. The examples and their targets stay on the host; a minibatch is gathered into
//! fresh host tensors, which the trainer hands to the network (uploading them
//! when the network runs on a device). Shuffling is a Fisher–Yates permutation
//! driven by the Philox stream of [`verjus_core::rng`], so a seed gives the same
//! order on every machine.

use verjus_core::{rng, DType, Device, Element, Error, Result, Tensor};

/// Examples `[N, ...]` (f32) and their targets: labels `[N]` (i64) or values
/// `[N, ...]` (f32), on the host.
#[derive(Debug)]
pub struct Dataset {
    examples: Tensor,
    labels: Tensor,
}

/// One minibatch: `x` is `[b, ...]`, `y` is `[b]` labels or `[b, ...]` values.
#[derive(Debug)]
pub struct Batch {
    pub x: Tensor,
    pub y: Tensor,
}

impl Dataset {
    /// Pairs examples (f32) with targets: i64 labels `[N]` or f32 values
    /// `[N, ...]`; both must be host tensors with the same first dimension.
    pub fn new(examples: Tensor, labels: Tensor) -> Result<Self> {
        let op = "Dataset::new";
        let target_dtype = if labels.dtype() == DType::F32 {
            DType::F32
        } else {
            DType::I64
        };
        for (what, t, dtype) in [
            ("examples", &examples, DType::F32),
            ("targets", &labels, target_dtype),
        ] {
            if t.device() != Device::Cpu {
                return Err(Error::invalid(op, format!("{what} must be host tensors")));
            }
            if t.dtype() != dtype {
                return Err(Error::DTypeMismatch {
                    op: op.into(),
                    what: what.into(),
                    expected: dtype,
                    actual: t.dtype(),
                });
            }
        }
        if examples.shape().rank() == 0 {
            return Err(Error::shape(op, "examples", "[N, ...]", examples.shape()));
        }
        let n = examples.dims()[0];
        let fits = match target_dtype {
            DType::F32 => labels.dims().first() == Some(&n),
            _ => labels.dims() == [n],
        };
        if !fits {
            let expected = match target_dtype {
                DType::F32 => format!("[{n}, ...]"),
                _ => format!("[{n}]"),
            };
            return Err(Error::shape(op, "targets", expected, labels.shape()));
        }
        Ok(Dataset { examples, labels })
    }

    /// The examples, `[N, ...]`.
    pub fn examples(&self) -> &Tensor {
        &self.examples
    }

    /// The targets: labels `[N]` (i64) or values `[N, ...]` (f32).
    pub fn labels(&self) -> &Tensor {
        &self.labels
    }

    /// The examples and the targets, giving up the dataset.
    pub fn into_parts(self) -> (Tensor, Tensor) {
        (self.examples, self.labels)
    }

    /// Number of examples.
    pub fn len(&self) -> usize {
        self.examples.dims()[0]
    }

    /// Whether there are no examples.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Checks that every integer label is a class in `[0, classes)`, naming the
    /// first that is not by its example's index: a minibatch's error can only
    /// name a row of the batch, which after shuffling says nothing. Float
    /// targets pass.
    pub fn check_labels(&self, classes: usize) -> Result<()> {
        if self.labels.dtype() != DType::I64 {
            return Ok(());
        }
        let labels = self.labels.as_slice::<i64>()?;
        let outside = |&l: &i64| usize::try_from(l).map_or(true, |l| l >= classes);
        match labels.iter().position(outside) {
            Some(i) => Err(Error::invalid(
                "Dataset",
                format!(
                    "label {} of example {i} is outside [0, {classes})",
                    labels[i]
                ),
            )),
            None => Ok(()),
        }
    }

    /// Minibatches of `batch_size` examples (the last one may be smaller), in
    /// order or, with `shuffle = Some(seed)`, in a seeded random order. Use a new
    /// seed per epoch (e.g. `seed + epoch`) for a new order.
    pub fn batches(&self, batch_size: usize, shuffle: Option<u64>) -> Result<Batches<'_>> {
        if batch_size == 0 {
            return Err(Error::invalid("Dataset::batches", "batch_size must be > 0"));
        }
        let mut order: Vec<usize> = (0..self.len()).collect();
        if let Some(seed) = shuffle {
            permute(&mut order, seed);
        }
        Ok(Batches {
            data: self,
            order,
            batch_size,
            next: 0,
            shard: (0, 1),
        })
    }
}

/// The iterator of [`Dataset::batches`].
#[derive(Debug)]
pub struct Batches<'a> {
    data: &'a Dataset,
    order: Vec<usize>,
    batch_size: usize,
    next: usize,
    /// This rank and the number of ranks (see [`Batches::shard`]).
    shard: (usize, usize),
}

impl Batches<'_> {
    /// Keeps rows `rank, rank + world, ...` of each batch: with the same seed
    /// on every rank, the ranks split each global batch between them, so
    /// data-parallel training sees the batches one process would. A batch
    /// smaller than `world` leaves some ranks no rows (a batch of 0 examples).
    pub fn shard(mut self, rank: usize, world: usize) -> Result<Self> {
        if rank >= world {
            return Err(Error::invalid(
                "Batches::shard",
                format!("rank {rank} is not below the world size {world}"),
            ));
        }
        self.shard = (rank, world);
        Ok(self)
    }

    /// Number of batches left.
    pub fn remaining(&self) -> usize {
        (self.order.len() - self.next).div_ceil(self.batch_size)
    }

    fn gather(&self, rows: &[usize]) -> Result<Batch> {
        let mut x_dims = self.data.examples.dims().to_vec();
        x_dims[0] = rows.len();
        let x = gather_rows::<f32>(&self.data.examples, rows, x_dims)?;
        let targets = &self.data.labels;
        let mut y_dims = targets.dims().to_vec();
        y_dims[0] = rows.len();
        let y = match targets.dtype() {
            DType::F32 => gather_rows::<f32>(targets, rows, y_dims)?,
            _ => gather_rows::<i64>(targets, rows, y_dims)?,
        };
        Ok(Batch { x, y })
    }
}

impl Iterator for Batches<'_> {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.order.len() {
            return None;
        }
        let end = (self.next + self.batch_size).min(self.order.len());
        let (rank, world) = self.shard;
        let rows: Vec<usize> = self.order[self.next..end]
            .iter()
            .skip(rank)
            .step_by(world)
            .copied()
            .collect();
        let batch = self.gather(&rows);
        self.next = end;
        Some(batch)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.remaining();
        (n, Some(n))
    }
}

impl ExactSizeIterator for Batches<'_> {}

/// The rows `rows` of the host tensor `src` (first axis), stacked into a new
/// host tensor of shape `dims`.
fn gather_rows<T: Element>(src: &Tensor, rows: &[usize], dims: Vec<usize>) -> Result<Tensor> {
    let row_len = src.dims()[1..].iter().product::<usize>();
    let src = src.as_slice::<T>()?;
    let mut out = Vec::with_capacity(rows.len() * row_len);
    for &r in rows {
        out.extend_from_slice(&src[r * row_len..(r + 1) * row_len]);
    }
    Tensor::from_vec(dims, out)
}

/// Seeded Fisher–Yates shuffle: swap `i` with a uniform `j <= i`, from the end.
fn permute(order: &mut [usize], seed: u64) {
    for i in (1..order.len()).rev() {
        let w = rng::block(seed, i as u64);
        let bits = u64::from(w[0]) | (u64::from(w[1]) << 32);
        // Multiply-shift maps 64 random bits onto [0, i] (bias below 2^-32).
        let j = ((u128::from(bits) * (i as u128 + 1)) >> 64) as usize;
        order.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toy(n: usize) -> Dataset {
        let x = (0..n * 2).map(|v| v as f32).collect();
        let y = (0..n as i64).collect();
        Dataset::new(
            Tensor::from_vec([n, 1, 2], x).unwrap(),
            Tensor::from_vec([n], y).unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn labels_outside_the_classes_name_their_example() {
        let data = toy(5);
        data.check_labels(5).unwrap();
        let err = data.check_labels(4).unwrap_err().to_string();
        assert!(err.contains("label 4 of example 4"), "{err}");
        let negative = Dataset::new(
            Tensor::from_vec([3, 1], vec![0f32; 3]).unwrap(),
            Tensor::from_vec([3], vec![0i64, -1, 2]).unwrap(),
        )
        .unwrap();
        let err = negative.check_labels(3).unwrap_err().to_string();
        assert!(err.contains("label -1 of example 1"), "{err}");
    }

    #[test]
    fn batches_in_order_with_a_short_last_one() {
        let data = toy(5);
        let batches: Vec<Batch> = data.batches(2, None).unwrap().map(Result::unwrap).collect();
        assert_eq!(batches.len(), 3);
        assert_eq!(batches[0].x.dims(), &[2, 1, 2]);
        assert_eq!(batches[0].x.to_vec::<f32>().unwrap(), [0.0, 1.0, 2.0, 3.0]);
        assert_eq!(batches[2].x.dims(), &[1, 1, 2]);
        assert_eq!(batches[2].y.to_vec::<i64>().unwrap(), [4]);
        assert_eq!(data.batches(2, None).unwrap().len(), 3);
        assert!(data.batches(0, None).is_err());
    }

    #[test]
    fn shuffling_is_a_seeded_permutation() {
        let data = toy(100);
        let order = |seed| -> Vec<i64> {
            data.batches(7, Some(seed))
                .unwrap()
                .flat_map(|b| b.unwrap().y.to_vec::<i64>().unwrap())
                .collect()
        };
        let (a, b, c) = (order(1), order(1), order(2));
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, (0..100).collect::<Vec<_>>());
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..100).collect::<Vec<_>>());
        // Examples travel with their labels.
        for batch in data.batches(7, Some(3)).unwrap() {
            let batch = batch.unwrap();
            let (x, y) = (
                batch.x.to_vec::<f32>().unwrap(),
                batch.y.to_vec::<i64>().unwrap(),
            );
            for (i, &label) in y.iter().enumerate() {
                assert_eq!(x[2 * i], 2.0 * label as f32);
            }
        }
    }

    #[test]
    fn mismatched_parts_are_errors() {
        let x = Tensor::from_vec([3, 2], vec![0.0f32; 6]).unwrap();
        let e = Dataset::new(x, Tensor::from_vec([2], vec![0i64, 1]).unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("[3]") && e.contains("[2]"), "{e}");
        let x = Tensor::from_vec([2], vec![0.0f32; 2]).unwrap();
        assert!(Dataset::new(x, Tensor::from_vec([2], vec![0i32; 2]).unwrap()).is_err());
        let x = Tensor::from_vec([2], vec![0.0f32; 2]).unwrap();
        let e = Dataset::new(x, Tensor::from_vec([3, 1], vec![0.0f32; 3]).unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("[2, ...]") && e.contains("[3, 1]"), "{e}");
    }

    #[test]
    fn float_targets_travel_with_their_examples() {
        let n = 9;
        let x = Tensor::from_vec([n, 1], (0..n).map(|i| i as f32).collect()).unwrap();
        let y = Tensor::from_vec(
            [n, 2],
            (0..n).flat_map(|i| [i as f32, -(i as f32)]).collect(),
        )
        .unwrap();
        let data = Dataset::new(x, y).unwrap();
        assert_eq!(data.len(), n);
        assert_eq!(data.labels().dims(), &[n, 2]);
        let mut seen = 0;
        for batch in data.batches(4, Some(5)).unwrap() {
            let batch = batch.unwrap();
            let b = batch.x.dims()[0];
            assert_eq!(batch.y.dims(), &[b, 2]);
            let (x, y) = (
                batch.x.to_vec::<f32>().unwrap(),
                batch.y.to_vec::<f32>().unwrap(),
            );
            for i in 0..b {
                assert_eq!(y[2 * i], x[i]);
                assert_eq!(y[2 * i + 1], -x[i]);
            }
            seen += b;
        }
        assert_eq!(seen, n);
    }
}
