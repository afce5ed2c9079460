//! Golden tests: the exact C++ emitted for each construct of the subset.

use parloop_kernels::{translate, translate_const, FnKind, Scalar};

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
            "o[1] = __pl_fmax(__pl_fmin((*x), 1.0), (-1.0));",
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
    assert_eq!(
        b,
        [
            "(*o) = __pl_imax<int>(__pl_imin<int>(__pl_iabs((*a)), 7), (-2));",
            "(*p) = __pl_imax<unsigned long long>((*b), 3ull);"
        ]
    );
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
            // Counted in 64-bit unsigned: spans past i32::MAX count right.
            // (The last iteration's number: a full-width inclusive range's
            // count would not fit.)
            "const bool pl_done4 = pl_hi1 <= pl_lo0 || 3ull == 0ull;",
            "const unsigned long long pl_n2 = pl_done4 ? 0ull : (((unsigned long long)(pl_hi1) - (unsigned long long)(pl_lo0)) - 1ull) / 3ull;",
            "for (unsigned long long pl_k3 = 0, pl_done4_k = pl_done4; !pl_done4_k; pl_done4_k = (pl_k3 == pl_n2), ++pl_k3) {",
            "const int i = (int)(((unsigned long long)(pl_hi1) - 1ull) - pl_k3 * 3ull);",
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
            // usize subtraction wraps as in Rust's release builds (and the
            // bounds check catches it), never goes negative in an `int`.
            "o[i] = (w[i] * c[PL_IX(((unsigned long long)(1) - (unsigned long long)(i)), 2)]);",
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

#[test]
fn nested_local_arrays_rows_and_helpers() {
    let b = body(syn::parse_quote! {
        fn k(x: &[[f64; 2]; 3], o: &mut [[f64; 3]; 2]) {
            let mut k = [[0.0f64; 3]; 3];
            k[1][2] += x[2][1];
            let row = k[1];
            fill(&mut k[2]);
            outer(&k, &row, o);
            let g = [[-1.0, -1.0], [1.0, 0.0], [0.0, 1.0]];
            o[0][0] = g[2][1] + row[2];
        }
    });
    assert_eq!(
        b,
        [
            "double k[3][3] = {{0.0, 0.0, 0.0}, {0.0, 0.0, 0.0}, {0.0, 0.0, 0.0}};",
            "k[1][2] += x[2][1];",
            "double row[3];",
            "for (int pl_k0 = 0; pl_k0 < 3; ++pl_k0) row[pl_k0] = k[1][pl_k0];",
            "pl_fn_fill(k[2]);",
            "pl_fn_outer(k, row, o);",
            "double g[3][2] = {{(-1.0), (-1.0)}, {1.0, 0.0}, {0.0, 1.0}};",
            "o[0][0] = (g[2][1] + row[2]);",
        ]
    );
}

#[test]
fn array_literals_as_values_and_whole_array_assignments() {
    let b = body(syn::parse_quote! {
        fn k(x: &[f64; 2], o: &mut [f64; 2]) {
            o[0] = dot(&[x[0], 2.0], x);
            o[1] = [1.0, 2.0, 3.0][o[0] as usize % 3];
            let mut z = [[x[0]; 2], [2.0; 2]];
            z = [[z[1][0], 3.0], [4.0, z[0][1]]];
            *o = z[1];
        }
    });
    assert_eq!(
        b,
        [
            // An argument: a temporary, passed as a pointer.
            "double pl_a0[2] = {x[0], 2.0};",
            "o[0] = pl_fn_dot(pl_a0, x);",
            "double pl_a1[3] = {1.0, 2.0, 3.0};",
            "o[1] = pl_a1[PL_IX((__pl_f2i<unsigned long long>(o[0], 0ull, 18446744073709551615ull) % 3), 3)];",
            // A repeated value that is not a literal is evaluated once.
            "double z[2][2];",
            "const double pl_v3 = x[0];",
            "for (int pl_k2 = 0; pl_k2 < 2; ++pl_k2) z[0][pl_k2] = pl_v3;",
            "for (int pl_k4 = 0; pl_k4 < 2; ++pl_k4) z[1][pl_k4] = 2.0;",
            // The literal reads the array it replaces: built first.
            "double pl_a5[2][2] = {{z[1][0], 3.0}, {4.0, z[0][1]}};",
            "for (int pl_k6 = 0; pl_k6 < 2; ++pl_k6) for (int pl_k7 = 0; pl_k7 < 2; ++pl_k7) z[pl_k6][pl_k7] = pl_a5[pl_k6][pl_k7];",
            "for (int pl_k8 = 0; pl_k8 < 2; ++pl_k8) o[pl_k8] = z[1][pl_k8];",
        ]
    );
}

