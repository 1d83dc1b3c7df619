//! What building a network learned about each layer, for users and tools.
//!
//! A [`Descriptor`] is the static half of a layer (after Juice's new layer
//! architecture): its path, its resolved inputs and their shapes, its output
//! shape and its learnable parameters. Shapes are *unit* shapes: one example,
//! without the batch axis, which only a [`crate::Context`] knows.

/// How a parameter's initial value is drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Init {
    /// Uniform on `[-bound, bound)` (PyTorch's default for Linear and Conv2d
    /// weights and biases, with `bound = 1 / sqrt(fan_in)`).
    Uniform { bound: f32 },
}

/// A learnable parameter of a layer.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamDesc {
    /// The parameter's name: the owning layer's path and the role, e.g. `fc1.weight`.
    /// A layer that shares parameters lists the owner's names.
    pub name: String,
    /// The parameter's shape (PyTorch's layout).
    pub shape: Vec<usize>,
    pub init: Init,
    /// Index into [`crate::Network::parameters`].
    pub index: usize,
}

/// One leaf layer of a built network.
#[derive(Clone, Debug, PartialEq)]
pub struct Descriptor {
    /// Dotted path of the layer (`block1.conv`).
    pub path: String,
    /// The layer type (`"Linear"`, `"Conv2d"`, ...).
    pub kind: &'static str,
    /// The resolved inputs: network input names or layer paths.
    pub inputs: Vec<String>,
    /// Unit shape of each input.
    pub input_shapes: Vec<Vec<usize>>,
    /// Unit shape of the output.
    pub output_shape: Vec<usize>,
    /// Learnable parameters (empty for parameter-free layers).
    pub params: Vec<ParamDesc>,
    /// The path of the layer whose parameters this one uses, if it shares.
    pub shares: Option<String>,
    /// Whether some network output depends on this layer (layers that feed no
    /// output are never computed and their parameter gradients stay zero).
    pub live: bool,
    /// Whether the output has a time axis (`[batch, time] + output_shape`):
    /// a layer's output is a sequence when one of its inputs is, except after
    /// a time reduction.
    pub sequence: bool,
}
