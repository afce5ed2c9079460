//! Types of the kernel subset and their inference, as rustc does it for the
//! subset: literals start as integer or float variables, operations unify
//! their operands, and unconstrained variables default to `i32` and `f64`.

use proc_macro2::Span;

/// A scalar type of the subset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scalar {
    /// `f32`, C++ `float`.
    F32,
    /// `f64`, C++ `double`.
    F64,
    /// `i32`, C++ `int`.
    I32,
    /// `u32`, C++ `unsigned int`.
    U32,
    /// `i64`, C++ `long long`.
    I64,
    /// `u64`, C++ `unsigned long long`.
    U64,
    /// `usize`: C++ `int` where the values are loop indices with bounds
    /// that fit, `unsigned long long` otherwise.
    Usize,
    /// `bool`.
    Bool,
}

impl Scalar {
    /// Parses a Rust type name.
    pub fn from_name(name: &str) -> Option<Scalar> {
        Some(match name {
            "f32" => Scalar::F32,
            "f64" => Scalar::F64,
            "i32" => Scalar::I32,
            "u32" => Scalar::U32,
            "i64" => Scalar::I64,
            "u64" => Scalar::U64,
            "usize" => Scalar::Usize,
            "bool" => Scalar::Bool,
            _ => return None,
        })
    }

    /// The Rust name.
    pub fn rust(self) -> &'static str {
        match self {
            Scalar::F32 => "f32",
            Scalar::F64 => "f64",
            Scalar::I32 => "i32",
            Scalar::U32 => "u32",
            Scalar::I64 => "i64",
            Scalar::U64 => "u64",
            Scalar::Usize => "usize",
            Scalar::Bool => "bool",
        }
    }

    /// The C++ type (usize as the wide form; see [`Scalar::Usize`]).
    pub fn cpp(self) -> &'static str {
        match self {
            Scalar::F32 => "float",
            Scalar::F64 => "double",
            Scalar::I32 => "int",
            Scalar::U32 => "unsigned int",
            Scalar::I64 => "long long",
            Scalar::U64 | Scalar::Usize => "unsigned long long",
            Scalar::Bool => "bool",
        }
    }

    /// Whether the type is `f32` or `f64`.
    pub fn is_float(self) -> bool {
        matches!(self, Scalar::F32 | Scalar::F64)
    }

    /// Whether the type is an integer.
    pub fn is_int(self) -> bool {
        !self.is_float() && self != Scalar::Bool
    }

    /// Whether the type is a signed integer.
    pub fn is_signed_int(self) -> bool {
        matches!(self, Scalar::I32 | Scalar::I64)
    }

    /// Bits of an integer type (usize: 64).
    pub fn bits(self) -> u32 {
        match self {
            Scalar::I32 | Scalar::U32 | Scalar::F32 => 32,
            _ => 64,
        }
    }
}

/// The length of an array whose length the translation cannot see: a
/// module-level constant declared elsewhere (`#[parloop::device] const`),
/// whose C++ definition carries the real length. Unifies with any length.
pub const UNKNOWN_LEN: usize = usize::MAX;

/// The type of an expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ty {
    /// A scalar, through an inference variable.
    Var(usize),
    /// `()`.
    Unit,
    /// An expression that never yields (return, break, continue).
    Never,
    /// `[T; N]`.
    Array(Box<Ty>, usize),
    /// `&T` or `&mut T`.
    Ref(Box<Ty>, bool),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Any,
    Int,
    Float,
    Known(Scalar),
}

/// Inference variables with union-find.
#[derive(Default)]
pub struct Vars {
    parent: Vec<usize>,
    kind: Vec<Kind>,
    /// Per class root: whether a helper's signature gives the class its
    /// type (a call's result or argument), which the translation cannot
    /// see. See [`Vars::assumed`].
    opaque: Vec<bool>,
    /// Per class root: whether an operation is computed at its type.
    operated: Vec<bool>,
}

