//! `cast` between float types (float32, bfloat16, float16) with the gradient
//! kept.
//!
//! Gradients on the tape are float32 whatever the value's dtype (the master
//! copy mixed precision keeps), so the backward of a float cast hands `dy` on
//! as it is: no rounding of gradients to the value's precision, and nothing
//! saved. Casts to or from integers are constants (no gradient).

use super::node::BackwardFn;
use super::record::Saves;
use super::var::Var;
use crate::{ops, DType, Error, Result};
use std::sync::Arc;

impl Var {
    /// `self` converted to the float type `to` (round to nearest even into
    /// bfloat16 and float16); the gradient flows back unchanged.
    pub fn cast_float(&self, to: DType) -> Result<Var> {
        let from = self.dtype();
        if !from.is_float() || !to.is_float() {
            return Err(Error::invalid(
                "cast_float",
                format!("casts between float types, got {from} to {to}"),
            ));
        }
        Var::record(
            "cast",
            self.backend(),
            &[self],
            Saves::NOTHING,
            move |be, xs| {
                let x = &xs[0];
                let mut y = ops::output(be, x.shape(), to)?;
                ops::cast(be, x, &mut y)?;
                let backward: BackwardFn = Box::new(|_, dy, _, _| Ok(vec![Some(dy)]));
                Ok((Arc::new(y), backward))
            },
        )
    }
}
