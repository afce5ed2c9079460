//! Numeric literals, both ways: the values of the source's integer literals
//! (loop bounds, constant indices, literal divisors), and the C++ text of a
//! literal or of a scalar type's constant (`f64::consts::PI`, `i32::MIN`)
//! that keeps its Rust type (`1.0f`, `4294967295u`, `(-2147483647 - 1)`).
//!
//! Separate because the formatting rules are the same wherever a number is
//! written, and independent of the passes that ask for them.

use syn::{Expr, ExprLit, Lit};

use crate::types::Scalar;

/// The value of an integer literal (through parentheses).
pub(super) fn int_literal_value(e: &Expr) -> Option<u128> {
    match e {
        Expr::Lit(ExprLit { lit: Lit::Int(i), .. }) => i.base10_parse::<u128>().ok(),
        Expr::Paren(p) => int_literal_value(&p.expr),
        Expr::Group(g) => int_literal_value(&g.expr),
        _ => None,
    }
}

pub(super) fn literal_fits_i32(e: &Expr) -> bool {
    match e {
        Expr::Lit(ExprLit { lit: Lit::Int(i), .. }) => i.base10_parse::<i64>().is_ok_and(|v| v < i32::MAX as i64),
        Expr::Paren(p) => literal_fits_i32(&p.expr),
        _ => false,
    }
}

/// Constants of the scalar types: `f64::consts::PI`, `i32::MAX`, ...
pub(super) fn constant(path: &syn::Path) -> Option<(Scalar, String)> {
    let segs: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
    let segs = match segs.as_slice() {
        ["std" | "core", rest @ ..] => rest,
        rest => rest,
    };
    let (ty, name) = match segs {
        [ty, "consts", name] => (Scalar::from_name(ty)?, *name),
        [ty, name] => (Scalar::from_name(ty)?, *name),
        _ => return None,
    };
    let f64_consts = |n: &str| -> Option<f64> {
        use std::f64::consts::*;
        Some(match n {
            "PI" => PI,
            "TAU" => TAU,
            "E" => E,
            "SQRT_2" => SQRT_2,
            "FRAC_1_SQRT_2" => FRAC_1_SQRT_2,
            "LN_2" => LN_2,
            "LN_10" => LN_10,
            "LOG2_E" => LOG2_E,
            "LOG10_E" => LOG10_E,
            "LOG2_10" => LOG2_10,
            "LOG10_2" => LOG10_2,
            "FRAC_PI_2" => FRAC_PI_2,
            "FRAC_PI_3" => FRAC_PI_3,
            "FRAC_PI_4" => FRAC_PI_4,
            "FRAC_PI_6" => FRAC_PI_6,
            "FRAC_PI_8" => FRAC_PI_8,
            "FRAC_1_PI" => FRAC_1_PI,
            "FRAC_2_PI" => FRAC_2_PI,
            "FRAC_2_SQRT_PI" => FRAC_2_SQRT_PI,
            _ => return None,
        })
    };
    let is_const_path = segs.len() == 3;
    // Infinities and NaN have no literal: their bits, in a constant
    // expression both g++ and NVRTC accept (module-level constants too).
    let special = |bits64: u64, bits32: u32| match ty {
        Scalar::F64 => Some(format!("__builtin_bit_cast(double, {bits64:#x}ull)")),
        Scalar::F32 => Some(format!("__builtin_bit_cast(float, {bits32:#x}u)")),
        _ => None,
    };
    let text = match (ty, name) {
        (Scalar::F64 | Scalar::F32, "INFINITY") if !is_const_path => {
            special(f64::INFINITY.to_bits(), f32::INFINITY.to_bits())?
        }
        (Scalar::F64 | Scalar::F32, "NEG_INFINITY") if !is_const_path => {
            special(f64::NEG_INFINITY.to_bits(), f32::NEG_INFINITY.to_bits())?
        }
        (Scalar::F64 | Scalar::F32, "NAN") if !is_const_path => special(f64::NAN.to_bits(), f32::NAN.to_bits())?,
        _ => match ty {
            Scalar::F64 if is_const_path => format!("{:e}", f64_consts(name)?),
            Scalar::F32 if is_const_path => format!("{:e}f", f64_consts(name)? as f32),
            Scalar::F64 => format!(
                "{:e}",
                match name {
                    "MAX" => f64::MAX,
                    "MIN" => f64::MIN,
                    "EPSILON" => f64::EPSILON,
                    "MIN_POSITIVE" => f64::MIN_POSITIVE,
                    _ => return None,
                }
            ),
            Scalar::F32 => format!(
                "{:e}f",
                match name {
                    "MAX" => f32::MAX,
                    "MIN" => f32::MIN,
                    "EPSILON" => f32::EPSILON,
                    "MIN_POSITIVE" => f32::MIN_POSITIVE,
                    _ => return None,
                }
            ),
            s if s.is_int() && !is_const_path => int_limit(s, name)?,
            _ => return None,
        },
    };
    Some((ty, text))
}

pub(super) fn int_limit(s: Scalar, name: &str) -> Option<String> {
    Some(match (s, name) {
        (Scalar::I32, "MAX") => "2147483647".into(),
        (Scalar::I32, "MIN") => "(-2147483647 - 1)".into(),
        (Scalar::U32, "MAX") => "4294967295u".into(),
        (Scalar::U32, "MIN") => "0u".into(),
        (Scalar::I64, "MAX") => "9223372036854775807ll".into(),
        (Scalar::I64, "MIN") => "(-9223372036854775807ll - 1)".into(),
        (Scalar::U64 | Scalar::Usize, "MAX") => "18446744073709551615ull".into(),
        (Scalar::U64 | Scalar::Usize, "MIN") => "0ull".into(),
        _ => return None,
    })
}

pub(super) fn int_literal(v: u128, s: Scalar) -> String {
    match s {
        Scalar::I32 | Scalar::Usize if v <= i32::MAX as u128 => format!("{v}"),
        Scalar::U32 => format!("{v}u"),
        Scalar::I64 => format!("{v}ll"),
        _ => format!("{v}ull"),
    }
}

pub(super) fn negative_int_literal(i: &syn::LitInt, s: Scalar) -> String {
    let v: u128 = i.base10_parse().unwrap_or(0);
    match s {
        Scalar::I32 if v == 1 << 31 => "(-2147483647 - 1)".into(),
        Scalar::I64 if v == 1 << 63 => "(-9223372036854775807ll - 1)".into(),
        _ => format!("(-{})", int_literal(v, s)),
    }
}

pub(super) fn float_literal(digits: &str, s: Scalar) -> String {
    let mut d = digits.to_string();
    if !d.contains(['.', 'e', 'E']) {
        d.push_str(".0");
    }
    if d.ends_with('.') {
        d.push('0');
    }
    if s == Scalar::F32 {
        d.push('f');
    }
    d
}
