//! An LSTM stepped cell by cell whose recurrent weight is dropped out at each
//! step: the model of "weight dropout on the recurrent weight" that the
//! checkpoint tests (gradients, memory) share.

use verjus_core::autograd::{checkpoint_scope, LstmVars, Var};
use verjus_core::Result;

/// The sum of every step's `h` over `steps` cell steps from a zero state.
/// `mode`: `None` uses `w_hh` as it is; `Some(scoped)` drops it out afresh at
/// each step (p 0.3, its own Philox offset), inside a checkpoint scope when
/// `scoped`.
pub fn dropout_lstm(
    x: &Var,
    w_ih: &Var,
    w_hh: &Var,
    mode: Option<bool>,
    steps: u64,
) -> Result<Var> {
    let (mut h, mut c): (Option<Var>, Option<Var>) = (None, None);
    let mut total: Option<Var> = None;
    for step in 0..steps {
        let w = match mode {
            None => w_hh.clone(),
            Some(scoped) => {
                let _scope = scoped.then(checkpoint_scope);
                w_hh.dropout(0.3, 2, 1000 * step)?
            }
        };
        let vars = LstmVars {
            x,
            lengths: None,
            h0: h.as_ref(),
            c0: c.as_ref(),
            w_ih,
            w_hh: &w,
            b_ih: None,
            b_hh: None,
        };
        let (h1, c1) = Var::lstm_cell(&vars)?;
        let s = h1.sum_all()?;
        total = Some(match total {
            Some(t) => t.add(&s)?,
            None => s,
        });
        (h, c) = (Some(h1), Some(c1));
    }
    Ok(total.expect("steps ran"))
}
