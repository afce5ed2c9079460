//! C++ names for Rust names, so that nothing a user writes can collide with
//! generated code, a C/C++ keyword or a name from the C/CUDA headers: the
//! `pl_` reserved prefix, a trailing `_` for keywords and header names, and
//! a hash for long or non-ASCII names.
//!
//! Separate because the naming rule is one contract shared by both passes,
//! the loop generator and the runtime (which looks kernels up by
//! [`fn_cname`]).

const CPP_RESERVED: &[&str] = &[
    "alignas",
    "alignof",
    "and",
    "asm",
    "auto",
    "bool",
    "case",
    "catch",
    "char",
    "class",
    "const",
    "constexpr",
    "default",
    "delete",
    "do",
    "double",
    "explicit",
    "export",
    "extern",
    "float",
    "friend",
    "goto",
    "inline",
    "int",
    "long",
    "mutable",
    "namespace",
    "new",
    "noexcept",
    "not",
    "operator",
    "or",
    "private",
    "protected",
    "public",
    "register",
    "short",
    "signed",
    "sizeof",
    "static",
    "switch",
    "template",
    "this",
    "throw",
    "try",
    "typedef",
    "typeid",
    "typename",
    "union",
    "unsigned",
    "using",
    "virtual",
    "void",
    "volatile",
    "wchar_t",
    "xor",
    "NULL",
    // Math functions and CUDA names a Rust identifier could shadow.
    "sqrt",
    "sqrtf",
    "fabs",
    "fabsf",
    "fmin",
    "fmax",
    "fma",
    "pow",
    "exp",
    "log",
    "log10",
    "sin",
    "cos",
    "tan",
    "atan",
    "atan2",
    "floor",
    "ceil",
    "round",
    "hypot",
    "copysign",
    "fmod",
    "min",
    "max",
    "abs",
    "threadIdx",
    "blockIdx",
    "blockDim",
    "gridDim",
    "warpSize",
    "atomicAdd",
    "atomicMin",
    "atomicMax",
    "atomicCAS",
    "prm",
    // Macros and functions of <math.h>, <stdlib.h>, <string.h>, <stdint.h>.
    "NAN",
    "INFINITY",
    "HUGE_VAL",
    "HUGE_VALF",
    "HUGE_VALL",
    "M_PI",
    "M_E",
    "M_SQRT2",
    "M_LN2",
    "M_LN10",
    "isnan",
    "isinf",
    "isfinite",
    "isnormal",
    "signbit",
    "fpclassify",
    "errno",
    "assert",
    "EXIT_SUCCESS",
    "EXIT_FAILURE",
    "RAND_MAX",
    "SIZE_MAX",
    "INT32_MAX",
    "INT32_MIN",
    "INT64_MAX",
    "INT64_MIN",
    "UINT32_MAX",
    "UINT64_MAX",
    "abort",
    "malloc",
    "free",
    "memset",
    "memcpy",
];

/// A C++ identifier for a Rust local or parameter: keywords and names of
/// the C/CUDA headers get a trailing underscore; names in the reserved
/// spaces of generated code (`pl_`, `PL_`, `PARLOOP`, any case, and `__`)
/// and non-ASCII names get the prefix `pl_u_` (generated names never start
/// with it), so no user name can collide with a generated one.
pub fn cpp_ident(name: &str) -> String {
    let name = name.strip_prefix("r#").unwrap_or(name);
    if !name.is_ascii() {
        return format!("pl_u_{:016x}", fnv1a(name.as_bytes()));
    }
    let lower = name.to_ascii_lowercase();
    if lower.starts_with("pl_") || lower.starts_with("parloop") || name.starts_with("__") {
        format!("pl_u_{name}")
    } else if CPP_RESERVED.contains(&name) {
        format!("{name}_")
    } else {
        name.to_owned()
    }
}

/// The C++ name of a translated function (kernel or helper): `pl_fn_` and
/// the Rust name, so that no Rust name (`main`, a C++ keyword, a math
/// function, a prelude or emulator identifier) can collide with anything
/// in a module; names longer than 48 bytes (or not ASCII) keep a short
/// prefix and add a hash of the whole name.
pub fn fn_cname(name: &str) -> String {
    let name = name.strip_prefix("r#").unwrap_or(name);
    if name.is_ascii() && name.len() <= 48 {
        return format!("pl_fn_{name}");
    }
    let short: String = name.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').take(24).collect();
    format!("pl_fn_{short}_{:016x}", fnv1a(name.as_bytes()))
}

/// The C++ name of a module-level constant (`#[parloop::device] const`):
/// `pl_c_` and the Rust name, hashed like [`fn_cname`] when long.
///
/// ```
/// assert_eq!(parloop_kernels::const_cname("WTG2"), "pl_c_WTG2");
/// ```
pub fn const_cname(name: &str) -> String {
    let name = name.strip_prefix("r#").unwrap_or(name);
    if name.is_ascii() && name.len() <= 48 {
        return format!("pl_c_{name}");
    }
    let short: String = name.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').take(24).collect();
    format!("pl_c_{short}_{:016x}", fnv1a(name.as_bytes()))
}

/// A stable 64-bit FNV-1a hash.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}
