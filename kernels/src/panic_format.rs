//! Kernel panic messages that format values (`panic!("rho = {rho:.3}")`,
//! `assert!(x > 0.0, "x = {}", x)`) on the device.
//!
//! On the host the kernel is Rust and Rust formats the message. On the
//! device a panic site's message is a *template*: the format string with
//! each placeholder's argument made an explicit slot (`"rho = {0:.3}"`),
//! and the panic record carries up to [`MAX_VALUES`] scalar values with
//! their types (4 bits each, [`type_code`]). The runtime renders the
//! template with [`render`], formatting each value with Rust's own
//! formatting for its type, so a device panic's message is the host's.
//!
//! The format specs supported are Rust's for scalars: fill and alignment,
//! `+`, `#`, `0`, a literal width and precision, and the types `?`, `e`,
//! `E`, `x`, `X`, `b`, `o`; widths or precisions taken from arguments
//! (`{:1$}`, `{:.*}`) are refused by the translation.

/// Values a device panic record carries.
pub const MAX_VALUES: usize = 4;

/// How a placeholder names its argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ArgRef {
    /// `{}`: the next positional argument.
    Next,
    /// `{2}`.
    Index(usize),
    /// `{name}`: a named argument, or a variable captured by name.
    Name(String),
}

/// A piece of a format string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Piece {
    /// Literal text (escapes resolved).
    Text(String),
    /// A placeholder: its argument and its spec (the text after `:`).
    Value(ArgRef, String),
}

/// Parses a Rust format string into pieces; an error says what is not
/// supported.
pub(crate) fn parse(fmt: &str) -> Result<Vec<Piece>, String> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut chars = fmt.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                text.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                text.push('}');
            }
            '}' => return Err("an unmatched `}` (write `}}` for a brace)".into()),
            '{' => {
                let mut inner = String::new();
                loop {
                    match chars.next() {
                        Some('}') => break,
                        Some(c) => inner.push(c),
                        None => return Err("an unclosed `{` (write `{{` for a brace)".into()),
                    }
                }
                let (arg, spec) = inner.split_once(':').unwrap_or((&inner, ""));
                let arg = arg.trim();
                let arg = if arg.is_empty() {
                    ArgRef::Next
                } else if let Ok(i) = arg.parse() {
                    ArgRef::Index(i)
                } else if arg.chars().all(|c| c.is_alphanumeric() || c == '_') {
                    ArgRef::Name(arg.to_string())
                } else {
                    return Err(format!("`{{{inner}}}` is not a placeholder"));
                };
                Spec::parse(spec)?;
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                pieces.push(Piece::Value(arg, spec.to_string()));
            }
            c => text.push(c),
        }
    }
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Ok(pieces)
}

/// Writes literal text as template text (braces doubled).
pub(crate) fn escape(text: &str) -> String {
    text.replace('{', "{{").replace('}', "}}")
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Align {
    Left,
    Center,
    Right,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Display,
    Debug,
    LowerExp,
    UpperExp,
    LowerHex,
    UpperHex,
    Binary,
    Octal,
}

/// A placeholder's format spec (`>8.3e`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Spec {
    fill: char,
    align: Option<Align>,
    plus: bool,
    alternate: bool,
    zero: bool,
    width: Option<usize>,
    precision: Option<usize>,
    kind: Kind,
}

impl Spec {
    fn parse(s: &str) -> Result<Spec, String> {
        let unsupported = || {
            format!(
                "the format spec `{s}` is not supported in kernels (fill and alignment, `+`, `#`, `0`, a literal \
                 width and precision, and `?`, `e`, `E`, `x`, `X`, `b`, `o` are)"
            )
        };
        let chars: Vec<char> = s.chars().collect();
        let mut i = 0;
        let align_of = |c: char| match c {
            '<' => Some(Align::Left),
            '^' => Some(Align::Center),
            '>' => Some(Align::Right),
            _ => None,
        };
        let (mut fill, mut align) = (' ', None);
        if chars.len() >= 2 && align_of(chars[1]).is_some() {
            (fill, align) = (chars[0], align_of(chars[1]));
            i = 2;
        } else if let Some(a) = chars.first().and_then(|&c| align_of(c)) {
            align = Some(a);
            i = 1;
        }
        let mut flag = |c: char| {
            let yes = chars.get(i) == Some(&c);
            i += usize::from(yes);
            yes
        };
        let plus = flag('+');
        if flag('-') {
            return Err(unsupported());
        }
        let alternate = flag('#');
        let zero = flag('0');
        let number = |i: &mut usize| {
            let start = *i;
            while chars.get(*i).is_some_and(char::is_ascii_digit) {
                *i += 1;
            }
            (*i > start).then(|| chars[start..*i].iter().collect::<String>().parse::<usize>())
        };
        let width = number(&mut i).transpose().map_err(|_| unsupported())?;
        let precision = if chars.get(i) == Some(&'.') {
            i += 1;
            Some(number(&mut i).ok_or_else(unsupported)?.map_err(|_| unsupported())?)
        } else {
            None
        };
        let kind = match chars[i..].iter().collect::<String>().as_str() {
            "" => Kind::Display,
            "?" => Kind::Debug,
            "e" => Kind::LowerExp,
            "E" => Kind::UpperExp,
            "x" => Kind::LowerHex,
            "X" => Kind::UpperHex,
            "b" => Kind::Binary,
            "o" => Kind::Octal,
            _ => return Err(unsupported()),
        };
        Ok(Spec { fill, align, plus, alternate, zero, width, precision, kind })
    }
}