#[test]
fn local_const_tables_and_large_repeats() {
    let b = body(syn::parse_quote! {
        fn k(x: &f64, o: &mut f64) {
            const W: [f64; 3] = [1.0 / 6.0; 3];
            const G: [[f32; 2]; 2] = [[-1.0, 1.0], [0.5; 2]];
            let big = [[*x * 2.0; 40]; 3];
            *o = W[1] + G[1][0] as f64 + big[2][39];
        }
    });
    assert_eq!(
        b,
        [
            "const double W[3] = {(1.0 / 6.0), (1.0 / 6.0), (1.0 / 6.0)};",
            "const float G[2][2] = {{(-1.0f), 1.0f}, {0.5f, 0.5f}};",
            "double big[3][40];",
            "double pl_a1[40];",
            "const double pl_v3 = ((*x) * 2.0);",
            "for (int pl_k2 = 0; pl_k2 < 40; ++pl_k2) pl_a1[pl_k2] = pl_v3;",
            "for (int pl_k0 = 0; pl_k0 < 3; ++pl_k0) for (int pl_k4 = 0; pl_k4 < 40; ++pl_k4) big[pl_k0][pl_k4] = pl_a1[pl_k4];",
            "(*o) = ((W[1] + ((double)(G[1][0]))) + big[2][39]);",
        ]
    );
}

#[test]
fn module_level_constants_are_read_by_their_c_names() {
    let f: syn::ItemFn = syn::parse_quote! {
        fn k(i: &u32, o: &mut f64) {
            let j = *i as usize;
            let w: f64 = NG[1][j][2] * GM1;
            let row: [f64; 4] = NG[0][1];
            *o = w + TABLE[j] + row[3];
        }
    };
    let t = translate(&f, FnKind::Kernel).unwrap();
    let lines: Vec<&str> = t.source.lines().map(str::trim).collect();
    assert_eq!(
        lines[2..6],
        [
            // Lengths the kernel cannot see: `sizeof`, without the indices.
            "double w = (pl_c_NG[1][PL_IX(j, sizeof(pl_c_NG[0]) / sizeof(pl_c_NG[0][0]))][2] * pl_c_GM1);",
            "double row[4];",
            "for (int pl_k0 = 0; pl_k0 < 4; ++pl_k0) row[pl_k0] = pl_c_NG[0][1][pl_k0];",
            "(*o) = ((w + pl_c_TABLE[PL_IX(j, sizeof(pl_c_TABLE) / sizeof(pl_c_TABLE[0]))]) + row[3]);",
        ]
    );
    let uses: Vec<(&str, Option<Scalar>, usize)> = t.consts.iter().map(|c| (c.name.as_str(), c.elem, c.rank)).collect();
    assert_eq!(uses, [("NG", Some(Scalar::F64), 3), ("GM1", Some(Scalar::F64), 0), ("TABLE", Some(Scalar::F64), 1)]);
}

