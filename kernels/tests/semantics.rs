//! What the translator records about a body and the Rust semantics it
//! keeps: increment-only parameters (for INC), checked integer division,
//! index checks, constant indices out of range, reserved names, frame
//! sizes.

use parloop_kernels::{fn_cname, translate, FnKind, Translation};

fn kernel(f: syn::ItemFn) -> Translation {
    translate(&f, FnKind::Kernel).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn increment_only_parameters_are_recorded() {
    let t = kernel(syn::parse_quote! {
        fn k(x: &[f64; 2], a: &mut f64, b: &mut [f64; 2], c: &mut [[f64; 2]; 2], d: &mut f64, e: &mut f64,
             f: &mut [f64; 2], g: &mut f64, h: &mut f64, i: &mut i32) {
            *a += x[0];
            for j in 0..2 {
                b[j] -= x[j];
                c[j][1 - j] += 2.0 * x[j];
            }
            *d = x[0];
            *e *= 2.0;
            f[0] += f[1];
            *g += *g;
            let h = 3.0;
            *i += h as i32;
        }
    });
    let names: Vec<&str> = t.params.iter().map(|p| p.name.as_str()).collect();
    let only: Vec<(&str, bool)> = names.into_iter().zip(t.increment_only.iter().copied()).collect();
    assert_eq!(
        only,
        [
            ("x", true),
            ("a", true),
            ("b", true),
            ("c", true),
            ("d", false), // assigned
            ("e", false), // scaled
            ("f", false), // read
            ("g", false), // read in its own increment
            ("h", true),  // shadowed before any use: never touched
            ("i", true),
        ]
    );
}

#[test]
fn reference_locals_and_array_loops_count_as_their_parameter() {
    let t = kernel(syn::parse_quote! {
        fn k(x: &[f64; 2], a: &mut [f64; 2], b: &mut [f64; 2], c: &mut f64, d: &mut [f64; 2], e: &mut f64) {
            // Only increments through the references: still increment-only.
            for (v, w) in a.iter_mut().zip(x) {
                *v += w;
            }
            let r = &mut *c;
            *r -= x[0];
            // Assigned, or read, through a reference: not.
            for v in b.iter_mut() {
                *v = 1.0;
            }
            let s = &mut d[1];
            *s += *s;
            let q = e;
            *q *= 2.0;
        }
    });
    assert_eq!(t.increment_only, [true, true, false, true, false, false]);
}

#[test]
fn helpers_given_a_parameter_as_mut_decide_whether_it_is_increment_only() {
    let t = kernel(syn::parse_quote! {
        fn k(a: &mut [f64; 2], b: &mut f64, c: &mut [f64; 3], d: &mut f64) {
            bump(a);
            *b += 1.0;
            bump_one(&mut c[1], 2.0);
            bump_one(&mut c[2], 3.0);
            let v = peek(d);
            *b += v;
        }
    });
    // `d` passed as it is to `peek` counts as passed too: `peek`'s table
    // says whether it only adds (a `&` parameter never does).
    assert_eq!(t.increment_only, [true, true, true, true]);
    let via = |h: &str, k: usize| (h.to_string(), k);
    assert_eq!(t.increment_via, [vec![via("bump", 0)], vec![], vec![via("bump_one", 0)], vec![via("peek", 0)]]);
    // Read as well as passed: not increment-only whatever the helper does.
    let t = kernel(syn::parse_quote! {
        fn k(a: &mut [f64; 2]) {
            bump(a);
            a[0] = 1.0;
        }
    });
    assert_eq!(t.increment_only, [false]);
}

#[test]
fn integer_division_is_checked_unless_the_divisor_is_a_positive_literal() {
    let t = kernel(syn::parse_quote! {
        fn k(a: &i32, b: &u64, n: &mut [i64; 4], o: &mut [i32; 4], f: &mut f64) {
            o[0] = *a / 4;
            o[1] = *a % 3;
            o[2] = *a / -1;
            o[3] = 7 % *a;
            n[0] = (*b / *b) as i64;
            n[1] /= n[2];
            *f = *f / 0.0;
        }
    });
    assert!(t.may_panic);
    for line in [
        "o[0] = ((*a) / 4);",
        "o[1] = ((*a) % 3);",
        "o[2] = __pl_div<int>((*a), (-1));",
        "o[3] = __pl_rem<int>(7, (*a));",
        "n[0] = ((long long)(__pl_div<unsigned long long>((*b), (*b))));",
        "n[1] = __pl_div<long long>(n[1], n[2]);",
        "(*f) = ((*f) / 0.0);",
    ] {
        assert!(t.source.contains(line), "{line}\n{}", t.source);
    }
    let plain = kernel(syn::parse_quote! {
        fn k(a: &i32, o: &mut i32) { *o = *a / 2 + *a % 5; }
    });
    assert!(!plain.may_panic, "{}", plain.source);
}

#[test]
fn dynamic_indices_go_through_pl_ix_and_bounded_loop_indices_do_not() {
    let t = kernel(syn::parse_quote! {
        fn k(i: &u32, x: &[[f64; 3]; 2], o: &mut [f64; 4]) {
            let j = *i as usize;
            for r in 0..2 {
                o[r] += x[r][j];
            }
            for r in 0..=3 {
                o[r] += 1.0;
            }
            for r in 0..5 {
                o[r] += 1.0;
            }
            for r in 0..2 {
                let mut s = r;
                s += 1;
                o[s] += 1.0;
            }
            o[3] = x[1][2];
        }
    });
    for line in [
        "o[r] += x[r][PL_IX(j, 3)];",
        "o[r_1] += 1.0;",
        "o[PL_IX(r_2, 4)] += 1.0;",
        "o[PL_IX(s, 4)] += 1.0;",
        "o[3] = x[1][2];",
    ] {
        assert!(t.source.contains(line), "{line}\n{}", t.source);
    }
}

#[test]
fn a_constant_index_out_of_range_is_a_compile_error() {
    for f in [
        syn::parse_quote! { fn k(x: &[f64; 4], o: &mut f64) { *o = x[7]; } },
        syn::parse_quote! { fn k(x: &[[f64; 2]; 3], o: &mut f64) { *o = x[1][2]; } },
        syn::parse_quote! { fn k(o: &mut f64) { let a = [1.0, 2.0]; *o = a[(2)]; } },
        syn::parse_quote! { fn k(o: &mut [f64; 4]) { o[4] += 1.0; } },
    ] {
        let f: syn::ItemFn = f;
        let err = translate(&f, FnKind::Kernel).unwrap_err().to_string();
        assert!(err.starts_with("index out of bounds: the length is "), "{err}");
    }
    let err = translate(&syn::parse_quote! { fn k(x: &[f64; 4], o: &mut f64) { *o = x[7]; } }, FnKind::Kernel)
        .unwrap_err()
        .to_string();
    assert_eq!(err, "index out of bounds: the length is 4 but the index is 7");
}

#[test]
fn function_names_are_prefixed_and_long_ones_hashed() {
    assert_eq!(fn_cname("main"), "pl_fn_main");
    assert_eq!(fn_cname("r#int"), "pl_fn_int");
    let long = "a".repeat(300);
    let (x, y) = (fn_cname(&long), fn_cname(&format!("{long}b")));
    assert!(x.len() < 64 && y.len() < 64 && x != y, "{x} {y}");
    assert!(x.starts_with("pl_fn_aaaa"));
    let t = kernel(
        syn::parse_quote! { fn main(x: &f64, o: &mut f64) { let pl_v0 = *x; let __y = pl_v0; let NAN = __y; *o = NAN + sq(1.0); } },
    );
    assert!(t.source.starts_with("__device__ inline void pl_fn_main("), "{}", t.source);
    assert!(t.source.contains("double pl_u_pl_v0 = (*x);"), "{}", t.source);
    assert!(t.source.contains("double pl_u___y = pl_u_pl_v0;"), "{}", t.source);
    assert!(t.source.contains("double NAN_ = pl_u___y;"), "{}", t.source);
    assert!(t.source.contains("pl_fn_sq(1.0)"), "{}", t.source);
}

#[test]
fn frames_count_local_arrays() {
    let t = kernel(syn::parse_quote! {
        fn k(x: &f64, o: &mut f64) {
            let mut a = [0.0f64; 200000];
            let b = [0.0f32; 12];
            a[0] = *x;
            *o = a[0] + b[5] as f64;
        }
    });
    assert!(t.frame_bytes >= 200000 * 8 + 48, "{}", t.frame_bytes);
    assert!(t.frame_bytes < 200000 * 8 + 4096, "{}", t.frame_bytes);
}

#[test]
fn rows_of_module_constants_need_a_type_and_arrays_are_not_if_values() {
    let err = |f: syn::ItemFn| translate(&f, FnKind::Kernel).unwrap_err().to_string();
    assert!(err(syn::parse_quote! { fn k(o: &mut f64) { let row = W[1]; *o = row[0]; } })
        .contains("annotate the local (`let row: [f64; 4] = W[i];`)"),);
    assert!(err(syn::parse_quote! {
        fn k(c: &f64, o: &mut f64) { let a = if *c > 0.0 { [1.0, 2.0] } else { [3.0, 4.0] }; *o = a[0]; }
    })
    .starts_with("`if`, `match` and blocks cannot yield arrays"));
}

#[test]
fn nested_locals_count_in_frames_and_helpers_given_rows_decide_increments() {
    let t = kernel(syn::parse_quote! {
        fn k(x: &f64, o: &mut [[f64; 3]; 2], p: &mut [[f64; 3]; 2]) {
            let mut m = [[0.0f64; 300]; 100];
            m[1][2] = *x;
            fill(&mut o[1]);
            p[0][1] += m[1][2];
        }
    });
    assert!(t.frame_bytes >= 300 * 100 * 8, "{}", t.frame_bytes);
    // `o` is increment-only if `fill` only adds to its row.
    assert_eq!(t.increment_only, [true, true, true]);
    assert_eq!(t.increment_via[1], [("fill".to_string(), 0)]);
}

#[test]
fn debug_asserts_are_asserts_or_nothing_by_profile() {
    let f: syn::ItemFn = syn::parse_quote! {
        fn k(a: &f64, o: &mut f64) {
            debug_assert!(*a > 0.0);
            if *a > 1.0 { debug_assert_eq!(*o, 0.0, "o"); }
            *o = *a;
        }
    };
    let on = parloop_kernels::with_debug_asserts(&f, true).expect("has debug asserts");
    let off = parloop_kernels::with_debug_asserts(&f, false).expect("has debug asserts");
    let (on, off) = (kernel(on), kernel(off));
    assert!(on.may_panic && on.panics.len() == 2, "{}", on.source);
    assert!(!off.may_panic && !off.source.contains("__pl_panic"), "{}", off.source);
    let plain: syn::ItemFn = syn::parse_quote! { fn k(a: &f64, o: &mut f64) { *o = *a; } };
    assert!(parloop_kernels::with_debug_asserts(&plain, true).is_none());
}

/// What a new user writes first, refused with what to write instead.
#[test]
fn common_refusals_name_the_construct_and_the_fix() {
    let err = |f: syn::ItemFn| translate(&f, FnKind::Kernel).unwrap_err().to_string();
    let filter =
        err(syn::parse_quote! { fn k(q: &[f64; 3], o: &mut f64) { *o = q.iter().filter(|v| **v > 0.0).sum(); } });
    assert!(filter.contains("`.sum()`") && filter.contains("after any `.map(f)`s"), "{filter}");
    let generic = err(syn::parse_quote! { fn k<T: Copy>(w: &T, o: &mut f64) { *o = 1.0; } });
    assert!(generic.contains("cannot be generic"), "{generic}");
    let len = err(syn::parse_quote! { fn k(o: &mut f64) { const N: usize = 3; let a = [0.0; N]; *o = a[0]; } });
    assert!(len.contains("write the number"), "{len}");
    let lit = err(syn::parse_quote! { fn k(o: &mut f64) { let p = P { x: 1.0 }; *o = 0.0; } });
    assert!(lit.contains("struct literals"), "{lit}");
}

/// The names patterns bind, for the attribute's check that none is a
/// module-level constant (rustc would read `three => ..` as one): bindings
/// of `match`, `@`, `matches!` and `if let`; not local `const`s (constant
/// patterns, which the translation sees).
#[test]
fn pattern_bindings_are_recorded() {
    let t = kernel(syn::parse_quote! {
        fn k(x: &i32, o: &mut i32) {
            const four: i32 = 4;
            *o = match *x {
                four => 1,
                three => three,
            };
            *o += match *x {
                v @ 0..=2 => v,
                _ => 0,
            };
            if matches!(*x, seven) {
                *o += 1;
            }
            if let eight = *x {
                *o += eight;
            }
        }
    });
    let names: Vec<String> = t.pattern_bindings.iter().map(|i| i.to_string()).collect();
    assert_eq!(names, ["three", "v", "seven", "eight"]);
}
