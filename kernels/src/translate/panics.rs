//! `assert!`, `panic!` and `unreachable!` in kernels and helpers.
//!
//! On the host they are Rust's own macros. On the device each becomes a
//! numbered panic site: the translation records the site's message, the
//! C++ reports `__pl_panic(11, site, function)` (the function being a
//! hash of its C++ name) and returns, and the runtime reads the message
//! back from the kernel's table (`Translation::panics`), so the error a
//! loop returns carries Rust's message on every backend. An `assert!`'s
//! default message is its condition's source text (whitespace runs as one
//! space): Rust prints it pretty-printed, which is the same text for
//! rustfmt-formatted code.
//!
//! A message may format up to four scalar values (`panic!("x = {x:.3}")`,
//! `assert!(c, "{} of {}", i, n)`): [`formatted_as_lets`] binds each
//! argument to a `let` in the panic's branch (so the passes see ordinary
//! expressions) and makes the format string a template with explicit
//! slots; the device record carries the values and the runtime renders
//! the template as Rust would (`crate::panic_format`). A site's message is
//! always such a template (`{{` for a brace). `assert_eq!` and
//! `assert_ne!` become `if`s too; their device message is Rust's first
//! line (the values Rust appends stay on the host). `debug_assert!` and
//! its `_eq`/`_ne` forms depend on the build profile of the crate being
//! compiled, which a translation cannot see: [`with_debug_asserts`] gives
//! both forms and `#[parloop::kernel]` translates each, the crate's
//! `cfg!(debug_assertions)` picking one; [`translate`] alone refuses them.
//!
//! [`translate`]: super::translate

use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, LitStr, Token};

use crate::panic_format::{ArgRef, Piece, MAX_VALUES};
use crate::types::error;

/// A `panic!` or `unreachable!`, parsed: its panic site (an `assert!` is
/// an `if` around a `panic!` by then, see [`asserts_as_ifs`]).
pub(crate) struct KernelMacro {
    pub(crate) site: usize,
    /// The values its message formats, in slot order: the `let`s that
    /// [`formatted_as_lets`] made (typed by the passes like any path).
    pub(crate) values: Vec<Expr>,
}

/// The C++ name's hash the panic record carries to say which function's
/// table the site is in (`i64` as the record holds it).
pub fn function_id(cname: &str) -> i64 {
    super::names::fnv1a(cname.as_bytes()) as i64
}

struct Args(Punctuated<Expr, Token![,]>);

impl Parse for Args {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        Ok(Args(Punctuated::parse_terminated(input)?))
    }
}

/// The message template of a format string whose placeholders were made
/// slots by [`formatted_as_lets`] (`values` of them); an error where it
/// still has a placeholder it cannot fill.
fn template(s: &LitStr, values: usize) -> syn::Result<String> {
    let text = s.value();
    let pieces =
        crate::panic_format::parse(&text).map_err(|e| error(s.span(), format!("kernel panic message: {e}")))?;
    for p in &pieces {
        let fits = match p {
            Piece::Value(ArgRef::Index(i), _) => *i < values,
            Piece::Value(..) => false,
            Piece::Text(_) => true,
        };
        if !fits {
            return Err(error(
                s.span(),
                format!(
                    "kernel panic messages format at most {MAX_VALUES} scalar values (f32, f64, integers, bool), \
                     each a positional argument, a named one or a captured variable"
                ),
            ));
        }
    }
    Ok(text)
}

