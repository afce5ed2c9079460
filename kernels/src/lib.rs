//! `parloop-kernels`: everything in parloop that becomes device code.
//!
//! Kernels are written once, as ordinary Rust functions, and
//! [`translate`] turns them into CUDA C++ `__device__` functions (the
//! `#[parloop::kernel]` attribute calls it at compile time). The crate does
//! not depend on the runtime and is tested as a plain library.
//!
//! # The kernel subset
//!
//! Parameters: `&T`, `&mut T`, `&[T; N]`, `&mut [T; N]`, `&[[T; M]; N]`,
//! `&mut [[T; M]; N]` with `T` one of `f64 f32 i32 u32 i64 u64`; helpers
//! (`#[parloop::device]`) also take scalars and arrays by value (an array
//! as a `__pl_arr` struct the caller fills where Rust evaluates the
//! argument: the helper's own copy) and may return a scalar, or an array
//! (a `__pl_arr` too; a caller binds it to a `let` annotated with its
//! type, or assigns it to an array place). Helpers do not call themselves.
//!
//! Bodies may use:
//!
//! - `let` with or without a type and `mut`, local `const` (scalars and
//!   tables), array locals of any nesting (`[0.0; 4]`, `[[0.0; 3]; 3]`,
//!   `[[-1.0, -1.0], [1.0, 0.0]]`), rows read, copied and assigned
//!   (`let row = k[1];`, `k = [[0.0; 3]; 3];`, `*out = m;`), array literals
//!   as values (`helper(&[a, b])`, `[1.0, 2.0][i]`), rows passed to helpers
//!   (`fill(&mut k[i])`, `outer(&k)`);
//! - module-level constants shared by host and device, declared with
//!   `#[parloop::device] const W: [f64; 4] = [...];` (scalars and arrays
//!   of any nesting; literals, other such constants, arithmetic and casts)
//!   and emitted once into each module as `__device__ constexpr` (see
//!   [`translate_const`]). A function cannot see the declaration, so it
//!   reads a constant with the element type its uses give and the rank of
//!   its deepest indexing (a row bound by an annotated `let` counts); the
//!   attribute checks both against the declaration at compile time;
//! - arithmetic, comparison, logical and bitwise operators, compound
//!   assignment, indexing, `*` on references;
//! - `if`/`else` as statements and as expressions (emitted as a ternary, or
//!   a temporary when a branch has statements), block expressions;
//! - `for` over `a..b`, `a..=b`, with `.rev()` and `.step_by(k)`, and over
//!   arrays (`a.iter()`, `a.iter_mut()`, `&a`, a bare array, `.copied()`,
//!   `.zip`, `.enumerate()`, `.rev()`: rewritten to index loops before the
//!   passes, `translate/iterate.rs`); `while`, `loop`, `break`,
//!   `continue` (also labelled: C++ `goto`s to a label after the loop or
//!   at the end of its body), `return`;
//! - iterator reductions as values: such a source, any `.map(f)`s, then
//!   `.sum()`, `.product()`, `.fold(init, f)`, `.any(f)` or `.all(f)`,
//!   with closures (patterns a `for` takes, `|acc, v|`) or paths as the
//!   functions, rewritten to those loops (`translate/folds.rs`: a float
//!   `sum` from Rust's `-0.0`, integers wrapping, `any`/`all` stopping
//!   early);
//! - references to places kept in locals (`let r = &mut m[i];`, `let e =
//!   &mut *o;`, a reference parameter moved into a local): C++ pointers,
//!   so writes through them reach the place as in Rust;
//! - `matches!` and `if let`, rewritten to the `match` they stand for
//!   (`translate/sugar.rs`);
//! - `as` casts between the scalar types;
//! - `match` on integers and `bool`s, as a statement or a value: literal,
//!   range (`1..=4`, `..0`, `10..`), constant (`i32::MAX`, a local `const`),
//!   `_`, binding (`v`, `v @ 1..=4`) patterns, alternatives, guards (a
//!   module-level constant is no pattern: the translation cannot see it,
//!   so `#[parloop::kernel]` has rustc refuse a bound name that is one,
//!   see [`Translation::pattern_bindings`]);
//!   emitted as an `if` chain over the scrutinee evaluated once (with a
//!   taken-flag when there are guards, so a guard runs only after its
//!   pattern matched);
//! - `assert!`, `assert_eq!`, `assert_ne!`, `panic!`, `unreachable!` with
//!   literal messages (and the `debug_` forms, by build profile, see
//!   [`with_debug_asserts`]): numbered
//!   panic sites whose messages the runtime reports (`translate/panics.rs`);
//! - tuples where they are taken apart: `let (a, b) = ...;` and `(a, b) =
//!   ...;` of a tuple literal, `x.sin_cos()`, or an `if`/`match`/block whose
//!   every value is one (rewritten to scalar `let`s before the passes), and
//!   `let t = ...;` of one read by its fields (`t.0`, assigned too) or
//!   copied whole (`let u = t;`, `let (a, b) = t;`), and
//!   `x.sin_cos().0` (`translate/fields.rs`);
//! - the scalar methods of one table (`translate/methods.rs`, also the
//!   list in errors): float `sqrt cbrt exp exp2 exp_m1 ln log2 log10 ln_1p
//!   log powf powi sin cos tan asin acos atan atan2 sinh cosh tanh asinh
//!   acosh atanh hypot abs signum copysign min max clamp floor ceil round
//!   trunc fract recip to_radians to_degrees rem_euclid div_euclid mul_add
//!   is_nan is_finite is_infinite is_sign_positive is_sign_negative`,
//!   integer `abs signum min max clamp pow wrapping_add wrapping_sub
//!   wrapping_mul rem_euclid div_euclid is_positive is_negative`
//!   (`std::cmp::max(a, b)`/`min` read as `a.max(b)`), lossless
//!   conversions `f64::from(x)` (as `as`), with Rust's results where C's functions
//!   differ (`cbrt` correctly rounded but for inputs within 2^-100 of a
//!   rounding boundary,
//!   `asinh`'s reciprocal form, `pow` wrapping, `clamp`'s panic), and
//!   `len()` of arrays (a constant: the length their type states);
//! - `f64::consts::PI` and the other `consts`, `MIN`/`MAX`/`EPSILON`/
//!   `MIN_POSITIVE`/`INFINITY`/`NEG_INFINITY`/`NAN` of the scalar types;
//! - calls of helpers by name.
//!
//! Anything else is a compile error at its span that names the construct.
//!
//! ```
//! use parloop_kernels::{translate, FnKind};
//! let f: syn::ItemFn = syn::parse_quote! {
//!     fn update(qold: &[f64; 4], q: &mut [f64; 4], res: &mut [f64; 4], adt: &f64, rms: &mut f64) {
//!         let adti = 1.0 / *adt;
//!         for n in 0..4 {
//!             let del = adti * res[n];
//!             q[n] = qold[n] - del;
//!             res[n] = 0.0;
//!             *rms += del * del;
//!         }
//!     }
//! };
//! let t = translate(&f, FnKind::Kernel).unwrap();
//! assert!(t.source.contains("double del = (adti * res[n]);"));
//! assert!(t.source.contains("(*rms) += (del * del);"));
//! ```
//!
//! # Types and semantics
//!
//! The translator infers every local's type as rustc does for this subset
//! and writes explicit C++ types: float literals in an `f32` context become
//! `1.0f` (no promotion to double), integer literals take their context's
//! type, and `usize` loop indices with literal bounds become `int`. Where
//! C++ differs from Rust, the emitted code follows Rust (release builds):
//! signed `+ - *` and negation wrap, shift amounts are masked, float-to-int
//! `as` saturates (NaN to 0), `f64::min`/`max` ignore a NaN operand (of +0 and -0 Rust leaves the result open), integer
//! `abs` wraps, `%` on floats is `fmod`, `powi` multiplies in LLVM's order.
//! The [`PRELUDE`] holds the helpers.
//!
//! Where Rust panics, the translation does not invoke undefined behaviour:
//! integer division and remainder by zero or `MIN / -1` report Rust's panic
//! message through the prelude's panic record, and the runtime returns it
//! as an error naming the kernel and element. A constant index out of an
//! array's range is a compile error; dynamic indices are checked in
//! `PARLOOP_CHECK` builds (`PL_IX`), and index directly otherwise
//! (`for` variables over literal bounds within the array are never checked).
//!
//! Names: translated functions are `pl_fn_<name>` in C++ ([`fn_cname`]),
//! with a hash for long names; locals keep their names except C++ keywords
//! and header names (a trailing `_`) and names in the generated code's
//! reserved spaces (`pl_`, `PL_`, `PARLOOP`, `__`: prefixed `pl_u_`).

mod emu;
mod lanes;
pub mod loops;
pub mod panic_format;
mod prelude;
mod translate;
mod types;

pub use emu::EMU_HEADER;
pub use lanes::{lane_twin, LaneTwin};
pub use prelude::PRELUDE;
pub use translate::{
    const_cname, cpp_ident, fn_cname, function_id, translate, translate_const, with_debug_asserts, ConstTranslation,
    ConstUse, FnKind, Param, Translation,
};
pub use types::Scalar;
