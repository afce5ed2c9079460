//! Golden tests: the exact C++ emitted for each construct of the subset.

use parloop_kernels::{translate, FnKind};

/// Translates a kernel and returns its body lines, trimmed.
fn body(f: syn::ItemFn) -> Vec<String> {
    let t = translate(&f, FnKind::Kernel).unwrap_or_else(|e| panic!("{e}"));
    let lines: Vec<&str> = t.source.lines().collect();
    lines[1..lines.len() - 1].iter().map(|l| l.trim().to_string()).collect()
}

fn header(f: syn::ItemFn, kind: FnKind) -> String {
    translate(&f, kind).unwrap().source.lines().next().unwrap().to_string()
}

#[test]
fn parameters_become_restrict_pointers() {
    let h = header(
        syn::parse_quote! { fn k(a: &f64, b: &mut [f32; 3], c: &[[i32; 2]; 4], d: &mut [[u64; 3]; 2], e: &i64, f: &u32) {} },
        FnKind::Kernel,
    );
    assert_eq!(
        h,
        "__device__ inline void pl_fn_k(const double* __restrict__ a, float* __restrict__ b, \
         const int (* __restrict__ c)[2], unsigned long long (* __restrict__ d)[3], \
         const long long* __restrict__ e, const unsigned int* __restrict__ f) {"
    );
}

#[test]
fn helpers_take_values_and_return() {
    let h = header(syn::parse_quote! { fn h(a: f64, b: &[f32; 2]) -> f32 { b[0] } }, FnKind::Device);
    assert_eq!(h, "__device__ inline float pl_fn_h(double a, const float* __restrict__ b) {");
}

#[test]
fn lets_get_explicit_types_and_f32_literals_stay_f32() {
    let b = body(syn::parse_quote! {
        fn k(x: &f32, y: &mut f64) {
            let a = *x * 2.0;
            let mut n = 3;
            let m: u64 = 7;
            let z: f64 = 1.5e-3;
            n += 1;
            *y = a as f64 + z + m as f64 + n as f64;
        }
    });
    assert_eq!(
        b,
        [
            "float a = ((*x) * 2.0f);",
            "int n = 3;",
            "unsigned long long m = 7ull;",
            "double z = 1.5e-3;",
            "n = __pl_wadd(n, 1);",
            "(*y) = (((((double)(a)) + z) + ((double)(m))) + ((double)(n)));",
        ]
    );
}

#[test]
fn literals_take_their_context_type() {
    let b = body(syn::parse_quote! {
        fn k(a: &u32, b: &i64, c: &mut [u64; 3]) {
            c[0] = (*a + 1) as u64;
            c[1] = (*b * 2) as u64;
            c[2] = 5;
        }
    });
    assert_eq!(
        b,
        [
            "c[0] = ((unsigned long long)(((*a) + 1u)));",
            "c[1] = ((unsigned long long)(__pl_wmul((*b), 2ll)));",
            "c[2] = 5ull;",
        ]
    );
}

#[test]
fn signed_arithmetic_wraps_and_division_is_checked() {
    let b = body(syn::parse_quote! {
        fn k(a: &i32, b: &i32, o: &mut [i32; 5]) {
            o[0] = *a + *b;
            o[1] = *a - *b;
            o[2] = *a * *b;
            o[3] = *a / *b;
            o[4] = -*a % *b;
        }
    });
    assert_eq!(
        b,
        [
            "o[0] = __pl_wadd((*a), (*b));",
            "o[1] = __pl_wsub((*a), (*b));",
            "o[2] = __pl_wmul((*a), (*b));",
            "o[3] = __pl_div<int>((*a), (*b));",
            "o[4] = __pl_rem<int>(__pl_wneg((*a)), (*b));",
        ]
    );
}

#[test]
fn shifts_mask_their_amount_and_bitwise_ops_are_plain() {
    let b = body(syn::parse_quote! {
        fn k(a: &u32, b: &i64, o: &mut [u32; 2], p: &mut i64) {
            o[0] = (*a << 3) | (*a & 5);
            o[1] = !*a ^ 1;
            *p >>= 2;
        }
    });
    assert_eq!(
        b,
        [
            "o[0] = (__pl_shl((unsigned int)((*a)), (unsigned int)(3)) | ((*a) & 5u));",
            "o[1] = ((~(*a)) ^ 1u);",
            "(*p) = __pl_shr((long long)((*p)), (unsigned int)(2));",
        ]
    );
}

