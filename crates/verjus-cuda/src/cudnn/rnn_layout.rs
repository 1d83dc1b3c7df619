//! The host-side arithmetic of the cuDNN LSTM, apart from any GPU so that it
//! is tested everywhere: which cuDNN RNN an LSTM plan needs, where PyTorch's
//! gate blocks go in cuDNN's packed weight space, the sequence lengths as
//! cuDNN takes them, and how the verjus reserve holds cuDNN's state.
//!
//! **Weights.** cuDNN keeps an LSTM's parameters in one *weight space* whose
//! layout it reports per "linear layer" (`cudnnGetRNNWeightParams`): ids 0..4
//! are the input matrices of the gates i, f, g (cuDNN's "new memory" c~), o,
//! ids 4..8 the recurrent ones in the same order, and each id has a bias
//! (`b_ih` for 0..4, `b_hh` for 4..8 with `CUDNN_RNN_DOUBLE_BIAS`). That is
//! PyTorch's gate order, so gate `k` of an id is rows `k*H..(k+1)*H` of
//! `W_ih [4H, F]` / `W_hh [4H, H]` (elements `k*H*F..`, contiguous), and
//! each matrix is stored row-major `[H, cols]` like PyTorch's rows (as
//! `aten/src/ATen/native/cudnn/RNN.cpp` relies on when it copies them). The
//! copies are computed once per shape from what cuDNN reported, checked
//! against the expected sizes, and merged where both sides are contiguous
//! (cuDNN's usual layout packs the four gates of a tensor back to back, so an
//! LSTM usually packs with four copies).
//!
//! **Lengths.** cuDNN rejects a sequence of length 0 (`cudnnSetRNNDataDescriptor`
//! wants every length in `1..=T`), so such a sequence runs one frame inside
//! cuDNN and the op puts its state and gradients right afterwards (see
//! `ops/lstm.rs`).
//!
//! **Reserve.** The reserve tensor of a cuDNN call holds the packed weights
//! (the backward needs them too) and then cuDNN's reserve space, which starts
//! on a [`RESERVE_ALIGN`]-byte boundary.

use verjus_core::ops::LstmPlan;

/// Byte alignment of cuDNN's reserve space inside the verjus reserve (device
/// allocations are at least this aligned, so the region is too).
pub(crate) const RESERVE_ALIGN: usize = 256;

/// What identifies an LSTM's cuDNN descriptors and weight layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct LstmKey {
    /// Input features `F` (may be 0).
    pub input: usize,
    /// Hidden size `H` (positive).
    pub hidden: usize,
    /// Whether the LSTM has biases (`CUDNN_RNN_DOUBLE_BIAS`, else no bias).
    pub bias: bool,
    /// Whether TF32 is allowed (the descriptor's math type).
    pub tf32: bool,
}

impl LstmKey {
    pub fn new(plan: &LstmPlan, tf32: bool) -> Self {
        LstmKey {
            input: plan.input,
            hidden: plan.hidden,
            bias: plan.has_bias,
            tf32,
        }
    }

    /// The input size cuDNN is told: `F`, or 1 for `F = 0` (cuDNN wants a
    /// positive size; the op then feeds a zero input through a zero matrix).
    pub fn cudnn_input(&self) -> usize {
        self.input.max(1)
    }
}

/// A PyTorch-layout parameter of the LSTM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Param {
    WIh,
    WHh,
    BIh,
    BHh,
}

/// One contiguous copy between a parameter (elements `at..at + len`) and the
/// weight space (elements `packed..packed + len`), in f32 elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Block {
    pub param: Param,
    pub at: usize,
    pub packed: usize,
    pub len: usize,
}

/// Where cuDNN keeps one matrix or bias: its byte offset in the weight space
/// and the dims its descriptor reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Reported {
    pub offset: usize,
    pub dims: Vec<i32>,
}

/// What `cudnnGetRNNWeightParams` reported for one linear layer id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LinLayer {
    pub matrix: Reported,
    /// `None` for an LSTM without biases (not asked for).
    pub bias: Option<Reported>,
}