/// The 4-bit code of a value's type in a panic record (0: no value).
pub fn type_code(s: crate::Scalar) -> u64 {
    use crate::Scalar::*;
    match s {
        F32 => 1,
        F64 => 2,
        I32 => 3,
        U32 => 4,
        I64 => 5,
        U64 | Usize => 6,
        Bool => 7,
    }
}

/// A value as the record carries it, decoded.
#[derive(Clone, Copy)]
enum Value {
    F32(f32),
    F64(f64),
    I32(i32),
    U32(u32),
    I64(i64),
    U64(u64),
    Bool(bool),
}

impl Value {
    fn decode(code: u64, bits: i64) -> Option<Value> {
        Some(match code {
            1 => Value::F32(f32::from_bits(bits as u32)),
            2 => Value::F64(f64::from_bits(bits as u64)),
            3 => Value::I32(bits as i32),
            4 => Value::U32(bits as u32),
            5 => Value::I64(bits),
            6 => Value::U64(bits as u64),
            7 => Value::Bool(bits != 0),
            _ => return None,
        })
    }

    /// The value formatted by Rust with `kind` and `precision` (sign,
    /// `#` prefixes and padding are added by [`pad`]).
    fn core(self, kind: Kind, precision: Option<usize>) -> String {
        macro_rules! float {
            ($x:expr) => {
                match (kind, precision) {
                    (Kind::Debug, Some(p)) => format!("{:.*?}", p, $x),
                    (Kind::Debug, None) => format!("{:?}", $x),
                    (Kind::LowerExp, Some(p)) => format!("{:.*e}", p, $x),
                    (Kind::LowerExp, None) => format!("{:e}", $x),
                    (Kind::UpperExp, Some(p)) => format!("{:.*E}", p, $x),
                    (Kind::UpperExp, None) => format!("{:E}", $x),
                    (_, Some(p)) => format!("{:.*}", p, $x),
                    (_, None) => format!("{}", $x),
                }
            };
        }
        macro_rules! int {
            ($x:expr) => {
                match (kind, precision) {
                    (Kind::LowerExp, Some(p)) => format!("{:.*e}", p, $x),
                    (Kind::LowerExp, None) => format!("{:e}", $x),
                    (Kind::UpperExp, Some(p)) => format!("{:.*E}", p, $x),
                    (Kind::UpperExp, None) => format!("{:E}", $x),
                    (Kind::LowerHex, _) => format!("{:x}", $x),
                    (Kind::UpperHex, _) => format!("{:X}", $x),
                    (Kind::Binary, _) => format!("{:b}", $x),
                    (Kind::Octal, _) => format!("{:o}", $x),
                    _ => format!("{}", $x),
                }
            };
        }
        match self {
            Value::F32(x) => float!(x),
            Value::F64(x) => float!(x),
            Value::I32(x) => int!(x),
            Value::U32(x) => int!(x),
            Value::I64(x) => int!(x),
            Value::U64(x) => int!(x),
            Value::Bool(b) => b.to_string(),
        }
    }
}

/// `core` with the spec's sign, prefix and padding, as Rust pads numbers
/// (right-aligned by default; `0` pads after the sign) and `bool`s (as
/// text: left-aligned by default, no sign).
fn pad(v: Value, spec: &Spec) -> String {
    let mut body = v.core(spec.kind, spec.precision);
    let numeric = !matches!(v, Value::Bool(_));
    let mut sign = String::new();
    if numeric {
        if let Some(rest) = body.strip_prefix('-') {
            sign.push('-');
            body = rest.to_string();
        } else if spec.plus && body != "NaN" {
            sign.push('+');
        }
        if spec.alternate {
            match spec.kind {
                Kind::LowerHex | Kind::UpperHex => sign.push_str("0x"),
                Kind::Binary => sign.push_str("0b"),
                Kind::Octal => sign.push_str("0o"),
                _ => {}
            }
        }
    }
    let len = sign.chars().count() + body.chars().count();
    let width = spec.width.unwrap_or(0);
    if len >= width {
        return sign + &body;
    }
    let gap = width - len;
    if numeric && spec.zero {
        return sign + &"0".repeat(gap) + &body;
    }
    let align = spec.align.unwrap_or(if numeric { Align::Right } else { Align::Left });
    let (before, after) = match align {
        Align::Left => (0, gap),
        Align::Right => (gap, 0),
        Align::Center => (gap / 2, gap - gap / 2),
    };
    let fill = |n: usize| std::iter::repeat_n(spec.fill, n).collect::<String>();
    fill(before) + &sign + &body + &fill(after)
}