/// Parses macro `m` as a kernel macro, adding its message to `sites`.
pub(crate) fn parse(m: &syn::Macro, sites: &mut Vec<String>) -> syn::Result<KernelMacro> {
    let name = m.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
    let std_path = m.path.segments.len() == 1
        || m.path.segments.iter().take(m.path.segments.len() - 1).all(|s| s.ident == "std" || s.ident == "core");
    if !std_path || !matches!(name.as_str(), "panic" | "unreachable") {
        return Err(error(
            m.span(),
            match name.as_str() {
                // Well-formed ones were rewritten before the passes.
                "assert" => "`assert!` takes a condition and an optional literal message".to_string(),
                "assert_eq" | "assert_ne" => {
                    format!("`{name}!` takes two values and an optional literal message (`\"...\"`)")
                }
                "debug_assert" | "debug_assert_eq" | "debug_assert_ne" => format!(
                    "`{name}!` is not supported in kernels (whether it runs depends on the build profile): \
                     write `assert!(condition)` or `assert!(condition, \"message\")`"
                ),
                _ => {
                    format!("`{name}!`: the macros supported inside kernels are `assert!`, `assert_eq!`, `assert_ne!`, `matches!`, `panic!` and `unreachable!`")
                }
            },
        ));
    }
    let args = m.parse_body::<Args>()?.0;
    let values: Vec<Expr> = args.iter().skip(1).cloned().collect();
    if values.iter().any(|v| !is_slot(v)) {
        return Err(error(
            m.span(),
            format!(
                "`{name}!`: kernel panic messages format at most {MAX_VALUES} scalar values (f32, f64, integers, \
                 bool) with a literal format string; widths and precisions from arguments (`{{:1$}}`, `{{:.*}}`) are \
                 not supported"
            ),
        ));
    }
    let text = match args.first() {
        None => None,
        Some(Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. })) => Some(template(s, values.len())?),
        Some(other) => return Err(error(other.span(), "kernel panics take a literal format string (`\"...\"`)")),
    };
    sites.push(match (name.as_str(), text) {
        ("panic", None) => "explicit panic".to_string(),
        ("panic", Some(t)) => t,
        (_, None) => "internal error: entered unreachable code".to_string(),
        (_, Some(t)) => format!("internal error: entered unreachable code: {t}"),
    });
    Ok(KernelMacro { site: sites.len() - 1, values })
}

/// The prefix of the `let`s [`formatted_as_lets`] binds.
const SLOT: &str = "__pl_fmt";

fn is_slot(e: &Expr) -> bool {
    matches!(e, Expr::Path(p) if p.path.get_ident().is_some_and(|i| i.to_string().starts_with(SLOT)))
}

/// Rewrites each `panic!`/`unreachable!` whose message formats values as
/// a block that binds the values to `let`s and panics with a template
/// naming them by slot: `panic!("{x:.2} of {}", n + 1)` becomes `{ let
/// __pl_fmt0 = x; let __pl_fmt1 = n + 1; panic!("{0:.2} of {1}",
/// __pl_fmt0, __pl_fmt1) }`, the same Rust (the arguments are evaluated
/// once, when the panic happens). A message it cannot rewrite (an
/// unsupported spec, too many values) is left for [`parse`] to refuse.
pub(crate) fn formatted_as_lets(item: &mut syn::ItemFn) {
    fn rewritten(m: &syn::Macro) -> Option<Expr> {
        let name = m.path.segments.last()?.ident.to_string();
        if !matches!(name.as_str(), "panic" | "unreachable") {
            return None;
        }
        let args = m.parse_body::<Args>().ok()?.0;
        let Some(Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(fmt), .. })) = args.first() else { return None };
        let pieces = crate::panic_format::parse(&fmt.value()).ok()?;
        if !pieces.iter().any(|p| matches!(p, Piece::Value(..))) || args.iter().skip(1).any(is_slot) {
            return None;
        }
        let (mut positional, mut named) = (Vec::new(), Vec::new());
        for a in args.iter().skip(1) {
            match a {
                Expr::Assign(x) => match &*x.left {
                    Expr::Path(p) => named.push((p.path.get_ident()?.to_string(), (*x.right).clone())),
                    _ => return None,
                },
                e => positional.push(e.clone()),
            }
        }
        // Each argument used gets a slot, in order of first use.
        let mut slots: Vec<(String, Expr)> = Vec::new();
        let mut template = String::new();
        let mut next = 0;
        for p in pieces {
            let (arg, spec) = match p {
                Piece::Text(t) => {
                    template.push_str(&crate::panic_format::escape(&t));
                    continue;
                }
                Piece::Value(arg, spec) => (arg, spec),
            };
            let (key, value) = match arg {
                ArgRef::Next => {
                    next += 1;
                    (format!("#{}", next - 1), positional.get(next - 1)?.clone())
                }
                ArgRef::Index(i) => (format!("#{i}"), positional.get(i)?.clone()),
                ArgRef::Name(n) => {
                    let value = match named.iter().find(|(k, _)| *k == n) {
                        Some((_, v)) => v.clone(),
                        // A captured variable.
                        None => {
                            let ident = syn::Ident::new(&n, fmt.span());
                            syn::parse_quote!(#ident)
                        }
                    };
                    (n, value)
                }
            };
            let slot = match slots.iter().position(|(k, _)| *k == key) {
                Some(s) => s,
                None => {
                    slots.push((key, value));
                    slots.len() - 1
                }
            };
            if spec.is_empty() {
                template.push_str(&format!("{{{slot}}}"));
            } else {
                template.push_str(&format!("{{{slot}:{spec}}}"));
            }
        }
        if slots.len() > MAX_VALUES {
            return None;
        }
        let span = m.span();
        let names: Vec<syn::Ident> = (0..slots.len()).map(|k| syn::Ident::new(&format!("{SLOT}{k}"), span)).collect();
        let values = slots.iter().map(|(_, v)| v);
        let lit = LitStr::new(&template, fmt.span());
        let path = &m.path;
        Some(syn::parse_quote_spanned! {span=> {
            #(let #names = #values;)*
            #path!(#lit, #(#names),*)
        }})
    }
    rewrite_macros(item, rewritten);
}