/// The number of cuDNN linear layers of an LSTM (4 gates, input and recurrent).
pub(crate) const LSTM_LIN_LAYERS: usize = 8;

/// The packed weight space of one LSTM shape: its size and the copies that
/// move `W_ih`, `W_hh`, `b_ih`, `b_hh` into it (and the gradients back out).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WeightLayout {
    /// The weight space's size in bytes.
    pub bytes: usize,
    /// Merged copies, ordered by parameter and position.
    pub blocks: Vec<Block>,
}

impl WeightLayout {
    /// The layout from cuDNN's report for linear layers `0..8` of the
    /// weight space of `bytes` bytes, or why the report is not the expected
    /// LSTM layout.
    pub fn new(key: &LstmKey, bytes: usize, reported: &[LinLayer]) -> Result<Self, String> {
        if reported.len() != LSTM_LIN_LAYERS {
            return Err(format!(
                "expected {LSTM_LIN_LAYERS} linear layers, got {}",
                reported.len()
            ));
        }
        let h = key.hidden;
        let mut blocks = Vec::with_capacity(2 * LSTM_LIN_LAYERS);
        for (id, layer) in reported.iter().enumerate() {
            let gate = id % 4;
            let (param, bias_param, cols, cudnn_cols) = if id < 4 {
                (Param::WIh, Param::BIh, key.input, key.cudnn_input())
            } else {
                (Param::WHh, Param::BHh, h, h)
            };
            let packed = locate(bytes, id, "matrix", &layer.matrix, [1, h, cudnn_cols])?;
            blocks.push(Block {
                param,
                at: gate * h * cols,
                packed,
                len: h * cols,
            });
            if key.bias {
                let bias = layer
                    .bias
                    .as_ref()
                    .ok_or_else(|| format!("linear layer {id}: no bias reported"))?;
                blocks.push(Block {
                    param: bias_param,
                    at: gate * h,
                    packed: locate(bytes, id, "bias", bias, [1, h, 1])?,
                    len: h,
                });
            }
        }
        Ok(WeightLayout {
            bytes,
            blocks: merge(blocks),
        })
    }

    /// Whether the copies fill the whole weight space (otherwise the rest,
    /// such as the zero input matrix of `F = 0`, is zeroed before packing).
    pub fn covers_all(&self) -> bool {
        self.blocks.iter().map(|b| b.len).sum::<usize>() * 4 == self.bytes
    }
}

/// The element offset of a matrix or bias that cuDNN reported, after checking
/// its size, alignment and extent. cuDNN documents the dims as `[1, rows,
/// cols]`; only their product is relied on (as PyTorch does): the storage
/// order is PyTorch's rows either way.
fn locate(
    bytes: usize,
    id: usize,
    what: &str,
    r: &Reported,
    expected: [usize; 3],
) -> Result<usize, String> {
    let len: usize = expected.iter().product();
    let reported = r.dims.iter().try_fold(1usize, |n, &d| {
        usize::try_from(d).ok().and_then(|d| n.checked_mul(d))
    });
    if r.dims.is_empty() || reported != Some(len) {
        return Err(format!(
            "linear layer {id}: the {what} has dims {:?}, expected {expected:?}",
            r.dims
        ));
    }
    if !r.offset.is_multiple_of(4) || r.offset + 4 * len > bytes {
        return Err(format!(
            "linear layer {id}: the {what} at byte {} ({len} floats) is not inside the \
             {bytes}-byte weight space on a float boundary",
            r.offset
        ));
    }
    Ok(r.offset / 4)
}

/// Drops empty copies, sorts the rest by parameter and position, and joins
/// neighbours that are contiguous on both sides.
fn merge(mut blocks: Vec<Block>) -> Vec<Block> {
    blocks.retain(|b| b.len > 0);
    blocks.sort_by_key(|b| (b.param, b.at));
    let mut out: Vec<Block> = Vec::with_capacity(blocks.len());
    for b in blocks {
        match out.last_mut() {
            Some(p)
                if p.param == b.param && p.at + p.len == b.at && p.packed + p.len == b.packed =>
            {
                p.len += b.len
            }
            _ => out.push(b),
        }
    }
    out
}