#[test]
fn float_to_int_casts_saturate() {
    let b = body(syn::parse_quote! {
        fn k(x: &f64, a: &mut i32, b: &mut u64, c: &mut f32) {
            *a = *x as i32;
            *b = *x as u64;
            *c = *x as f32;
        }
    });
    assert_eq!(
        b,
        [
            "(*a) = __pl_f2i<int>((*x), (-2147483647 - 1), 2147483647);",
            "(*b) = __pl_f2i<unsigned long long>((*x), 0ull, 18446744073709551615ull);",
            "(*c) = ((float)((*x)));",
        ]
    );
}

#[test]
fn float_methods_map_to_c_math_by_precision() {
    let b = body(syn::parse_quote! {
        fn k(x: &f64, y: &f32, o: &mut [f64; 4], p: &mut [f32; 3]) {
            o[0] = x.sqrt() + x.abs().ln();
            o[1] = x.min(1.0).max(-1.0);
            o[2] = x.mul_add(2.0, 3.0) + x.powi(3) + x.powf(0.5);
            o[3] = x.atan2(1.0).signum();
            p[0] = y.sqrt() + y.exp();
            p[1] = y.hypot(2.0).round();
            p[2] = y.floor() - y.ceil();
        }
    });
    assert_eq!(
        b,
        [
            "o[0] = (sqrt((*x)) + log(fabs((*x))));",
            "o[1] = fmax(fmin((*x), 1.0), (-1.0));",
            "o[2] = ((fma((*x), 2.0, 3.0) + __pl_powi((*x), 3)) + pow((*x), 0.5));",
            "o[3] = __pl_signum(atan2((*x), 1.0));",
            "p[0] = (sqrtf((*y)) + expf((*y)));",
            "p[1] = roundf(hypotf((*y), 2.0f));",
            "p[2] = (floorf((*y)) - ceilf((*y)));",
        ]
    );
}

#[test]
fn integer_methods_use_rust_semantics() {
    let b = body(syn::parse_quote! {
        fn k(a: &i32, b: &u64, o: &mut i32, p: &mut u64) {
            *o = a.abs().min(7).max(-2);
            *p = (*b).max(3);
        }
    });
    assert_eq!(b, ["(*o) = __pl_imax(__pl_imin(__pl_iabs((*a)), 7), (-2));", "(*p) = __pl_imax((*b), 3ull);"]);
}

#[test]
fn if_else_statements_and_chains() {
    let b = body(syn::parse_quote! {
        fn k(a: &f64, o: &mut f64) {
            if *a > 1.0 {
                *o = 1.0;
            } else if *a < 0.0 {
                *o = 0.0;
            } else {
                *o = *a;
            }
        }
    });
    assert_eq!(
        b,
        [
            "if (((*a) > 1.0)) {",
            "(*o) = 1.0;",
            "} else if (((*a) < 0.0)) {",
            "(*o) = 0.0;",
            "} else {",
            "(*o) = (*a);",
            "}"
        ]
    );
}

#[test]
fn simple_if_expressions_become_ternaries() {
    let b = body(syn::parse_quote! {
        fn k(a: &f64, o: &mut f64) {
            *o = if *a > 0.0 { *a } else { -*a };
        }
    });
    assert_eq!(b, ["(*o) = (((*a) > 0.0) ? (*a) : (-(*a)));"]);
}

#[test]
fn if_expressions_with_statements_use_a_temporary() {
    let b = body(syn::parse_quote! {
        fn k(a: &f64, o: &mut f64) {
            let v = if *a > 0.0 { let s = a.sqrt(); s + 1.0 } else { 0.0 };
            *o = v;
        }
    });
    assert_eq!(
        b,
        [
            "double pl_v0;",
            "if (((*a) > 0.0)) {",
            "double s = sqrt((*a));",
            "pl_v0 = (s + 1.0);",
            "} else {",
            "pl_v0 = 0.0;",
            "}",
            "double v = pl_v0;",
            "(*o) = v;"
        ]
    );
}

#[test]
fn block_expressions_use_a_scoped_temporary() {
    let b = body(syn::parse_quote! {
        fn k(a: &f64, o: &mut f64) {
            *o = { let t = *a * 2.0; t * t };
        }
    });
    assert_eq!(b, ["double pl_v0;", "{", "double t = ((*a) * 2.0);", "pl_v0 = (t * t);", "}", "(*o) = pl_v0;"]);
}

