//! The macros that turn the op table (`table.rs`) into code.
//!
//! From one entry per op they generate the op enum, its name, code, cost and
//! domain, its kernel type (a struct implementing
//! [`UnaryKernel`](super::UnaryKernel) / [`BinaryKernel`](super::BinaryKernel)),
//! the scalar `apply`/`derivative`/`partials` used as the reference, the
//! `specialise` dispatch that backends' loops go through, and the CUDA C
//! formulas from which the CUDA backend writes its kernels' `switch`. An op's
//! code is its position in the table; nothing else names it by number.

/// The field type of an op's scalar parameter (`Scale(f32)`): a macro so that
/// the generated enum can repeat it over the optional `(s = example)`.
macro_rules! scalar_field {
    ($param:ident) => {
        f32
    };
}

/// Expands to the first block if there is one, else to the second: an
/// optional `fast` formula that falls back to the reference.
macro_rules! first_or {
    ([$first:block] $default:block) => {
        $first
    };
    ([] $default:block) => {
        $default
    };
}

/// Declares the unary ops; see `table.rs` for the fields.
macro_rules! unary_ops {
    ($(
        $(#[doc = $doc:literal])*
        $variant:ident $(($param:ident = $example:literal))? {
            name: $name:literal,
            domain: $domain:ident,
            cost: $cost:literal,
            gradient: $grad:ident,
            apply: |$ax:ident| $apply:expr,
            $(fast: |$fx:ident| $fast:expr,)?
            derivative: |$dx:ident, $dy:ident| $deriv:expr,
            $(fast_derivative: |$fdx:ident, $fdy:ident| $fderiv:expr,)?
            cuda: $cuda:literal,
            cuda_derivative: $cuda_d:literal $(,)?
        }
    ),* $(,)?) => {
        /// An elementwise function of one tensor (declared in the op table,
        /// `ops/elementwise/table.rs`).
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub enum UnaryOp {
            $($(#[doc = $doc])* $variant $((scalar_field!($param)))?,)*
        }

        /// The kernel type of each unary op (see [`UnaryKernel`]).
        pub mod unary_kernels {
            use super::*;
            $(
                $(#[doc = $doc])*
                #[derive(Clone, Copy, Debug)]
                pub struct $variant $((pub scalar_field!($param)))?;

                impl UnaryKernel for $variant {
                    #[inline(always)]
                    fn apply(self, x: f32) -> f32 {
                        let $variant $(($param))? = self;
                        let $ax = x;
                        $apply
                    }

                    #[inline(always)]
                    fn apply_fast(self, x: f32) -> f32 {
                        let $variant $(($param))? = self;
                        first_or!([$({ let $fx = x; $fast })?] { let $ax = x; $apply })
                    }

                    // A derivative need not use the op's scalar (`AddScalar`'s is 1).
                    #[allow(unused_variables)]
                    #[inline(always)]
                    fn derivative(self, x: f32, y: f32) -> f32 {
                        let $variant $(($param))? = self;
                        let ($dx, $dy) = (x, y);
                        $deriv
                    }

                    #[allow(unused_variables)] // as in `derivative`
                    #[inline(always)]
                    fn derivative_fast(self, x: f32, y: f32) -> f32 {
                        let $variant $(($param))? = self;
                        first_or!(
                            [$({ let ($fdx, $fdy) = (x, y); $fderiv })?]
                            { let ($dx, $dy) = (x, y); $deriv }
                        )
                    }
                }
            )*
        }

        /// The positions of the ops in the table: their codes.
        #[derive(Clone, Copy)]
        enum UnaryCode {
            $($variant,)*
        }

        impl UnaryOp {
            /// One instance of every op, in table order, with the table's
            /// example scalar for the parametrised ones.
            pub const EXAMPLES: &'static [UnaryOp] = &[$(UnaryOp::$variant $(($example))?,)*];

            /// The op's name for messages.
            pub fn name(self) -> &'static str {
                match self {
                    $(UnaryOp::$variant { .. } => $name,)*
                }
            }

            /// The op's position in the table, which generated device code
            /// switches on.
            pub fn code(self) -> i32 {
                match self {
                    $(UnaryOp::$variant { .. } => UnaryCode::$variant as i32,)*
                }
            }

            /// The op's scalar (0 for ops without one).
            pub fn scalar(self) -> f32 {
                match self {
                    $(UnaryOp::$variant $(($param))? => { 0.0 $(+ $param)? })*
                }
            }

            /// Relative cost of one element (a plain arithmetic op is 1), for
            /// parallel thresholds.
            pub fn cost(self) -> usize {
                match self {
                    $(UnaryOp::$variant { .. } => $cost,)*
                }
            }

            /// The form of the op's gradient: what its backward reads.
            pub fn gradient_form(self) -> UnaryGrad {
                match self {
                    $(UnaryOp::$variant { .. } => UnaryGrad::$grad,)*
                }
            }

            /// Where the op is defined and smooth.
            pub fn domain(self) -> UnaryDomain {
                match self {
                    $(UnaryOp::$variant { .. } => UnaryDomain::$domain,)*
                }
            }

            /// `y = f(x)`, the reference definition.
            #[inline]
            pub fn apply(self, x: f32) -> f32 {
                match self {
                    $(UnaryOp::$variant $(($param))? => {
                        unary_kernels::$variant $(($param))?.apply(x)
                    })*
                }
            }

            /// `dy/dx` at `x`, given also `y = f(x)` (cheaper for exp, sigmoid, tanh).
            #[inline]
            pub fn derivative(self, x: f32, y: f32) -> f32 {
                match self {
                    $(UnaryOp::$variant $(($param))? => {
                        unary_kernels::$variant $(($param))?.derivative(x, y)
                    })*
                }
            }

            /// Runs `visitor` with the op's kernel type, so that its loop is
            /// compiled once per op with the formula inlined.
            #[inline]
            pub fn specialise<V: UnaryVisitor>(self, visitor: V) -> V::Output {
                match self {
                    $(UnaryOp::$variant $(($param))? => {
                        visitor.visit(unary_kernels::$variant $(($param))?)
                    })*
                }
            }

            /// The CUDA C expression of `f(x)`, over `float x` and the scalar `s`.
            pub fn cuda_apply(self) -> &'static str {
                match self {
                    $(UnaryOp::$variant { .. } => $cuda,)*
                }
            }

            /// The CUDA C expression of `dy/dx`, over `float x, y, s`.
            pub fn cuda_derivative(self) -> &'static str {
                match self {
                    $(UnaryOp::$variant { .. } => $cuda_d,)*
                }
            }
        }
    };
}

/// Declares the binary ops; see `table.rs` for the fields.
macro_rules! binary_ops {
    ($(
        $(#[doc = $doc:literal])*
        $variant:ident {
            name: $name:literal,
            domain: $domain:ident,
            cost: $cost:literal,
            differentiable: $diff:literal,
            apply: |$aa:ident, $ab:ident| $apply:expr,
            partials: |$pa:ident, $pb:ident| $partials:expr,
            cuda: $cuda:literal,
            cuda_partials: ($cuda_da:literal, $cuda_db:literal) $(,)?
        }
    ),* $(,)?) => {
        /// An elementwise function of two broadcast tensors (declared in the
        /// op table, `ops/elementwise/table.rs`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum BinaryOp {
            $($(#[doc = $doc])* $variant,)*
        }

        /// The kernel type of each binary op (see [`BinaryKernel`]).
        pub mod binary_kernels {
            use super::*;
            $(
                $(#[doc = $doc])*
                #[derive(Clone, Copy, Debug)]
                pub struct $variant;

                impl BinaryKernel for $variant {
                    #[inline(always)]
                    fn apply(self, a: f32, b: f32) -> f32 {
                        let ($aa, $ab) = (a, b);
                        $apply
                    }

                    #[inline(always)]
                    fn partials(self, a: f32, b: f32) -> (f32, f32) {
                        let ($pa, $pb) = (a, b);
                        $partials
                    }
                }
            )*
        }

        impl BinaryOp {
            /// Every op, in table order.
            pub const EXAMPLES: &'static [BinaryOp] = &[$(BinaryOp::$variant,)*];

            /// The op's name for messages.
            pub fn name(self) -> &'static str {
                match self {
                    $(BinaryOp::$variant => $name,)*
                }
            }

            /// The op's position in the table, which generated device code
            /// switches on.
            pub fn code(self) -> i32 {
                self as i32
            }

            /// Relative cost of one element (see [`UnaryOp::cost`]).
            pub fn cost(self) -> usize {
                match self {
                    $(BinaryOp::$variant => $cost,)*
                }
            }

            /// Where the op is defined and smooth.
            pub fn domain(self) -> BinaryDomain {
                match self {
                    $(BinaryOp::$variant => BinaryDomain::$domain,)*
                }
            }

            /// Whether the op has a gradient (comparisons do not).
            pub fn is_differentiable(self) -> bool {
                match self {
                    $(BinaryOp::$variant => $diff,)*
                }
            }

            /// `c = a op b`.
            #[inline]
            pub fn apply(self, a: f32, b: f32) -> f32 {
                match self {
                    $(BinaryOp::$variant => binary_kernels::$variant.apply(a, b),)*
                }
            }

            /// `(dc/da, dc/db)` at `(a, b)`.
            #[inline]
            pub fn partials(self, a: f32, b: f32) -> (f32, f32) {
                match self {
                    $(BinaryOp::$variant => binary_kernels::$variant.partials(a, b),)*
                }
            }

            /// Runs `visitor` with the op's kernel type (see [`UnaryOp::specialise`]).
            #[inline]
            pub fn specialise<V: BinaryVisitor>(self, visitor: V) -> V::Output {
                match self {
                    $(BinaryOp::$variant => visitor.visit(binary_kernels::$variant),)*
                }
            }

            /// The CUDA C expression of `a op b`, over `float a, b`.
            pub fn cuda_apply(self) -> &'static str {
                match self {
                    $(BinaryOp::$variant => $cuda,)*
                }
            }

            /// The CUDA C expressions of `(dc/da, dc/db)`, over `float a, b`.
            pub fn cuda_partials(self) -> (&'static str, &'static str) {
                match self {
                    $(BinaryOp::$variant => ($cuda_da, $cuda_db),)*
                }
            }
        }
    };
}