/// The sequence lengths of one call as cuDNN takes them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SeqLengths {
    /// `T`.
    pub steps: usize,
    /// One length per sequence, each in `1..=T` (a length 0 becomes 1).
    pub cudnn: Vec<i32>,
    /// How many sequences have length 0.
    pub empty: usize,
    /// Whether some sequence is shorter than `T` (its later frames are padding).
    pub padded: bool,
}

impl SeqLengths {
    /// From the validated host lengths (`None`: every sequence has `T` frames).
    pub fn new(given: Option<&[i32]>, steps: usize, batch: usize) -> Self {
        let full = i32::try_from(steps).unwrap_or(i32::MAX);
        match given {
            None => SeqLengths {
                steps,
                cudnn: vec![full; batch],
                empty: 0,
                padded: false,
            },
            Some(l) => SeqLengths {
                steps,
                cudnn: l.iter().map(|&v| v.max(1)).collect(),
                empty: l.iter().filter(|&&v| v == 0).count(),
                padded: l.iter().any(|&v| v < full),
            },
        }
    }

    /// The batch size `B`.
    pub fn batch(&self) -> usize {
        self.cudnn.len()
    }

    /// Whether no sequence runs a frame (`T = 0`, `B = 0` or every length 0):
    /// the op is then done without cuDNN.
    pub fn none_run(&self) -> bool {
        self.steps == 0 || self.batch() == self.empty
    }
}

/// Where the packed weights and cuDNN's reserve space lie in the verjus
/// reserve of a cuDNN call (bytes from its start).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReserveLayout {
    /// The packed weights, at byte 0.
    pub weight_bytes: usize,
    /// Where cuDNN's reserve space starts.
    pub cudnn_at: usize,
    /// Its size.
    pub cudnn_bytes: usize,
}

impl ReserveLayout {
    pub fn new(weight_bytes: usize, cudnn_bytes: usize) -> Self {
        ReserveLayout {
            weight_bytes,
            cudnn_at: weight_bytes.div_ceil(RESERVE_ALIGN) * RESERVE_ALIGN,
            cudnn_bytes,
        }
    }

