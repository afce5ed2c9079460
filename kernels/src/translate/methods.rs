//! The methods kernels may call on scalars, in one table that type
//! inference, the C++ emission and the lane-wise twin all read: a method is
//! supported by the three or by none, and the list in error messages is
//! the table's.
//!
//! Each entry says what the receiver may be, what the arguments are and
//! what the call yields; the C++ for each is in `emit/expr.rs`, written
//! with Rust's definition beside it where C's function differs (`asinh`,
//! `rem_euclid`, `clamp`'s panic, `pow`'s wrapping; `wrapping_add` is the
//! translation's `+`, which wraps in every build as release Rust's does).

/// What a method's receiver may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Receiver {
    Float,
    Int,
    SignedInt,
    /// A float or an integer.
    Number,
    /// A float or a signed integer.
    SignedNumber,
}

/// A method's arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Args {
    /// This many arguments of the receiver's type.
    Same(usize),
    /// One `i32` (`powi`).
    I32,
    /// One `u32` (`pow`).
    U32,
}

/// What a method yields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Yields {
    /// A value of the receiver's type.
    Receiver,
    Bool,
}

/// One supported method.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Method {
    pub(crate) name: &'static str,
    pub(crate) receiver: Receiver,
    pub(crate) args: Args,
    pub(crate) yields: Yields,
}

const fn m(name: &'static str, receiver: Receiver, args: Args, yields: Yields) -> Method {
    Method { name, receiver, args, yields }
}

const fn float1(name: &'static str) -> Method {
    m(name, Receiver::Float, Args::Same(0), Yields::Receiver)
}

const fn float2(name: &'static str) -> Method {
    m(name, Receiver::Float, Args::Same(1), Yields::Receiver)
}

const fn float_test(name: &'static str) -> Method {
    m(name, Receiver::Float, Args::Same(0), Yields::Bool)
}

/// Every method kernels may call on a scalar (`len` of arrays and the
/// range adaptors of `for` are not scalar methods and are handled apart).
pub(crate) const METHODS: &[Method] = &[
    m("abs", Receiver::SignedNumber, Args::Same(0), Yields::Receiver),
    m("signum", Receiver::SignedNumber, Args::Same(0), Yields::Receiver),
    m("min", Receiver::Number, Args::Same(1), Yields::Receiver),
    m("max", Receiver::Number, Args::Same(1), Yields::Receiver),
    m("clamp", Receiver::Number, Args::Same(2), Yields::Receiver),
    m("pow", Receiver::Int, Args::U32, Yields::Receiver),
    m("wrapping_add", Receiver::Int, Args::Same(1), Yields::Receiver),
    m("wrapping_sub", Receiver::Int, Args::Same(1), Yields::Receiver),
    m("wrapping_mul", Receiver::Int, Args::Same(1), Yields::Receiver),
    m("is_positive", Receiver::SignedInt, Args::Same(0), Yields::Bool),
    m("is_negative", Receiver::SignedInt, Args::Same(0), Yields::Bool),
    float1("sqrt"),
    float1("cbrt"),
    float1("exp"),
    float1("exp2"),
    float1("exp_m1"),
    float1("ln"),
    float1("log2"),
    float1("log10"),
    float1("ln_1p"),
    float1("sin"),
    float1("cos"),
    float1("tan"),
    float1("asin"),
    float1("acos"),
    float1("atan"),
    float1("sinh"),
    float1("cosh"),
    float1("tanh"),
    float1("asinh"),
    float1("acosh"),
    float1("atanh"),
    float1("floor"),
    float1("ceil"),
    float1("round"),
    float1("trunc"),
    float1("fract"),
    float1("recip"),
    float1("to_radians"),
    float1("to_degrees"),
    float2("powf"),
    float2("atan2"),
    float2("hypot"),
    float2("copysign"),
    float2("log"),
    m("rem_euclid", Receiver::Number, Args::Same(1), Yields::Receiver),
    m("div_euclid", Receiver::Number, Args::Same(1), Yields::Receiver),
    m("mul_add", Receiver::Float, Args::Same(2), Yields::Receiver),
    m("powi", Receiver::Float, Args::I32, Yields::Receiver),
    float_test("is_nan"),
    float_test("is_finite"),
    float_test("is_infinite"),
    float_test("is_sign_positive"),
    float_test("is_sign_negative"),
];

/// The entry for `name`, if kernels support it.
pub(crate) fn method(name: &str) -> Option<&'static Method> {
    METHODS.iter().find(|m| m.name == name)
}

/// The supported methods, for error messages.
pub(crate) fn supported() -> String {
    let list = |keep: fn(&Method) -> bool| METHODS.iter().filter(|m| keep(m)).map(|m| m.name).collect::<Vec<_>>();
    format!(
        "floats: {}; integers: {}; arrays: len",
        list(|m| m.receiver != Receiver::Int && m.receiver != Receiver::SignedInt).join(" "),
        list(|m| m.receiver != Receiver::Float).join(" "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_listed() {
        for (i, a) in METHODS.iter().enumerate() {
            assert!(METHODS[i + 1..].iter().all(|b| b.name != a.name), "`{}` twice", a.name);
        }
        let s = supported();
        assert!(s.contains("clamp") && s.contains("asinh") && s.contains("pow ") && s.contains("is_finite"), "{s}");
        assert!(method("clamp").is_some() && method("sin_cos").is_none());
    }
}