/// Why two types do not unify.
pub type Mismatch = String;

impl Vars {
    fn fresh(&mut self, kind: Kind) -> Ty {
        self.parent.push(self.parent.len());
        self.kind.push(kind);
        self.opaque.push(false);
        self.operated.push(false);
        Ty::Var(self.parent.len() - 1)
    }

    /// The type of a helper's result or of one of its parameters: unknown
    /// here (rustc checks the call against the helper).
    pub fn opaque(&mut self) -> Ty {
        let t = self.fresh(Kind::Any);
        if let Ty::Var(v) = t {
            self.opaque[v] = true;
        }
        t
    }

    /// Records that an operation (arithmetic, a comparison, a method) is
    /// computed at `t`'s type.
    pub fn mark_operated(&mut self, t: &Ty) {
        if let Ty::Var(v) = self.deref(t) {
            let r = self.find(v);
            self.operated[r] = true;
        }
    }

    /// The type the translation assumes for `t` where it only guesses: a
    /// scalar (or a reference to one) whose class is still an unsuffixed
    /// literal's, computed with (an operation at its type), and tied to a
    /// helper's result or parameter, whose real type (`f32`, `i64`, ...)
    /// rustc knows and the translation does not. The default (`f64`,
    /// `i32`) is then pinned in the host function for rustc to check.
    /// `None` where the type is known, or is only passed along (a literal
    /// argument converts exactly at the call).
    pub fn assumed(&mut self, t: &Ty) -> Option<Scalar> {
        let Ty::Var(v) = self.deref(t) else { return None };
        let r = self.find(v);
        if !(self.opaque[r] && self.operated[r]) {
            return None;
        }
        match self.kind[r] {
            Kind::Int => Some(Scalar::I32),
            Kind::Float => Some(Scalar::F64),
            _ => None,
        }
    }

    /// A variable of unknown scalar type.
    pub fn any(&mut self) -> Ty {
        self.fresh(Kind::Any)
    }

    /// The type of an unsuffixed integer literal.
    pub fn int(&mut self) -> Ty {
        self.fresh(Kind::Int)
    }

    /// The type of an unsuffixed float literal.
    pub fn float(&mut self) -> Ty {
        self.fresh(Kind::Float)
    }

    /// A known scalar type.
    pub fn known(&mut self, s: Scalar) -> Ty {
        self.fresh(Kind::Known(s))
    }

    fn find(&mut self, v: usize) -> usize {
        let mut r = v;
        while self.parent[r] != r {
            r = self.parent[r];
        }
        let mut v = v;
        while self.parent[v] != r {
            let next = self.parent[v];
            self.parent[v] = r;
            v = next;
        }
        r
    }

    fn describe(k: Kind) -> String {
        match k {
            Kind::Any => "a value".into(),
            Kind::Int => "an integer".into(),
            Kind::Float => "a float".into(),
            Kind::Known(s) => format!("`{}`", s.rust()),
        }
    }

    fn merge(a: Kind, b: Kind) -> Result<Kind, Mismatch> {
        use Kind::*;
        let fail = || Err(format!("mismatched types: expected {}, found {}", Self::describe(a), Self::describe(b)));
        match (a, b) {
            (Any, k) | (k, Any) => Ok(k),
            (Int, Int) => Ok(Int),
            (Float, Float) => Ok(Float),
            (Int, Known(s)) | (Known(s), Int) if s.is_int() => Ok(Known(s)),
            (Float, Known(s)) | (Known(s), Float) if s.is_float() => Ok(Known(s)),
            (Known(x), Known(y)) if x == y => Ok(Known(x)),
            _ => fail(),
        }
    }

