//! The reference depthwise convolution behind the `Backend` methods of the
//! reference backend; `flip` is the planted bug: the filter reversed (a true
//! convolution where every framework computes a cross-correlation).

use verjus_conformance::array::Array;
use verjus_conformance::reference::depthwise::{self as r, Window};
use verjus_core::ops::{DepthwiseArgs, DepthwiseGrads};
use verjus_core::{Result, Tensor};

fn array(t: &Tensor) -> Result<Array> {
    Ok(Array::new(t.dims().to_vec(), t.to_vec::<f32>()?))
}

fn window(args: &DepthwiseArgs<'_>) -> Window {
    Window {
        left: args.padding[0],
        right: args.padding[1],
        dilation: args.dilation,
    }
}

/// The filter, its taps reversed when `flip`.
fn filter(args: &DepthwiseArgs<'_>, flip: bool) -> Result<Array> {
    let mut f = array(args.filter)?;
    if flip {
        let k = f.dims[1].max(1);
        f.data.chunks_exact_mut(k).for_each(<[f32]>::reverse);
    }
    Ok(f)
}

pub fn forward(args: &DepthwiseArgs<'_>, y: &mut Tensor, flip: bool) -> Result<()> {
    let bias = args.bias.map(array).transpose()?;
    let out = r::depthwise(
        &array(args.x)?,
        &filter(args, flip)?,
        bias.as_ref(),
        window(args),
    );
    y.as_mut_slice::<f32>()?.copy_from_slice(&out.data);
    Ok(())
}

pub fn backward(
    args: &DepthwiseArgs<'_>,
    dy: &Tensor,
    grads: DepthwiseGrads<'_>,
    flip: bool,
) -> Result<()> {
    let (dx, df, db) = r::depthwise_backward(
        &array(args.x)?,
        &filter(args, flip)?,
        &array(dy)?,
        window(args),
    );
    for (g, a) in [
        (grads.dx, dx.data),
        (grads.dfilter, df.data),
        (grads.dbias, db),
    ] {
        if let Some(g) = g {
            g.as_mut_slice::<f32>()?.copy_from_slice(&a);
        }
    }
    Ok(())
}