#[test]
fn for_loops_over_ranges() {
    let b = body(syn::parse_quote! {
        fn k(x: &[f64; 4], o: &mut f64) {
            for i in 0..4 { *o += x[i]; }
            for j in 1..=3 { *o -= x[j]; }
        }
    });
    assert_eq!(
        b,
        ["for (int i = 0; i < 4; ++i) {", "(*o) += x[i];", "}", "for (int j = 1; j <= 3; ++j) {", "(*o) -= x[j];", "}"]
    );
}

#[test]
fn reversed_and_stepped_loops_count_iterations() {
    let b = body(syn::parse_quote! {
        fn k(x: &[f64; 8], o: &mut f64) {
            for i in (0..8).rev().step_by(3) { *o += x[i]; }
        }
    });
    assert_eq!(
        b,
        [
            "const int pl_lo0 = 0;",
            "const int pl_hi1 = 8;",
            "const unsigned long long pl_n2 = (pl_hi1 <= pl_lo0) ? 0ull : ((unsigned long long)((pl_hi1 - pl_lo0)) + (3) - 1) / (3);",
            "for (unsigned long long pl_k3 = 0; pl_k3 < pl_n2; ++pl_k3) {",
            "const int i = (int)((pl_hi1 - 1) - (int)(pl_k3 * (3)));",
            "(*o) += x[i];",
            "}",
        ]
    );
}

#[test]
fn while_loop_break_continue_return() {
    let b = body(syn::parse_quote! {
        fn k(a: &f64, o: &mut f64) {
            let mut v = *a;
            while v > 1.0 { v *= 0.5; if v < 2.0 { continue; } }
            loop { v += 1.0; if v > 3.0 { break; } }
            if v > 10.0 { return; }
            *o = v;
        }
    });
    assert_eq!(
        b,
        [
            "double v = (*a);",
            "while ((v > 1.0)) {",
            "v *= 0.5;",
            "if ((v < 2.0)) {",
            "continue;",
            "}",
            "}",
            "while (true) {",
            "v += 1.0;",
            "if ((v > 3.0)) {",
            "break;",
            "}",
            "}",
            "if ((v > 10.0)) {",
            "return;",
            "}",
            "(*o) = v;",
        ]
    );
}

#[test]
fn shadowed_names_and_consts() {
    let b = body(syn::parse_quote! {
        fn k(a: &f64, o: &mut f64) {
            const HALF: f64 = 0.5;
            let r = *a * HALF;
            let r = r + std::f64::consts::PI;
            *o = r * f64::EPSILON;
        }
    });
    assert_eq!(
        b,
        [
            "const double HALF = 0.5;",
            "double r = ((*a) * HALF);",
            "double r_1 = (r + 3.141592653589793e0);",
            "(*o) = (r_1 * 2.220446049250313e-16);",
        ]
    );
}

#[test]
fn local_arrays_and_copies() {
    let b = body(syn::parse_quote! {
        fn k(x: &[f64; 2], o: &mut [f64; 2]) {
            let w = [0.5, 0.25];
            let c = *x;
            for i in 0..2 { o[i] = w[i] * c[1 - i]; }
        }
    });
    assert_eq!(
        b,
        [
            "double w[2] = {0.5, 0.25};",
            "double c[2];",
            "for (int pl_k0 = 0; pl_k0 < 2; ++pl_k0) c[pl_k0] = x[pl_k0];",
            "for (int i = 0; i < 2; ++i) {",
            "o[i] = (w[i] * c[PL_IX((1 - i), 2)]);",
            "}",
        ]
    );
}

#[test]
fn helper_calls_are_recorded_and_emitted() {
    let f: syn::ItemFn = syn::parse_quote! {
        fn k(a: &[f64; 2], o: &mut f64) {
            let n: f64 = norm(a);
            *o = n + sq(a[0]);
        }
    };
    let t = translate(&f, FnKind::Kernel).unwrap();
    assert_eq!(t.calls, ["norm", "sq"]);
    assert!(t.source.contains("double n = pl_fn_norm(a);"), "{}", t.source);
    assert!(t.source.contains("(*o) = (n + pl_fn_sq(a[0]));"), "{}", t.source);
}

#[test]
fn cpp_keywords_are_renamed() {
    let b = body(syn::parse_quote! {
        fn k(int: &f64, o: &mut f64) {
            let double = *int * 2.0;
            *o = double;
        }
    });
    assert_eq!(b, ["double double_ = ((*int_) * 2.0);", "(*o) = double_;"]);
}
