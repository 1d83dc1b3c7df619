//! The CUDA C of the elementwise ops, written from verjus-core's op table.
//!
//! `kernels/elementwise.cu` switches on an op's code (its position in the
//! table, `UnaryOp::code`) in four device functions; this module writes those
//! functions from the table's CUDA C formulas when the module is first
//! compiled, so the codes and formulas can never drift from the host's enum.
//! A reordered or added op changes the generated `switch` with it.

use std::fmt::Write;
use verjus_core::ops::{BinaryOp, UnaryOp};

/// Device helpers that the table's CUDA formulas call.
const HELPERS: &str = r#"
// The logistic function, stable for large |x| (verjus_core::ops::elementwise::sigmoid).
__device__ __forceinline__ float vj_sigmoid(float x) {
    if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}
"#;

/// `unary_apply`, `unary_derivative`, `binary_apply` and `binary_partials`:
/// one `case` per op of the table. An unknown code gives NaN.
pub(crate) fn device_functions() -> String {
    let mut src = String::from("// ---- generated from verjus_core's elementwise op table ----\n");
    src.push_str(HELPERS);
    let unary = |body: fn(UnaryOp) -> String| {
        cases(UnaryOp::EXAMPLES, |op| (op.code(), op.name(), body(op)))
    };
    let binary = |body: fn(BinaryOp) -> String| {
        cases(BinaryOp::EXAMPLES, |op| (op.code(), op.name(), body(op)))
    };
    let _ = write!(
        src,
        "
__device__ __forceinline__ float unary_apply(int op, float x, float s) {{
    switch (op) {{
{}        default: return __int_as_float(0x7fc00000);
    }}
}}

__device__ __forceinline__ float unary_derivative(int op, float x, float y, float s) {{
    switch (op) {{
{}        default: return __int_as_float(0x7fc00000);
    }}
}}

__device__ __forceinline__ float binary_apply(int op, float a, float b) {{
    switch (op) {{
{}        default: return __int_as_float(0x7fc00000);
    }}
}}

__device__ __forceinline__ void binary_partials(int op, float a, float b, float* da, float* db) {{
    switch (op) {{
{}        default: *da = __int_as_float(0x7fc00000); *db = *da; return;
    }}
}}
",
        unary(|op| format!("return {};", op.cuda_apply())),
        unary(|op| format!("return {};", op.cuda_derivative())),
        binary(|op| format!("return {};", op.cuda_apply())),
        binary(|op| {
            let (da, db) = op.cuda_partials();
            format!("*da = {da}; *db = {db}; return;")
        }),
    );
    src
}

/// One `case CODE: BODY  // NAME` line per op.
fn cases<T: Copy>(ops: &[T], case: impl Fn(T) -> (i32, &'static str, String)) -> String {
    ops.iter()
        .map(|&op| {
            let (code, name, body) = case(op);
            format!("        case {code}: {body}  // {name}\n")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::device_functions;
    use verjus_core::ops::{BinaryOp, UnaryOp};

    /// Every op of the table has its own case, with its own formula, under
    /// the code the host sends (a CPU-side check; NVRTC compiles the result
    /// in `every_kernel_module_compiles_with_nvrtc`).
    #[test]
    fn every_op_of_the_table_has_its_case() {
        let src = device_functions();
        for &op in UnaryOp::EXAMPLES {
            for formula in [op.cuda_apply(), op.cuda_derivative()] {
                let case = format!("case {}: return {formula};  // {}", op.code(), op.name());
                assert!(src.contains(&case), "missing `{case}` in\n{src}");
            }
        }
        for &op in BinaryOp::EXAMPLES {
            let case = format!(
                "case {}: return {};  // {}",
                op.code(),
                op.cuda_apply(),
                op.name()
            );
            assert!(src.contains(&case), "missing `{case}` in\n{src}");
            let (da, db) = op.cuda_partials();
            let case = format!("case {}: *da = {da}; *db = {db}; return;", op.code());
            assert!(src.contains(&case), "missing `{case}` in\n{src}");
        }
    }

    /// Codes are the positions in the table: distinct and dense, so a `switch`
    /// has no gap and no op shadows another.
    #[test]
    fn codes_are_the_table_positions() {
        for (i, op) in UnaryOp::EXAMPLES.iter().enumerate() {
            assert_eq!(op.code(), i as i32, "{op:?}");
        }
        for (i, op) in BinaryOp::EXAMPLES.iter().enumerate() {
            assert_eq!(op.code(), i as i32, "{op:?}");
        }
    }
}
