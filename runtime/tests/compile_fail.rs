//! Kernels outside the subset are compile errors at the offending span,
//! naming the construct and what is supported (`tests/compile_fail/*.stderr`
//! hold the expected messages; `TRYBUILD=overwrite` regenerates them).

#[test]
fn unsupported_kernels_are_compile_errors_with_clear_messages() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/compile_fail/*.rs");
}