#[test]
fn module_level_constants_become_constexpr_definitions() {
    let def = |c: syn::ItemConst| translate_const(&c).map(|t| t.source).unwrap_or_else(|e| format!("error: {e}"));
    assert_eq!(
        def(syn::parse_quote! { const GM1: f64 = GAM - 1.0; }),
        "__device__ constexpr double pl_c_GM1 = (pl_c_GAM - 1.0);\n"
    );
    // Integer arithmetic stays plain: Rust rejects overflow in constants.
    assert_eq!(
        def(syn::parse_quote! { const N: i32 = -(2 * M) + 7 / 2; }),
        "__device__ constexpr int pl_c_N = ((-(2 * pl_c_M)) + (7 / 2));\n"
    );
    assert_eq!(
        def(syn::parse_quote! { const W: [[f32; 2]; 3] = [[0.5; 2], [1.0, -1.0], [2.0 * HALF; 2]]; }),
        "__device__ constexpr float pl_c_W[3][2] = {{0.5f, 0.5f}, {1.0f, (-1.0f)}, {(2.0f * pl_c_HALF), (2.0f * pl_c_HALF)}};\n"
    );
    assert_eq!(
        def(syn::parse_quote! { const P: [usize; 3] = [2, 0, 1]; }),
        "__device__ constexpr unsigned long long pl_c_P[3] = {2, 0, 1};\n"
    );
    for (c, err) in [
        (syn::parse_quote! { const B: f64 = GAM.sqrt(); }, "method calls are not supported in module-level constants"),
        (syn::parse_quote! { const B: [f64; 2] = OTHER; }, "a module-level constant array is written as a literal"),
        (syn::parse_quote! { const B: i32 = (X * 2.0) as i32; }, "float-to-integer casts are not supported"),
    ] {
        let c: syn::ItemConst = c;
        assert!(def(c).starts_with(&format!("error: {err}")), "{err}");
    }
}

#[test]
fn helpers_fill_arrays_and_nested_arrays() {
    let f: syn::ItemFn = syn::parse_quote! {
        fn basis(xi: f64, out: &mut [f64; 3], m: &mut [[f64; 3]; 2]) {
            out[0] = 1.0 - xi;
            m[1] = *out;
        }
    };
    let t = translate(&f, FnKind::Device).unwrap();
    assert_eq!(
        t.source,
        "__device__ inline void pl_fn_basis(double xi, double* __restrict__ out, double (* __restrict__ m)[3]) {\n    \
         out[0] = (1.0 - xi);\n    \
         for (int pl_k0 = 0; pl_k0 < 3; ++pl_k0) m[1][pl_k0] = out[pl_k0];\n}\n"
    );
}

#[test]
fn match_becomes_an_if_chain_over_one_evaluation() {
    let b = body(syn::parse_quote! {
        fn k(n: &i32, y: &mut f64) {
            match *n {
                0 => *y = 1.0,
                1 | 2 => *y = 2.0,
                -9..=-1 => *y = 3.0,
                _ => {}
            }
        }
    });
    assert_eq!(
        b,
        [
            "{",
            "const int pl_m0 = (*n);",
            "(void)pl_m0;",
            "if ((pl_m0 == 0)) {",
            "(*y) = 1.0;",
            "} else if (((pl_m0 == 1) || (pl_m0 == 2))) {",
            "(*y) = 2.0;",
            "} else if ((pl_m0 >= (-9) && pl_m0 <= (-1))) {",
            "(*y) = 3.0;",
            "} else {",
            "}",
            "}",
        ]
    );
}

#[test]
fn match_with_guards_tests_each_pattern_before_its_guard() {
    let b = body(syn::parse_quote! {
        fn k(n: &u32, y: &mut f64) {
            *y = match *n {
                v if v > 9 => 1.0,
                _ => 2.0,
            };
        }
    });
    assert_eq!(
        b,
        [
            "double pl_v0;",
            "{",
            "const unsigned int pl_m1 = (*n);",
            "(void)pl_m1;",
            "unsigned int v = pl_m1;",
            "(void)v;",
            "bool pl_taken2 = false;",
            "if (!pl_taken2 && true) {",
            "if ((v > 9u)) {",
            "pl_taken2 = true;",
            "pl_v0 = 1.0;",
            "}",
            "}",
            "if (!pl_taken2 && true) {",
            "pl_taken2 = true;",
            "pl_v0 = 2.0;",
            "}",
            "}",
            "(*y) = pl_v0;",
        ]
    );
}

