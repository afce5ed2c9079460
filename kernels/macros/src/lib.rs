//! `#[parloop::kernel]` and `#[parloop::device]`: thin attributes over
//! [`parloop_kernels::translate`]. Use them through the `parloop` crate,
//! which re-exports them; see its documentation for examples.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::{parse_macro_input, FnArg, Item, ItemConst, ItemFn, LitStr, Pat};

use parloop_kernels::{
    lane_twin, translate, translate_const, with_debug_asserts, ConstUse, FnKind, LaneTwin, Scalar, Translation,
};

/// Declares a loop kernel: keeps the function for host use and generates a
/// descriptor type of the same name with `KERNEL` (for `par_loop`) and
/// `DEVICE` (its CUDA C++ translation). `#[parloop::kernel(cuda = "...")]`
/// supplies the CUDA source by hand for a kernel outside the subset.
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    let func = parse_macro_input!(item as ItemFn);
    expand(attr.into(), func, FnKind::Kernel).into()
}

/// Declares a helper callable from kernels, or a module-level constant
/// shared by host and device: keeps the item and generates a descriptor
/// type of the same name whose `DEVICE` holds its translation (a
/// `__device__` function, or a `__device__ constexpr` definition emitted
/// once into every module that reads the constant). A `use` of the
/// constant brings its descriptor along (same name, type namespace).
///
/// ```ignore
/// #[parloop::device]
/// const WTG2: [f64; 4] = [0.25; 4];
///
/// #[parloop::device]
/// fn shape(xi: f64, eta: f64, n: &mut [f64; 4]) {
///     n[0] = (1.0 - xi) * (1.0 - eta);
///     n[1] = xi * (1.0 - eta);
///     n[2] = (1.0 - xi) * eta;
///     n[3] = xi * eta;
/// }
///
/// #[parloop::kernel]
/// fn mass(x: &[f64; 4], m: &mut f64) {
///     let mut n = [0.0; 4];
///     shape(0.5, 0.5, &mut n);
///     for i in 0..4 {
///         *m += WTG2[i] * n[i] * x[i];
///     }
/// }
/// ```
///
/// (`runtime/tests/fem_kernels.rs` runs a complete port of OP2's `aero`
/// kernels written this way.)
#[proc_macro_attribute]
pub fn device(attr: TokenStream, item: TokenStream) -> TokenStream {
    match parse_macro_input!(item as Item) {
        Item::Fn(func) => expand(attr.into(), func, FnKind::Device).into(),
        Item::Const(c) => expand_const(attr.into(), c).into(),
        other => syn::Error::new_spanned(
            other,
            "#[parloop::device] applies to helper functions (`fn`) and module-level constants (`const`)",
        )
        .to_compile_error()
        .into(),
    }
}

/// Codes of the element types in the compile-time check of a constant's
/// use (the generated `ELEM` and the check agree on them).
fn elem_code(s: Scalar) -> u8 {
    match s {
        Scalar::F64 => 0,
        Scalar::F32 => 1,
        Scalar::I32 => 2,
        Scalar::U32 => 3,
        Scalar::I64 => 4,
        Scalar::U64 => 5,
        Scalar::Usize => 6,
        Scalar::Bool => 7,
    }
}

