//! Choosing a convolution algorithm once per shape and direction.
//!
//! The first call of a shape in a direction runs cuDNN's timed search on the
//! real buffers (`raw::find`) and keeps the fastest algorithm that succeeded
//! with an allowed math type; later calls reuse it from [`AlgoCache`]. The
//! choice is made here, apart from the raw calls, so that it can be tested
//! without a GPU.

use super::desc::ConvKey;
use cudarc::cudnn::sys as dnn;
use std::collections::HashMap;

/// The three computations on one convolution `y = x * w`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Direction {
    /// `y` from `x` and `w`.
    Forward,
    /// `dx` from `dy` and `w`.
    BackwardData,
    /// `dw` from `x` and `dy`.
    BackwardFilter,
}

impl Direction {
    /// The verjus op (what errors name).
    pub fn op(self) -> &'static str {
        match self {
            Direction::Forward => "conv2d",
            Direction::BackwardData => "conv2d_backward_data",
            Direction::BackwardFilter => "conv2d_backward_filter",
        }
    }
}

/// An algorithm of one direction (cuDNN has one enum per direction).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Algo {
    Forward(dnn::cudnnConvolutionFwdAlgo_t),
    BackwardData(dnn::cudnnConvolutionBwdDataAlgo_t),
    BackwardFilter(dnn::cudnnConvolutionBwdFilterAlgo_t),
}

/// One result of an algorithm search.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Found {
    ok: bool,
    math: dnn::cudnnMathType_t,
    algo: Algo,
    bytes: usize,
}

impl Found {
    pub fn new(
        status: dnn::cudnnStatus_t,
        math: dnn::cudnnMathType_t,
        algo: Algo,
        bytes: usize,
    ) -> Self {
        Found {
            ok: status == dnn::cudnnStatus_t::CUDNN_STATUS_SUCCESS,
            math,
            algo,
            bytes,
        }
    }
}

/// What runs a convolution of one shape in one direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Choice {
    pub algo: Algo,
    /// Set on the convolution descriptor before each run.
    pub math: dnn::cudnnMathType_t,
    /// Workspace bytes the algorithm needs.
    pub bytes: usize,
}

/// The first (cuDNN sorts by time: the fastest) result that succeeded with an
/// allowed math type.
pub(super) fn choose(found: &[Found], tf32: bool) -> Option<Choice> {
    found
        .iter()
        .find(|f| f.ok && math_ok(f.math, tf32))
        .map(|f| Choice {
            algo: f.algo,
            math: f.math,
            bytes: f.bytes,
        })
}

/// Without TF32, only algorithms that keep full fp32 math.
fn math_ok(math: dnn::cudnnMathType_t, tf32: bool) -> bool {
    tf32 || matches!(
        math,
        dnn::cudnnMathType_t::CUDNN_FMA_MATH | dnn::cudnnMathType_t::CUDNN_DEFAULT_MATH
    )
}

/// The algorithm chosen for each direction of each convolution.
#[derive(Debug, Default)]
pub(super) struct AlgoCache(HashMap<(Direction, ConvKey), Choice>);

impl AlgoCache {
    pub fn get(&self, dir: Direction, key: &ConvKey) -> Option<Choice> {
        self.0.get(&(dir, *key)).copied()
    }

    pub fn insert(&mut self, dir: Direction, key: ConvKey, choice: Choice) {
        self.0.insert((dir, key), choice);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dnn::cudnnConvolutionFwdAlgo_t as Fwd;
    use dnn::cudnnMathType_t as Math;
    use dnn::cudnnStatus_t as Status;

    fn found(status: Status, math: Math, algo: Fwd, bytes: usize) -> Found {
        Found::new(status, math, Algo::Forward(algo), bytes)
    }

    fn choice(math: Math, algo: Fwd, bytes: usize) -> Choice {
        Choice {
            algo: Algo::Forward(algo),
            math,
            bytes,
        }
    }

    #[test]
    fn the_fastest_result_that_succeeded_is_chosen() {
        let ok = Status::CUDNN_STATUS_SUCCESS;
        let results = [
            found(
                Status::CUDNN_STATUS_NOT_SUPPORTED,
                Math::CUDNN_FMA_MATH,
                Fwd::CUDNN_CONVOLUTION_FWD_ALGO_FFT,
                0,
            ),
            found(
                ok,
                Math::CUDNN_FMA_MATH,
                Fwd::CUDNN_CONVOLUTION_FWD_ALGO_GEMM,
                64,
            ),
            found(
                ok,
                Math::CUDNN_DEFAULT_MATH,
                Fwd::CUDNN_CONVOLUTION_FWD_ALGO_DIRECT,
                0,
            ),
        ];
        assert_eq!(
            choose(&results, false),
            Some(choice(
                Math::CUDNN_FMA_MATH,
                Fwd::CUDNN_CONVOLUTION_FWD_ALGO_GEMM,
                64
            ))
        );
    }

    #[test]
    fn tensor_core_math_is_chosen_only_with_tf32() {
        let ok = Status::CUDNN_STATUS_SUCCESS;
        let tensor_op = found(
            ok,
            Math::CUDNN_TENSOR_OP_MATH,
            Fwd::CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
            128,
        );
        let fp32 = found(
            ok,
            Math::CUDNN_DEFAULT_MATH,
            Fwd::CUDNN_CONVOLUTION_FWD_ALGO_GEMM,
            32,
        );
        assert_eq!(
            choose(&[tensor_op, fp32], false),
            Some(choice(
                Math::CUDNN_DEFAULT_MATH,
                Fwd::CUDNN_CONVOLUTION_FWD_ALGO_GEMM,
                32
            ))
        );
        assert_eq!(
            choose(&[tensor_op, fp32], true),
            Some(choice(
                Math::CUDNN_TENSOR_OP_MATH,
                Fwd::CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                128
            ))
        );
        let conversion = found(
            ok,
            Math::CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION,
            Fwd::CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD,
            0,
        );
        assert_eq!(choose(&[conversion], false), None);
    }

    #[test]
    fn no_result_that_works_chooses_nothing() {
        assert_eq!(choose(&[], true), None);
        let failed = found(
            Status::CUDNN_STATUS_ALLOC_FAILED,
            Math::CUDNN_FMA_MATH,
            Fwd::CUDNN_CONVOLUTION_FWD_ALGO_GEMM,
            1 << 40,
        );
        assert_eq!(choose(&[failed], true), None);
    }

    #[test]
    fn each_direction_of_a_convolution_has_its_own_entry() {
        let (a, b) = ([1; 14], [2; 14]);
        let fwd = choice(
            Math::CUDNN_FMA_MATH,
            Fwd::CUDNN_CONVOLUTION_FWD_ALGO_GEMM,
            8,
        );
        let data = Choice {
            algo: Algo::BackwardData(
                dnn::cudnnConvolutionBwdDataAlgo_t::CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
            ),
            math: Math::CUDNN_DEFAULT_MATH,
            bytes: 16,
        };
        let mut cache = AlgoCache::default();
        cache.insert(Direction::Forward, a, fwd);
        cache.insert(Direction::BackwardData, a, data);
        assert_eq!(cache.get(Direction::Forward, &a), Some(fwd));
        assert_eq!(cache.get(Direction::BackwardData, &a), Some(data));
        assert_eq!(cache.get(Direction::BackwardFilter, &a), None);
        assert_eq!(cache.get(Direction::Forward, &b), None);
    }
}
