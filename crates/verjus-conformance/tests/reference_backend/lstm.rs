//! The reference LSTM behind the `Backend` methods of the reference backend.
//!
//! Its reserve is empty: the reference backward recomputes the forward. The
//! lengths are validated here, as a backend must (`ops::check_lengths`).

use verjus_conformance::array::Array;
use verjus_conformance::reference::lstm::{self as r, Lstm};
use verjus_core::ops::{check_lengths, LstmArgs, LstmGrads, LstmOutputGrads, LstmOutputs};
use verjus_core::{Result, Tensor};

/// The operands as host arrays.
struct Operands {
    x: Array,
    lengths: Option<Vec<i32>>,
    h0: Option<Array>,
    c0: Option<Array>,
    w_ih: Array,
    w_hh: Array,
    b_ih: Option<Array>,
    b_hh: Option<Array>,
}

fn array(t: &Tensor) -> Result<Array> {
    Ok(Array::new(t.dims().to_vec(), t.to_vec::<f32>()?))
}

fn store(t: &mut Tensor, a: &Array) -> Result<()> {
    t.as_mut_slice::<f32>()?.copy_from_slice(&a.data);
    Ok(())
}

impl Operands {
    /// The operands of `args`; `ignore_lengths` is the planted bug.
    fn new(op: &str, args: &LstmArgs<'_>, ignore_lengths: bool) -> Result<Operands> {
        let lengths = args.lengths.map(|l| l.to_vec::<i32>()).transpose()?;
        if let Some(l) = &lengths {
            check_lengths(op, l, args.x.dims()[0])?;
        }
        let opt = |t: Option<&Tensor>| t.map(array).transpose();
        Ok(Operands {
            x: array(args.x)?,
            lengths: lengths.filter(|_| !ignore_lengths),
            h0: opt(args.h0)?,
            c0: opt(args.c0)?,
            w_ih: array(args.w_ih)?,
            w_hh: array(args.w_hh)?,
            b_ih: opt(args.b_ih)?,
            b_hh: opt(args.b_hh)?,
        })
    }

    fn view(&self) -> Lstm<'_> {
        Lstm {
            x: &self.x,
            lengths: self.lengths.as_deref(),
            h0: self.h0.as_ref(),
            c0: self.c0.as_ref(),
            w_ih: &self.w_ih,
            w_hh: &self.w_hh,
            b_ih: self.b_ih.as_ref(),
            b_hh: self.b_hh.as_ref(),
        }
    }
}

/// `lstm_sequence`, or `lstm_cell` when `out.h_n` is `None`.
pub fn forward(
    op: &str,
    args: &LstmArgs<'_>,
    out: LstmOutputs<'_>,
    ignore_lengths: bool,
) -> Result<()> {
    let v = Operands::new(op, args, ignore_lengths)?;
    match out.h_n {
        Some(h_n) => {
            let o = r::lstm_sequence(&v.view());
            store(out.y, &o.y)?;
            store(h_n, &o.h_n)?;
            store(out.c_n, &o.c_n)
        }
        None => {
            let (h, c) = r::lstm_cell(&v.view());
            store(out.y, &h)?;
            store(out.c_n, &c)
        }
    }
}

/// The backward of a sequence (`cell` false) or of a step; `drop_dc` is the
/// planted bug (the final cell state's gradient is ignored).
pub fn backward(
    op: &str,
    args: &LstmArgs<'_>,
    dout: &LstmOutputGrads<'_>,
    grads: LstmGrads<'_>,
    cell: bool,
    drop_dc: bool,
) -> Result<()> {
    let v = Operands::new(op, args, false)?;
    let opt = |t: Option<&Tensor>| t.map(array).transpose();
    let (dy, dh_n) = (opt(dout.dy)?, opt(dout.dh_n)?);
    let dc_n = opt(dout.dc_n)?.filter(|_| !drop_dc);
    let g = if cell {
        r::lstm_cell_backward(&v.view(), dy.as_ref(), dc_n.as_ref())
    } else {
        r::lstm_sequence_backward(&v.view(), dy.as_ref(), dh_n.as_ref(), dc_n.as_ref())
    };
    let pairs = [
        (grads.dx, &g.dx),
        (grads.dh0, &g.dh0),
        (grads.dc0, &g.dc0),
        (grads.dw_ih, &g.dw_ih),
        (grads.dw_hh, &g.dw_hh),
        (grads.db_ih, &g.db_ih),
        (grads.db_hh, &g.db_hh),
    ];
    for (t, a) in pairs {
        if let Some(t) = t {
            store(t, a)?;
        }
    }
    Ok(())
}