/// Renders a site's template with the record's values: `types` holds a
/// 4-bit [`type_code`] per slot, `values` their bits. A slot the record
/// does not hold renders as `?` (a record from other code).
pub fn render(template: &str, types: u64, values: &[i64]) -> String {
    let Ok(pieces) = parse(template) else { return template.to_string() };
    let mut out = String::new();
    let mut next = 0;
    for p in pieces {
        match p {
            Piece::Text(t) => out.push_str(&t),
            Piece::Value(arg, spec) => {
                let slot = match arg {
                    ArgRef::Index(i) => i,
                    ArgRef::Next => {
                        next += 1;
                        next - 1
                    }
                    ArgRef::Name(_) => usize::MAX,
                };
                let code = if slot < MAX_VALUES { (types >> (4 * slot)) & 0xf } else { 0 };
                match (Value::decode(code, values.get(slot).copied().unwrap_or(0)), Spec::parse(&spec)) {
                    (Some(v), Ok(spec)) => out.push_str(&pad(v, &spec)),
                    _ => out.push('?'),
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `render` against Rust's own formatting, spec by spec and value by
    /// value.
    macro_rules! same_as_rust {
        ($($spec:literal),* ; $code:expr, $bits:expr, $v:expr) => {{
            $(
                let ours = render(concat!("[{0", $spec, "}]"), $code, &[$bits]);
                let rust = format!(concat!("[{0", $spec, "}]"), $v);
                assert_eq!(ours, rust, "spec `{}` value {:?}", $spec, $v);
            )*
        }};
    }

    #[test]
    fn floats_render_as_rust_formats_them() {
        for v in [0.0f64, -0.0, 1.0, -2.5, 0.1, 1e300, -1e-300, 123456.789, f64::NAN, f64::INFINITY, f64::NEG_INFINITY]
        {
            same_as_rust!("", ":?", ":.3", ":e", ":E", ":.2e", ":+", ":+.1", ":10", ":<10", ":^10", ":>10", ":*^12.2",
                ":010.3", ":+010", ":#?", ":.0", ":3", ":-<9?"; 2, v.to_bits() as i64, v);
            let f = v as f32;
            same_as_rust!("", ":?", ":.3", ":e", ":+", ":08.2", ":>7"; 1, f.to_bits() as i64, f);
        }
    }

    #[test]
    fn integers_and_bools_render_as_rust_formats_them() {
        for v in [0i32, 1, -1, 42, i32::MIN, i32::MAX] {
            same_as_rust!("", ":?", ":5", ":<5", ":+", ":05", ":x", ":#x", ":X", ":#010x", ":b", ":#b", ":o", ":e",
                ":.2e", ":E"; 3, v as i64, v);
            let u = v as u32;
            same_as_rust!("", ":x", ":#X", ":b", ":+"; 4, u as i64, u);
            let w = v as i64 * 3_000_000_000;
            same_as_rust!("", ":x", ":+020", ":e"; 5, w, w);
            let x = w as u64;
            same_as_rust!("", ":x", ":o"; 6, x as i64, x);
        }
        for b in [true, false] {
            same_as_rust!("", ":?", ":6", ":>6", ":^7", ":*<8"; 7, b as i64, b);
        }
    }

    #[test]
    fn templates_hold_text_slots_and_escapes() {
        let types = 2 | 3 << 4;
        let values = [2.5f64.to_bits() as i64, -7, 0, 0];
        assert_eq!(render("x = {0:.2}, i = {1} {{ok}}", types, &values), "x = 2.50, i = -7 {ok}");
        assert_eq!(render("{} and {}", types, &values), "2.5 and -7");
        // A slot the record does not fill.
        assert_eq!(render("{2}", types, &values), "?");
    }

    #[test]
    fn unsupported_specs_and_placeholders_are_refused_with_the_reason() {
        for bad in ["{:1$}", "{:.*}", "{:-}", "{:q}", "{", "}", "{a b}"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse("a {x:>4} {} {1}").unwrap(),
            vec![
                Piece::Text("a ".into()),
                Piece::Value(ArgRef::Name("x".into()), ">4".into()),
                Piece::Text(" ".into()),
                Piece::Value(ArgRef::Next, String::new()),
                Piece::Text(" ".into()),
                Piece::Value(ArgRef::Index(1), String::new()),
            ]
        );
    }
}