    /// The f32 elements of the verjus reserve (bytes rounded up).
    pub fn f32_len(&self) -> usize {
        (self.cudnn_at + self.cudnn_bytes).div_ceil(4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(input: usize, hidden: usize, bias: bool) -> LstmKey {
        LstmKey {
            input,
            hidden,
            bias,
            tf32: false,
        }
    }

    /// The report of a weight space laid out as `order` says: one entry per
    /// (is_bias, linear layer id), placed back to back in that order.
    fn report(k: &LstmKey, order: &[(bool, usize)]) -> (usize, Vec<LinLayer>) {
        let h = k.hidden as i32;
        let f = k.cudnn_input() as i32;
        let mut at = 0usize;
        let mut layers: Vec<LinLayer> = (0..LSTM_LIN_LAYERS)
            .map(|_| LinLayer {
                matrix: Reported {
                    offset: 0,
                    dims: vec![],
                },
                bias: None,
            })
            .collect();
        for &(is_bias, id) in order {
            let cols = if is_bias {
                1
            } else if id < 4 {
                f
            } else {
                h
            };
            let r = Reported {
                offset: at,
                dims: vec![1, h, cols],
            };
            at += 4 * (h * cols) as usize;
            if is_bias {
                layers[id].bias = Some(r);
            } else {
                layers[id].matrix = r;
            }
        }
        (at, layers)
    }

    /// cuDNN's usual order: the 8 matrices, then the 8 biases.
    fn usual(k: &LstmKey) -> Vec<(bool, usize)> {
        let mut o: Vec<_> = (0..8).map(|id| (false, id)).collect();
        if k.bias {
            o.extend((0..8).map(|id| (true, id)));
        }
        o
    }

    /// Packs PyTorch-layout parameters on the host by the layout's copies.
    fn pack(layout: &WeightLayout, params: &[(Param, Vec<f32>)]) -> Vec<f32> {
        let mut space = vec![f32::NAN; layout.bytes / 4];
        for b in &layout.blocks {
            let src = &params.iter().find(|(p, _)| *p == b.param).unwrap().1;
            space[b.packed..b.packed + b.len].copy_from_slice(&src[b.at..b.at + b.len]);
        }
        space
    }

    /// Distinct values for every parameter element: `base + index`.
    fn params(k: &LstmKey) -> Vec<(Param, Vec<f32>)> {
        let (h, f) = (k.hidden, k.input);
        let seq = |base: f32, n: usize| (0..n).map(|i| base + i as f32).collect::<Vec<_>>();
        vec![
            (Param::WIh, seq(1000.0, 4 * h * f)),
            (Param::WHh, seq(2000.0, 4 * h * h)),
            (Param::BIh, seq(3000.0, 4 * h)),
            (Param::BHh, seq(4000.0, 4 * h)),
        ]
    }

    /// After packing, the region cuDNN reported for each linear layer holds
    /// the PyTorch gate rows it should: gate `id % 4` of `W_ih` (ids 0..4)
    /// or `W_hh` (4..8), and of `b_ih` / `b_hh`.
    fn assert_packs_gates(k: &LstmKey, order: &[(bool, usize)]) {
        let (bytes, rep) = report(k, order);
        let layout = WeightLayout::new(k, bytes, &rep).expect("a valid layout");
        let p = params(k);
        let space = pack(&layout, &p);
        let h = k.hidden;
        for (id, layer) in rep.iter().enumerate() {
            let gate = id % 4;
            let (w, b, cols) = if id < 4 {
                (&p[0].1, &p[2].1, k.input)
            } else {
                (&p[1].1, &p[3].1, h)
            };
            let m = layer.matrix.offset / 4;
            assert_eq!(
                &space[m..m + h * cols],
                &w[gate * h * cols..(gate + 1) * h * cols],
                "matrix of linear layer {id}"
            );
            if let Some(r) = &layer.bias {
                let o = r.offset / 4;
                assert_eq!(&space[o..o + h], &b[gate * h..(gate + 1) * h], "bias {id}");
            }
        }
        assert!(layout.covers_all());
        assert!(space.iter().all(|v| !v.is_nan()), "every weight is written");
    }

    #[test]
    fn the_usual_layout_packs_each_parameter_with_one_copy() {
        let k = key(3, 2, true);
        let (bytes, rep) = report(&k, &usual(&k));
        let layout = WeightLayout::new(&k, bytes, &rep).unwrap();
        let (h, f) = (2, 3);
        assert_eq!(
            layout.blocks,
            vec![
                Block {
                    param: Param::WIh,
                    at: 0,
                    packed: 0,
                    len: 4 * h * f
                },
                Block {
                    param: Param::WHh,
                    at: 0,
                    packed: 4 * h * f,
                    len: 4 * h * h
                },
                Block {
                    param: Param::BIh,
                    at: 0,
                    packed: 4 * h * f + 4 * h * h,
                    len: 4 * h
                },
                Block {
                    param: Param::BHh,
                    at: 0,
                    packed: 4 * h * f + 4 * h * h + 4 * h,
                    len: 4 * h
                },
            ]
        );
        assert_packs_gates(&k, &usual(&k));
    }

    #[test]
    fn any_reported_order_puts_each_gate_where_cudnn_says() {
        let k = key(3, 2, true);
        // Gates reversed, biases first, input and recurrent interleaved.
        let order: Vec<(bool, usize)> = [7, 3, 6, 2, 5, 1, 4, 0]
            .iter()
            .flat_map(|&id| [(true, id), (false, id)])
            .collect();
        assert_packs_gates(&k, &order);
        let (bytes, rep) = report(&k, &order);
        assert_eq!(WeightLayout::new(&k, bytes, &rep).unwrap().blocks.len(), 16);
    }

    #[test]
    fn without_biases_only_the_matrices_are_packed() {
        let k = key(4, 3, false);
        assert_packs_gates(&k, &usual(&k));
        let (bytes, rep) = report(&k, &usual(&k));
        let layout = WeightLayout::new(&k, bytes, &rep).unwrap();
        assert!(layout
            .blocks
            .iter()
            .all(|b| matches!(b.param, Param::WIh | Param::WHh)));
    }

    #[test]
    fn no_input_features_leaves_a_zeroed_input_matrix() {
        let k = key(0, 2, true);
        assert_eq!(k.cudnn_input(), 1);
        let (bytes, rep) = report(&k, &usual(&k));
        let layout = WeightLayout::new(&k, bytes, &rep).unwrap();
        assert!(layout.blocks.iter().all(|b| b.param != Param::WIh));
        assert!(!layout.covers_all(), "the [H, 1] input matrices are zeroed");
    }

    #[test]
    fn an_unexpected_report_is_an_error_naming_the_layer() {
        let k = key(3, 2, true);
        let (bytes, rep) = report(&k, &usual(&k));
        let mut wrong_dims = rep.clone();
        wrong_dims[5].matrix.dims = vec![1, 2, 3];
        let e = WeightLayout::new(&k, bytes, &wrong_dims).unwrap_err();
        assert!(
            e.contains("linear layer 5") && e.contains("[1, 2, 2]"),
            "{e}"
        );
        let mut absent = rep.clone();
        absent[0].matrix.dims = vec![];
        assert!(WeightLayout::new(&k, bytes, &absent)
            .unwrap_err()
            .contains("linear layer 0"));
        // The same size reported as [1, cols, rows] is the same block.
        let mut transposed = rep.clone();
        transposed[0].matrix.dims = vec![1, 3, 2];
        assert_eq!(
            WeightLayout::new(&k, bytes, &transposed),
            WeightLayout::new(&k, bytes, &rep)
        );
        let mut misaligned = rep.clone();
        misaligned[1].bias.as_mut().unwrap().offset += 2;
        let e = WeightLayout::new(&k, bytes, &misaligned).unwrap_err();
        assert!(e.contains("linear layer 1") && e.contains("bias"), "{e}");
        let e = WeightLayout::new(&k, bytes - 4, &rep).unwrap_err();
        assert!(e.contains("linear layer 7"), "{e}");
        let mut no_bias = rep.clone();
        no_bias[2].bias = None;
        assert!(WeightLayout::new(&k, bytes, &no_bias)
            .unwrap_err()
            .contains("linear layer 2"));
        assert!(WeightLayout::new(&k, bytes, &rep[..7]).is_err());
    }

    #[test]
    fn zero_lengths_run_one_frame_in_cudnn_and_are_counted() {
        let l = SeqLengths::new(Some(&[0, 3, 1, 4]), 4, 4);
        assert_eq!(l.cudnn, vec![1, 3, 1, 4]);
        assert_eq!((l.empty, l.padded, l.none_run()), (1, true, false));
        let full = SeqLengths::new(Some(&[4, 4]), 4, 2);
        assert_eq!((full.empty, full.padded), (0, false));
        let none = SeqLengths::new(None, 5, 3);
        assert_eq!(none.cudnn, vec![5, 5, 5]);
        assert!(!none.padded && !none.none_run());
        assert!(SeqLengths::new(Some(&[0, 0]), 3, 2).none_run());
        assert!(SeqLengths::new(None, 0, 3).none_run());
        assert!(SeqLengths::new(None, 3, 0).none_run());
    }

    #[test]
    fn the_reserve_space_starts_aligned_after_the_weights() {
        let r = ReserveLayout::new(1000, 4097);
        assert_eq!(r.cudnn_at, 1024);
        assert_eq!(r.f32_len(), (1024 + 4097usize).div_ceil(4));
        assert!(r.f32_len() * 4 >= r.cudnn_at + r.cudnn_bytes);
        let exact = ReserveLayout::new(512, 8);
        assert_eq!((exact.cudnn_at, exact.f32_len()), (512, 130));
    }
}