/// The descriptors of the module-level constants `uses` (their `DEVICE`,
/// for the user's dependencies) and a compile-time check per constant that
/// it is read with its declared element type and rank (the translation
/// took both from the uses; see `parloop_kernels::ConstUse`).
fn const_deps(user: &str, uses: &[ConstUse]) -> (Vec<TokenStream2>, TokenStream2) {
    let mut deps = Vec::new();
    let mut checks = TokenStream2::new();
    for u in uses {
        let ident = format_ident!("{}", u.name, span = u.span);
        deps.push(quote! { #ident::DEVICE });
        let rank = u.rank;
        let indices = if rank == 0 { "no index".to_string() } else { format!("{rank} index(es)") };
        let (elem_ok, shown) = match u.elem {
            Some(s) => {
                let code = elem_code(s);
                (quote! { #ident::ELEM == #code }, format!("`{}` values", s.rust()))
            }
            None => (quote! { true }, "values".to_string()),
        };
        let msg = format!(
            "`{user}` reads the module-level constant `{}` as {shown} reached with {indices}, which is not its \
             declared type: index it down to its elements (as deep as it is nested) and use the values with \
             their declared type (bind it to an annotated `let`: `let n: u64 = N;`)",
            u.name
        );
        // At the use, so that the error points into the function.
        let span = u.span;
        checks.extend(quote_spanned! {span=>
            const _: () = ::core::assert!(#ident::RANK == #rank && #elem_ok, #msg);
        });
    }
    (deps, checks)
}

fn expand_const(attr: TokenStream2, c: ItemConst) -> TokenStream2 {
    if !attr.is_empty() {
        let err = syn::Error::new_spanned(attr, "#[parloop::device] on a constant takes no options").to_compile_error();
        return quote! { #c #err };
    }
    let t = match translate_const(&c) {
        Ok(t) => t,
        Err(e) => {
            let err = e.to_compile_error();
            return quote! { #c #err };
        }
    };
    let name = &c.ident;
    let vis = &c.vis;
    let name_str = name.to_string();
    let (cname, source) = (&t.cname, &t.source);
    let (deps, checks) = const_deps(&name_str, &t.consts);
    let (elem, rank) = (elem_code(t.elem), t.rank);
    quote! {
        #c

        /// The parloop descriptor of the device constant: its C++ definition.
        #[doc(hidden)]
        #[allow(non_camel_case_types, dead_code, clippy::upper_case_acronyms)]
        #vis struct #name {}

        #[allow(dead_code)]
        impl #name {
            /// The constant's C++ definition, with the constants it reads.
            #[doc(hidden)]
            pub const DEVICE: &'static ::parloop::DeviceFn =
                &::parloop::DeviceFn::new(#name_str, #cname, #source, &[ #( #deps ),* ]);
            /// The element type's code (see `elem_code` in parloop-macros).
            #[doc(hidden)]
            pub const ELEM: u8 = #elem;
            /// How many indices reach an element.
            #[doc(hidden)]
            pub const RANK: usize = #rank;
        }

        #checks
    }
}

/// Parses `cuda = "..."`, the only option.
fn options(attr: TokenStream2) -> syn::Result<Option<LitStr>> {
    if attr.is_empty() {
        return Ok(None);
    }
    let mut cuda = None;
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("cuda") {
            cuda = Some(meta.value()?.parse::<LitStr>()?);
            Ok(())
        } else {
            Err(meta.error("unknown option; the only option is `cuda = \"<CUDA C++ source>\"`"))
        }
    });
    syn::parse::Parser::parse2(parser, attr)?;
    Ok(cuda)
}

/// The span of the first call `name(...)` in `tokens`.
fn call_span(tokens: TokenStream2, name: &str) -> Option<Span> {
    let mut before: Option<proc_macro2::Ident> = None;
    for tree in tokens {
        match tree {
            proc_macro2::TokenTree::Group(g) => {
                if g.delimiter() == proc_macro2::Delimiter::Parenthesis {
                    if let Some(ident) = before.as_ref().filter(|i| *i == name) {
                        return Some(ident.span());
                    }
                }
                if let Some(span) = call_span(g.stream(), name) {
                    return Some(span);
                }
                before = None;
            }
            proc_macro2::TokenTree::Ident(i) => before = Some(i),
            _ => before = None,
        }
    }
    None
}

/// For each name the translation binds in a pattern (it sees no module
/// items), `match () { name @ _ => () }` with the name's span: a binding
/// for certain, which rustc refuses ("match bindings cannot shadow
/// constants", at the user's pattern) where a constant, static or unit
/// struct of that name is in scope, where Rust's pattern would compare
/// with it and the device's would match every value.
fn pattern_checks(bindings: &[syn::Ident]) -> TokenStream2 {
    let mut seen = std::collections::HashSet::new();
    let names: Vec<&syn::Ident> =
        bindings.iter().filter(|b| seen.insert((b.to_string(), format!("{:?}", b.span())))).collect();
    if names.is_empty() {
        return quote! {};
    }
    quote! {
        #[allow(unused_variables, clippy::redundant_pattern)]
        const _: () = { #( match () { #names @ _ => () } )* };
    }
}

/// The translation of `func`; where it has `debug_assert!`s, the one
/// with them (as `assert!`s) and the one without (release builds).
fn translated(func: &ItemFn, kind: FnKind) -> syn::Result<(Translation, Option<Translation>)> {
    let (Some(debug), Some(release)) = (with_debug_asserts(func, true), with_debug_asserts(func, false)) else {
        return Ok((translate(func, kind)?, None));
    };
    let (d, r) = (translate(&debug, kind)?, translate(&release, kind)?);
    if d.host.is_some() || r.host.is_some() {
        // The host function keeps its `debug_assert!`s for rustc to
        // compile by profile; pinned types would replace it with a form
        // without them.
        return Err(syn::Error::new(
            func.sig.ident.span(),
            "a kernel with `debug_assert!` uses a value whose type only a helper's signature gives: bind the \
             helper's result to an annotated `let` (`let v: f64 = h(x);`)",
        ));
    }
    Ok((d, Some(r)))
}

fn expand(attr: TokenStream2, func: ItemFn, kind: FnKind) -> TokenStream2 {
    let lints = quote! {
        // Kernels are written in the indexable subset that translates to CUDA.
        // (`let_and_return`: the blocks that pin the translation's assumed types.)
        #[allow(
            clippy::too_many_arguments,
            clippy::needless_range_loop,
            clippy::manual_memcpy,
            clippy::manual_clamp,
            clippy::let_and_return
        )]
    };
    // A method (`&self`): rustc's errors for what the attribute generates
    // inside an `impl` ("struct is not supported in `impl`s") said nothing
    // of the cause.
    if let Some(receiver) = func.sig.receiver() {
        let what = if kind == FnKind::Kernel { "kernels" } else { "device helpers" };
        let err = syn::Error::new_spanned(
            receiver,
            format!(
                "{what} are free functions, not methods: `self` has no translation to CUDA; move `{}` out of the \
                 `impl` block and pass what it reads as parameters",
                func.sig.ident
            ),
        )
        .to_compile_error();
        return quote! { #func #err };
    }
    // Hand-written CUDA: the C++ name is the Rust one, nothing is known of
    // the body (every parameter counts as increment-only, nothing panics,
    // no frame size).
    let by_hand = !attr.is_empty();
    let generated = options(attr).and_then(|cuda| match cuda {
        Some(src) => Ok((
            func.sig.ident.to_string(),
            src.value(),
            Vec::new(),
            Vec::new(),
            false,
            0usize,
            Vec::new(),
            None,
            Vec::new(),
            None,
            Vec::new(),
        )),
        None => translated(&func, kind).map(|(t, release)| {
            let release = release.map(|r| (r.source, r.may_panic, r.frame_bytes, r.panics));
            (
                t.cname,
                t.source,
                t.calls,
                t.increment_only
                    .into_iter()
                    .zip(t.increment_via)
                    .zip(t.reductions)
                    .zip(t.increment_use)
                    .map(|(((i, v), r), u)| (i, v, r, u))
                    .collect(),
                t.may_panic,
                t.frame_bytes,
                t.consts,
                t.host,
                t.panics,
                release,
                t.pattern_bindings,
            )
        }),
    });
    let (cname, source, calls, increment_only, may_panic, frame_bytes, consts, host, panics, release, bindings) =
        match generated {
            Ok(g) => g,
            Err(e) => {
                let err = e.to_compile_error();
                return quote! { #lints #func #err };
            }
        };
    // The host function with the translation's type assumptions pinned,
    // where it made any (rustc checks them).
    let func = host.unwrap_or(func);
    let pattern_checks = pattern_checks(&bindings);
    let name = &func.sig.ident;
    let vis = &func.vis;
    let name_str = name.to_string();
    let (const_deps, const_checks) = const_deps(&name_str, &consts);
    let body = func.block.to_token_stream();
    let deps = calls
        .iter()
        .map(|c| {
            // At the call, so that a helper without #[parloop::device]
            // (no `DEVICE` beside it) is reported there, not at the attribute.
            let span = call_span(body.clone(), c).unwrap_or_else(Span::call_site);
            let c = format_ident!("{}", c, span = span);
            quote! { #c::DEVICE }
        })
        .chain(const_deps);
    let doc =
        format!("The parloop descriptor of [`{name_str}()`]: its CUDA translation and, for kernels, the `Kernel`.");
    let deps: Vec<TokenStream2> = deps.collect();
    // Per parameter, whether the body only adds to it, as a constant
    // expression: the translation's answer, and the `INCREMENT_ONLY`
    // entries of the helpers it passes the parameter to as `&mut` (hand-
    // written CUDA: nothing is known, every parameter counts as added to).
    // And what makes it not so, for the INC error: the body's own first
    // other use, or else the first helper that does more than add to it
    // (chosen at compile time from the helpers' tables); "" when it is.
    let (increments, increment_uses): (Vec<TokenStream2>, Vec<TokenStream2>) = (0..func.sig.inputs.len())
        .map(|i| {
            let (only, via, _, other_use) =
                increment_only.get(i).cloned().unwrap_or((true, Vec::new(), (true, true), None));
            let helpers: Vec<(syn::Ident, usize)> = via
                .iter()
                .map(|(helper, k)| {
                    let span = call_span(body.clone(), helper).unwrap_or_else(Span::call_site);
                    (format_ident!("{}", helper, span = span), *k)
                })
                .collect();
            let checks = helpers.iter().map(|(helper, k)| quote! { && #helper::INCREMENT_ONLY[#k] });
            let why = match other_use {
                Some(text) => {
                    let text = format!("uses it in `{text}`");
                    quote! { #text }
                }
                None => helpers.iter().rev().fold(quote! { "" }, |otherwise, (helper, k)| {
                    let text = format!("passes it to `{helper}`, which does more than add to it");
                    quote! { if #helper::INCREMENT_ONLY[#k] { #otherwise } else { #text } }
                }),
            };
            (quote! { #only #( #checks )* }, why)
        })
        .unzip();
    // What a caller passing `&mut` reads: a `&` or by-value parameter is
    // not added to (a `&mut` argument coerces to `&`, and the body reads it).
    let table: Vec<TokenStream2> = func
        .sig
        .inputs
        .iter()
        .zip(&increments)
        .map(|(arg, inc)| {
            let mutable =
                matches!(arg, FnArg::Typed(pt) if matches!(&*pt.ty, syn::Type::Reference(r) if r.mutability.is_some()));
            quote! { (#mutable && #inc) }
        })
        .collect();
    let increment_table = quote! {
        /// Per parameter: whether the function only adds to it (`+=`,
        /// `-=`), for the increment-only analysis of its callers.
        #[doc(hidden)]
        pub const INCREMENT_ONLY: &'static [bool] = &[ #( #table ),* ];
    };
    // A `DeviceFn` from one translation (source, whether it may panic,
    // frame bytes, panic messages).
    let device_fn = |source: &str, may_panic: bool, frame_bytes: usize, panics: &[String]| {
        // The Rust body can panic where the translation reports a panic
        // site or indexes dynamically (Rust checks every index); nothing
        // is known of a body whose CUDA is written by hand.
        let host_panics = by_hand || may_panic || !panics.is_empty() || source.contains("PL_IX(");
        quote! {
            &::parloop::DeviceFn::new(#name_str, #cname, #source, &[ #( #deps ),* ])
                .with_checks(#may_panic, #frame_bytes)
                .with_host_panics(#host_panics)
                .with_panics(&[ #( #panics ),* ])
        }
    };
    let device = match release {
        None => {
            let d = device_fn(&source, may_panic, frame_bytes, &panics);
            quote! {
                /// The CUDA C++ translation of the function, with the helpers it calls.
                #[doc(hidden)]
                pub const DEVICE: &'static ::parloop::DeviceFn = #d;
            }
        }
        // `debug_assert!`s: one translation per build profile, picked by
        // the profile of the crate compiled (`cfg!` here is the user's).
        Some((r_source, r_may_panic, r_frame_bytes, r_panics)) => {
            let debug = device_fn(&source, may_panic, frame_bytes, &panics);
            let release = device_fn(&r_source, r_may_panic, r_frame_bytes, &r_panics);
            quote! {
                #[doc(hidden)]
                pub const DEVICE_DEBUG: &'static ::parloop::DeviceFn = #debug;
                #[doc(hidden)]
                pub const DEVICE_RELEASE: &'static ::parloop::DeviceFn = #release;
                /// The CUDA C++ translation of the function, with the helpers it
                /// calls, its `debug_assert!`s as this build's profile has them.
                #[doc(hidden)]
                pub const DEVICE: &'static ::parloop::DeviceFn =
                    if cfg!(debug_assertions) { Self::DEVICE_DEBUG } else { Self::DEVICE_RELEASE };
            }
        }
    };
    let kernel = if kind == FnKind::Kernel {
        let mut names = Vec::new();
        let mut types = Vec::new();
        let inc = &increments;
        let inc_use = &increment_uses;
        for arg in &func.sig.inputs {
            if let FnArg::Typed(pt) = arg {
                if let Pat::Ident(pi) = &*pt.pat {
                    names.push(pi.ident.clone());
                    types.push((*pt.ty).clone());
                }
            }
        }
        let names_str: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        // Per parameter: whether a MIN, and a MAX, global may take it.
        let (mins, maxes): (Vec<bool>, Vec<bool>) =
            (0..names.len()).map(|i| increment_only.get(i).map_or((true, true), |t| t.2)).unzip();
        let private = quote!(::parloop::__private);
        // The lane-wise twin, when the kernel has one (see `parloop_kernels::lane_twin`).
        // Two widths: four lanes for AVX2, eight for AVX-512.
        let twins = lane_twin(&func, &private, 4).and_then(|four| Ok((four, lane_twin(&func, &private, 8)?)));
        let (lanes, with_lanes) = match twins {
            Ok((LaneTwin { params, body, exact_inc }, LaneTwin { params: params8, body: body8, .. })) => (
                quote! {
                    #[inline(always)]
                    #[allow(dead_code, unused_mut, unused_variables, unused_parens, clippy::all)]
                    fn lanes4( #( #params ),* ) #body
                    #[inline(always)]
                    #[allow(dead_code, unused_mut, unused_variables, unused_parens, clippy::all)]
                    fn lanes8( #( #params8 ),* ) #body8
                    ::parloop::__host_adapter!(
                        host_lanes, lanes = [lanes4, lanes8], scalar = host, exact = [ #( #exact_inc ),* ],
                        #( #names: #types ),*
                    );
                },
                // SAFETY: as `host`, for the twin's adapter.
                quote! { unsafe { kernel.with_lanes(host_lanes) } },
            ),
            Err(_) => (quote! {}, quote! { kernel }),
        };
        quote! {
            /// The kernel, for `par_loop`.
            pub const KERNEL: &'static ::parloop::Kernel = &{
                ::parloop::__host_adapter!(host, #name, #( #names: #types ),*);
                #lanes
                // A constant of its own: the helpers' `INCREMENT_ONLY`
                // entries it reads are not promoted to `'static` inline.
                const PARAMS: &[::parloop::ParamSig] =
                    &[ #( <#types as ::parloop::__private::KernelParam>::SIG.with_body(#names_str, #inc).with_increment_use(#inc_use).with_reductions(#mins, #maxes) ),* ];
                // SAFETY: `host` binds each view with its parameter's shape.
                let kernel = unsafe {
                    ::parloop::Kernel::from_parts(
                        #name_str,
                        PARAMS,
                        host,
                        Some(Self::DEVICE),
                    )
                    .with_path(concat!(module_path!(), "::", #name_str))
                };
                #with_lanes
            };
        }
    } else {
        quote! {}
    };
    quote! {
        #lints
        #func

        #const_checks
        #pattern_checks

        #[doc = #doc]
        #[allow(non_camel_case_types, dead_code)]
        #vis struct #name {}

        #[allow(dead_code)]
        impl #name {
            #device
            #increment_table
            #kernel
        }
    }
}