    /// Makes `a` and `b` the same type.
    pub fn unify(&mut self, a: &Ty, b: &Ty) -> Result<(), Mismatch> {
        match (a, b) {
            (Ty::Never, _) | (_, Ty::Never) => Ok(()),
            (Ty::Unit, Ty::Unit) => Ok(()),
            (Ty::Var(x), Ty::Var(y)) => {
                let (rx, ry) = (self.find(*x), self.find(*y));
                if rx != ry {
                    let k = Self::merge(self.kind[rx], self.kind[ry])?;
                    self.parent[ry] = rx;
                    self.kind[rx] = k;
                    self.opaque[rx] |= self.opaque[ry];
                    self.operated[rx] |= self.operated[ry];
                }
                Ok(())
            }
            (Ty::Array(x, n), Ty::Array(y, m)) if n == m || *n == UNKNOWN_LEN || *m == UNKNOWN_LEN => self.unify(x, y),
            (Ty::Ref(x, _), Ty::Ref(y, _)) => self.unify(x, y),
            // `&f64` operands auto-dereference, as Rust's `impl Add<f64> for &f64`.
            (Ty::Ref(x, _), y @ Ty::Var(_)) | (y @ Ty::Var(_), Ty::Ref(x, _)) => self.unify(x, y),
            _ => Err(format!("mismatched types: {} and {}", self.show(a), self.show(b))),
        }
    }

    /// Constrains `t` to be a float (for float-only methods).
    pub fn require_float(&mut self, t: &Ty) -> Result<(), Mismatch> {
        let t = self.deref(t);
        let f = self.float();
        self.unify(&t, &f)
    }

    /// Constrains `t` to be an integer.
    pub fn require_int(&mut self, t: &Ty) -> Result<(), Mismatch> {
        let t = self.deref(t);
        let i = self.int();
        self.unify(&t, &i)
    }

    /// `t` with references removed.
    pub fn deref(&self, t: &Ty) -> Ty {
        match t {
            Ty::Ref(inner, _) => self.deref(inner),
            other => other.clone(),
        }
    }

    /// The scalar of `t` once inference is done (defaults applied), if `t`
    /// is a scalar.
    pub fn scalar(&mut self, t: &Ty) -> Option<Scalar> {
        match self.deref(t) {
            Ty::Var(v) => {
                let r = self.find(v);
                match self.kind[r] {
                    Kind::Known(s) => Some(s),
                    Kind::Int => Some(Scalar::I32),
                    Kind::Float => Some(Scalar::F64),
                    Kind::Any => None,
                }
            }
            _ => None,
        }
    }

    /// The scalar of `t` if already determined (no defaults).
    pub fn known_scalar(&mut self, t: &Ty) -> Option<Scalar> {
        match self.deref(t) {
            Ty::Var(v) => {
                let r = self.find(v);
                match self.kind[r] {
                    Kind::Known(s) => Some(s),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// Whether `t` is (so far) a float type or float literal.
    pub fn is_float(&mut self, t: &Ty) -> bool {
        match self.deref(t) {
            Ty::Var(v) => {
                let r = self.find(v);
                matches!(self.kind[r], Kind::Float) || matches!(self.kind[r], Kind::Known(s) if s.is_float())
            }
            _ => false,
        }
    }

    /// A readable rendering of a type.
    pub fn show(&mut self, t: &Ty) -> String {
        match t {
            Ty::Var(v) => {
                let r = self.find(*v);
                match self.kind[r] {
                    Kind::Known(s) => s.rust().into(),
                    k => Self::describe(k),
                }
            }
            Ty::Unit => "()".into(),
            Ty::Never => "!".into(),
            Ty::Array(e, n) if *n == UNKNOWN_LEN => format!("[{}; _]", self.show(e)),
            Ty::Array(e, n) => format!("[{}; {n}]", self.show(e)),
            Ty::Ref(e, m) => format!("&{}{}", if *m { "mut " } else { "" }, self.show(e)),
        }
    }
}

/// A translation error at a span.
pub fn error(span: Span, msg: impl std::fmt::Display) -> syn::Error {
    syn::Error::new(span, msg)
}