/// Rewrites every `assert!(c)` / `assert!(c, "m")` of `item` as `if !(c)
/// { panic!("assertion failed: c") }` / `if !(c) { panic!("m") }`, the same
/// Rust, before the passes: the condition is then an expression of the
/// body like any other (typed, pinned, its path calls in method form, seen
/// by the increment analysis) rather than tokens inside a macro.
pub(crate) fn asserts_as_ifs(item: &mut syn::ItemFn) {
    fn rewritten(m: &syn::Macro) -> Option<Expr> {
        if m.path.is_ident("assert_eq") || m.path.is_ident("assert_ne") {
            return compared(m);
        }
        if !m.path.is_ident("assert") {
            return None;
        }
        let args = m.parse_body::<Args>().ok()?.0;
        let cond = args.first()?;
        let span = m.span();
        Some(match args.len() {
            1 => {
                let text = format!("assertion failed: {}", condition_text(m)).replace('{', "{{").replace('}', "}}");
                let lit = LitStr::new(&text, span);
                syn::parse_quote_spanned! {span=> if !(#cond) { panic!(#lit) } }
            }
            _ => {
                let rest = args.iter().skip(1);
                syn::parse_quote_spanned! {span=> if !(#cond) { panic!(#(#rest),*) } }
            }
        })
    }
    rewrite_macros(item, rewritten);
}

/// Replaces every macro of `item` (expression or statement) for which
/// `rewritten` gives an expression, innermost first.
fn rewrite_macros(item: &mut syn::ItemFn, rewritten: fn(&syn::Macro) -> Option<Expr>) {
    use syn::visit_mut::VisitMut;
    struct Rewrite(fn(&syn::Macro) -> Option<Expr>);
    impl VisitMut for Rewrite {
        fn visit_expr_mut(&mut self, e: &mut Expr) {
            syn::visit_mut::visit_expr_mut(self, e);
            if let Expr::Macro(m) = e {
                if let Some(r) = (self.0)(&m.mac) {
                    *e = r;
                }
            }
        }
        fn visit_stmt_mut(&mut self, s: &mut syn::Stmt) {
            syn::visit_mut::visit_stmt_mut(self, s);
            if let syn::Stmt::Macro(m) = s {
                if let Some(r) = (self.0)(&m.mac) {
                    *s = syn::Stmt::Expr(r, m.semi_token);
                }
            }
        }
    }
    Rewrite(rewritten).visit_item_fn_mut(item);
}

/// `assert_eq!(a, b)` / `assert_ne!(a, b)` (with an optional literal
/// message) as `if !(a == b) { panic!(..) }`: each operand evaluated once,
/// as Rust does. The message is Rust's first line (``assertion `left ==
/// right` failed``, then `: message`); Rust's host panic adds the two
/// values, which a device panic record cannot carry.
fn compared(m: &syn::Macro) -> Option<Expr> {
    let args = m.parse_body::<Args>().ok()?.0;
    let (a, b) = (args.first()?, args.get(1)?);
    let op = if m.path.is_ident("assert_eq") { "==" } else { "!=" };
    let mut text = format!("assertion `left {op} right` failed");
    match args.get(2) {
        None => {}
        Some(Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. })) if args.len() == 3 => {
            // Still a format string: the user's escapes (`{{`) stay.
            text.push_str(": ");
            text.push_str(&s.value());
        }
        // Formatted messages stay a macro, refused by the passes.
        Some(_) => return None,
    }
    let span = m.span();
    let lit = LitStr::new(&text, span);
    Some(if op == "==" {
        syn::parse_quote_spanned! {span=> if !((#a) == (#b)) { panic!(#lit) } }
    } else {
        syn::parse_quote_spanned! {span=> if !((#a) != (#b)) { panic!(#lit) } }
    })
}

/// An `assert!`'s condition as Rust's message prints it: the source text
/// as written (whitespace runs as one space; rustfmt's spacing is the
/// pretty-printer's), or, where the source is not visible (outside a
/// compiler expansion), the tokens.
fn condition_text(m: &syn::Macro) -> String {
    let group = match &m.delimiter {
        syn::MacroDelimiter::Paren(d) => d.span.join(),
        syn::MacroDelimiter::Brace(d) => d.span.join(),
        syn::MacroDelimiter::Bracket(d) => d.span.join(),
    };
    let source = group.source_text().and_then(|t| {
        let inner = t.get(1..t.len().checked_sub(1)?)?;
        Some(inner.split_whitespace().collect::<Vec<_>>().join(" "))
    });
    let text = source.unwrap_or_else(|| m.tokens.to_string());
    text.trim().trim_end_matches(',').trim_end().to_string()
}

/// `item` with its `debug_assert!`, `debug_assert_eq!` and
/// `debug_assert_ne!` as the build profile has them: with `enabled`
/// (`cfg!(debug_assertions)`) as `assert!`, `assert_eq!`, `assert_ne!`,
/// otherwise `if false { .. }` naming their operands (not evaluated, as in
/// Rust's release expansion). `None`
/// where `item` has none. The attribute translates both forms and picks
/// one by the profile of the crate being compiled, which the translation
/// cannot see.
pub fn with_debug_asserts(item: &syn::ItemFn, enabled: bool) -> Option<syn::ItemFn> {
    use syn::visit_mut::VisitMut;
    fn debug(m: &syn::Macro) -> Option<&'static str> {
        let name = m.path.segments.last()?.ident.to_string();
        match name.as_str() {
            "debug_assert" => Some("assert"),
            "debug_assert_eq" => Some("assert_eq"),
            "debug_assert_ne" => Some("assert_ne"),
            _ => None,
        }
    }
    struct Rewrite {
        enabled: bool,
        found: bool,
    }
    /// The release form of a debug assertion: its operands named in a
    /// branch that never runs (Rust's release expansion still names
    /// them, so a local only an assertion reads is no unused C++ local).
    fn never_run(m: &syn::Macro) -> Expr {
        let span = m.span();
        let operands: Vec<Expr> = m
            .parse_body::<Args>()
            .map(|a| a.0.into_iter().filter(|e| !matches!(e, Expr::Lit(_))).collect())
            .unwrap_or_default();
        syn::parse_quote_spanned! {span=> if false { #( let _ = #operands; )* } }
    }
    impl Rewrite {
        /// The rewritten form of a debug assertion, or `None` for any
        /// other macro.
        fn fix(&mut self, m: &syn::Macro) -> Option<Expr> {
            let to = debug(m)?;
            self.found = true;
            let span = m.span();
            Some(if self.enabled {
                let mut m = m.clone();
                m.path = syn::Ident::new(to, span).into();
                Expr::Macro(syn::ExprMacro { attrs: Vec::new(), mac: m })
            } else {
                never_run(m)
            })
        }
    }
    impl VisitMut for Rewrite {
        fn visit_stmt_mut(&mut self, s: &mut syn::Stmt) {
            syn::visit_mut::visit_stmt_mut(self, s);
            if let syn::Stmt::Macro(m) = s {
                if let Some(e) = self.fix(&m.mac) {
                    *s = syn::Stmt::Expr(e, Some(Default::default()));
                }
            }
        }
        fn visit_expr_mut(&mut self, e: &mut Expr) {
            syn::visit_mut::visit_expr_mut(self, e);
            if let Expr::Macro(m) = e {
                if let Some(new) = self.fix(&m.mac) {
                    *e = new;
                }
            }
        }
    }
    let mut f = item.clone();
    let mut r = Rewrite { enabled, found: false };
    r.visit_block_mut(&mut f.block);
    r.found.then_some(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(m: syn::Macro) -> syn::Result<Vec<String>> {
        let mut sites = Vec::new();
        parse(&m, &mut sites).map(|_| sites)
    }

    #[test]
    fn messages_are_rusts() {
        assert_eq!(parsed(syn::parse_quote!(panic!())).unwrap(), ["explicit panic"]);
        assert_eq!(
            parsed(syn::parse_quote!(unreachable!("no {{way}}"))).unwrap(),
            ["internal error: entered unreachable code: no {{way}}"]
        );
        let mut f: syn::ItemFn = syn::parse_quote! { fn k(h: &f64) { assert!(*h > 0.0); } };
        asserts_as_ifs(&mut f);
        let s = quote::quote!(#f).to_string();
        assert!(s.contains("if ! (* h > 0.0) { panic ! (\"assertion failed: * h > 0.0\") }"), "{s}");
    }

    #[test]
    fn formatted_messages_bind_their_values_and_name_them_by_slot() {
        let mut f: syn::ItemFn = syn::parse_quote! {
            fn k(h: &f64, n: &i32) { if *h < 0.0 { panic!("{h:.2} of {} and {0} {{x}} {m}", *n + 1, m = 3); } }
        };
        formatted_as_lets(&mut f);
        let s = quote::quote!(#f).to_string();
        let expected = "{ let __pl_fmt0 = h ; let __pl_fmt1 = * n + 1 ; let __pl_fmt2 = 3 ; \
                        panic ! (\"{0:.2} of {1} and {1} {{x}} {2}\" , __pl_fmt0 , __pl_fmt1 , __pl_fmt2) }";
        assert!(s.contains(expected), "{s}");
        // Five values: left for `parse` to refuse.
        let mut f: syn::ItemFn = syn::parse_quote! { fn k() { panic!("{} {} {} {} {}", 1, 2, 3, 4, 5); } };
        formatted_as_lets(&mut f);
        assert!(!quote::quote!(#f).to_string().contains("__pl_fmt"));
    }

    #[test]
    fn formatting_and_other_macros_are_refused() {
        for m in [
            syn::parse_quote!(panic!("h = {}", h)),
            syn::parse_quote!(panic!("h = {h}")),
            syn::parse_quote!(assert_eq!(a, b)),
            syn::parse_quote!(println!("x")),
            syn::parse_quote!(my::panic!("x")),
        ] {
            assert!(parsed(m).is_err());
        }
    }
}