#[test]
fn float_constants_are_their_bits() {
    let b = body(syn::parse_quote! {
        fn k(y: &mut f64, z: &mut f32) {
            *y = f64::INFINITY + f64::NAN;
            *z = f32::NEG_INFINITY;
        }
    });
    assert_eq!(
        b,
        [
            "(*y) = (__builtin_bit_cast(double, 0x7ff0000000000000ull) + __builtin_bit_cast(double, 0x7ff8000000000000ull));",
            "(*z) = __builtin_bit_cast(float, 0xff800000u);",
        ]
    );
}

#[test]
fn helpers_take_arrays_by_value_as_copies() {
    let f: syn::ItemFn = syn::parse_quote! {
        fn dot3(a: [f64; 3], mut b: [[f32; 2]; 1]) -> f64 { b[0][0] += 1.0; a[0] * b[0][0] as f64 }
    };
    let t = translate(&f, FnKind::Device).unwrap();
    assert_eq!(
        t.source,
        "__device__ inline double pl_fn_dot3(__pl_arr<double[3]> pl_in_a, __pl_arr<float[1][2]> pl_in_b) {\n    \
         double (&a)[3] = pl_in_a.v;\n    \
         float (&b)[1][2] = pl_in_b.v;\n    \
         b[0][0] += 1.0f;\n    \
         return (a[0] * ((double)(b[0][0])));\n}\n"
    );
    assert!(t.params[0].array && !t.params[0].by_ref);
    // The caller copies each array argument where Rust evaluates it.
    let b = body(syn::parse_quote! {
        fn k(x: &[f64; 3], o: &mut f64) { *o = dot3(*x, [1.0, 0.0, *o]); }
    });
    assert_eq!(
        b,
        [
            "__pl_arr<double[3]> pl_a0;",
            "for (int pl_k1 = 0; pl_k1 < 3; ++pl_k1) pl_a0.v[pl_k1] = x[pl_k1];",
            "const auto pl_o3 = pl_a0;",
            "__pl_arr<double[3]> pl_a2;",
            "pl_a2.v[0] = 1.0;",
            "pl_a2.v[1] = 0.0;",
            "pl_a2.v[2] = (*o);",
            "(*o) = pl_fn_dot3(pl_o3, pl_a2);",
        ]
    );
}

#[test]
fn iterator_reductions_are_loops_from_rusts_start() {
    let b = body(syn::parse_quote! {
        fn k(a: &[f32; 2], n: &[i64; 2], o: &mut f32, m: &mut i64) {
            *o = a.iter().sum::<f32>();
            *m = n.iter().map(|v| v * 2).product();
        }
    });
    assert_eq!(
        b,
        [
            "float pl_v0;",
            "{",
            "float pl_u___pl_acc0 = (-0.0f);",
            "{",
            "const auto* pl_u___pl_it1 = a;",
            "for (int pl_u___pl_ix0 = 0, pl_end1 = 2; pl_u___pl_ix0 < pl_end1; ++pl_u___pl_ix0) {",
            "const auto* pl_u___pl_x1 = (&pl_u___pl_it1[pl_u___pl_ix0]);",
            "pl_u___pl_acc0 += (*pl_u___pl_x1);",
            "}",
            "}",
            "pl_v0 = pl_u___pl_acc0;",
            "}",
            "(*o) = pl_v0;",
            "long long pl_v2;",
            "{",
            "long long pl_u___pl_acc2 = 1ll;",
            "{",
            "const auto* pl_u___pl_it3 = n;",
            "for (int pl_u___pl_ix2 = 0, pl_end3 = 2; pl_u___pl_ix2 < pl_end3; ++pl_u___pl_ix2) {",
            "const auto* v = (&pl_u___pl_it3[pl_u___pl_ix2]);",
            "pl_u___pl_acc2 = __pl_wmul(pl_u___pl_acc2, __pl_wmul((*v), 2ll));",
            "}",
            "}",
            "pl_v2 = pl_u___pl_acc2;",
            "}",
            "(*m) = pl_v2;",
        ]
    );
    // `any` stops at the first element that decides it.
    let b = body(syn::parse_quote! {
        fn k(a: &[f64; 2], o: &mut f64) { if a.iter().any(|&v| v.is_nan()) { *o = 0.0; } }
    });
    assert!(b.contains(&"bool pl_u___pl_c1 = __pl_is_nan(v);".to_string()), "{b:?}");
    assert!(b.contains(&"pl_u___pl_acc0 = true;".to_string()) && b.contains(&"break;".to_string()), "{b:?}");
}

#[test]
fn tuple_fields_conversions_cmp_and_wrapping() {
    let b = body(syn::parse_quote! {
        fn k(a: &f64, n: &i32, u: &u32, o: &mut f64, m: &mut i64) {
            let t = (*a, a.sin_cos().1);
            *o = t.0 + t.1 + f64::from(*u);
            *m = i64::from(std::cmp::max(3, *n).wrapping_mul(*n)) + i64::from(u.wrapping_sub(1));
        }
    });
    assert_eq!(
        b,
        [
            "double pl_u___pl_tup0;",
            "double pl_u___pl_tup1;",
            "{",
            "pl_u___pl_tup0 = (*a);",
            "pl_u___pl_tup1 = cos((*a));",
            "}",
            "double pl_u___pl_f0 = pl_u___pl_tup0;",
            "double pl_u___pl_f1 = pl_u___pl_tup1;",
            "(*o) = ((pl_u___pl_f0 + pl_u___pl_f1) + ((double)((*u))));",
            "(*m) = __pl_wadd(((long long)(__pl_wmul(__pl_imax<int>((*n), 3), (*n)))), ((long long)(((unsigned int)((*u)) - (unsigned int)(1u)))));",
        ]
    );
}

#[test]
fn by_value_copies_in_an_if_value_run_in_their_branch() {
    // `m[*n as usize]` is evaluated only when `*n < 2`: its copy is made
    // in that branch, not hoisted ahead of a ternary.
    let b = body(syn::parse_quote! {
        fn k(m: &[[f64; 3]; 2], n: &u64, o: &mut f64) {
            *o = 1.0 + if *n < 2 { first(m[*n as usize]) } else { 0.0 };
        }
    });
    assert_eq!(
        b,
        [
            "double pl_v2;",
            "if (((*n) < 2ull)) {",
            "__pl_arr<double[3]> pl_a0;",
            "for (int pl_k1 = 0; pl_k1 < 3; ++pl_k1) pl_a0.v[pl_k1] = m[PL_IX(((unsigned long long)((*n))), 2)][pl_k1];",
            "pl_v2 = pl_fn_first(pl_a0);",
            "} else {",
            "pl_v2 = 0.0;",
            "}",
            "(*o) = (1.0 + pl_v2);",
        ]
    );
}

/// A reference chosen by an `if` cannot be dereferenced (the translator
/// binds reference locals to places): the message said "only references
/// (kernel parameters) can be dereferenced", though `let r = &a[1];` is a
/// reference it accepts; it now says which ones and what to write.
#[test]
fn a_reference_chosen_by_an_if_is_refused_with_what_to_write() {
    let f: syn::ItemFn = syn::parse_quote! {
        fn k(a: &[f64; 2], o: &mut f64) {
            let r = if a[0] > a[1] { &a[0] } else { &a[1] };
            *o = *r;
        }
    };
    let err = translate(&f, FnKind::Kernel).unwrap_err().to_string();
    assert!(err.contains("`let r = &a[i];`") && err.contains("let v = if c { a[0] } else { a[1] };"), "{err}");
}
