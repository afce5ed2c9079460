//! Vector operations on dats, as parloop loops: they run on every backend
//! and, under MPI, over the owned entities with all-reduced dots.
//!
//! Reductions (`dot`, `norm2`) are deterministic run to run on every
//! backend: `seq` adds in entity order; `threads` adds fixed chunks of
//! entities and combines their partial sums in chunk order (independent of
//! the thread count and of scheduling); the device backends add per thread,
//! then in a fixed-shape tree per block, then the blocks' partials in one
//! block (fixed for a given block size). The backends do not agree bitwise with
//! each other, since they group the additions differently.

use super::kernels::{VecKernels, MAX_DIM};
use super::Real;
use crate::decl::{Dat, Global};
use crate::error::{Error, Result};
use crate::kernel::Kernel;
use crate::runtime::Runtime;
use crate::types::Access;

/// A scalar global holding `value`, named after the operation and its role.
fn scalar<T: Real>(rt: &Runtime, op: &str, role: &str, value: T) -> Result<Global<T>> {
    let n = rt.names.number();
    rt.internal_global(&format!("{op}#{n}:{role}"), &[value])
}

/// Checks that `dats` (with their roles in `op`) share one set and one
/// dim, and returns the kernels for it.
pub(crate) fn kernels_for<T: Real>(op: &str, dats: &[(&str, &Dat<T>)]) -> Result<&'static VecKernels> {
    let (role0, first) = dats[0];
    for &(role, d) in &dats[1..] {
        if d.set() != first.set() || d.dim() != first.dim() {
            return Err(Error::Incompatible {
                op: op.into(),
                reason: format!(
                    "{role} is dat `{}` on set `{}` with dim {}, but {role0} is dat `{}` on set `{}` with dim {}; \
                     they must share the set and the dim",
                    d.name(),
                    d.set().name(),
                    d.dim(),
                    first.name(),
                    first.set().name(),
                    first.dim()
                ),
            });
        }
    }
    T::kernels(first.dim()).ok_or_else(|| Error::Incompatible {
        op: op.into(),
        reason: format!(
            "dat `{}` has dim {}; vector operations support dims 1 to {MAX_DIM}",
            first.name(),
            first.dim()
        ),
    })
}

/// [`kernels_for`] of a public operation, agreed across the ranks before
/// it runs ([`Set::agreed`](crate::Set)): an error on one rank is one on
/// every rank.
fn agreed_kernels<T: Real>(op: &str, dats: &[(&str, &Dat<T>)]) -> Result<&'static VecKernels> {
    agreed_on(op, kernels_for(op, dats), dats)
}

/// `local`, agreed across the ranks over the dats' sets
/// ([`Set::agreed_among`](crate::Set)).
fn agreed_on<T: Real, R>(op: &str, local: Result<R>, dats: &[(&str, &Dat<T>)]) -> Result<R> {
    crate::Set::agreed_among(dats.iter().map(|(_, d)| d.set()), op, local, "")
}

/// The error of `w = x op y` with all three one dat.
fn all_one_dat<T: Real>(op: &str, w: &Dat<T>, instead: &str) -> Error {
    Error::Incompatible { op: op.into(), reason: format!("w, x and y are all dat `{}`; {instead}", w.name()) }
}

impl Runtime {
    fn vec_loop<T: Real>(&self, kernel: &'static Kernel, on: &Dat<T>, args: &[crate::Arg]) -> Result<()> {
        self.par_loop(kernel, on.set(), args)
    }

    /// `y = alpha x + y`, on the owned entities of `y`'s set. `x` and `y`
    /// share set and dim (1 to 4); `y` may be `x`.
    ///
    /// ```
    /// # let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// # let s = rt.set("s", 2)?;
    /// let x = rt.dat("x", &s, 1, vec![1.0, 2.0])?;
    /// let y = rt.dat("y", &s, 1, vec![10.0, 20.0])?;
    /// rt.axpy(3.0, &x, &y)?;
    /// assert_eq!(y.values()?, vec![13.0, 26.0]);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn axpy<T: Real>(&self, alpha: T, x: &Dat<T>, y: &Dat<T>) -> Result<()> {
        let k = agreed_kernels("axpy", &[("y", y), ("x", x)])?;
        if x.id() == y.id() {
            return self.scale(alpha + T::ONE, y);
        }
        let a = scalar(self, "axpy", "alpha", alpha)?;
        self.vec_loop(k.axpy, y, &[a.arg(Access::READ), x.arg(Access::READ), y.arg(Access::RW)])
    }

    /// `y = alpha x + beta y`. `x` and `y` share set and dim; `y` may be
    /// `x`.
    ///
    /// ```
    /// # let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// # let s = rt.set("s", 2)?;
    /// let x = rt.dat("x", &s, 1, vec![1.0, 2.0])?;
    /// let y = rt.dat("y", &s, 1, vec![10.0, 20.0])?;
    /// rt.axpby(3.0, &x, 0.5, &y)?;
    /// assert_eq!(y.values()?, vec![8.0, 16.0]);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn axpby<T: Real>(&self, alpha: T, x: &Dat<T>, beta: T, y: &Dat<T>) -> Result<()> {
        let k = agreed_kernels("axpby", &[("y", y), ("x", x)])?;
        if x.id() == y.id() {
            return self.scale(alpha + beta, y);
        }
        let a = scalar(self, "axpby", "alpha", alpha)?;
        let b = scalar(self, "axpby", "beta", beta)?;
        self.vec_loop(k.axpby, y, &[a.arg(Access::READ), x.arg(Access::READ), b.arg(Access::READ), y.arg(Access::RW)])
    }

    /// `y = alpha y`.
    ///
    /// ```
    /// # let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// # let s = rt.set("s", 2)?;
    /// let y = rt.dat("y", &s, 1, vec![1.0, -2.0])?;
    /// rt.scale(2.0, &y)?;
    /// assert_eq!(y.values()?, vec![2.0, -4.0]);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn scale<T: Real>(&self, alpha: T, y: &Dat<T>) -> Result<()> {
        let k = agreed_kernels("scale", &[("y", y)])?;
        let a = scalar(self, "scale", "alpha", alpha)?;
        self.vec_loop(k.scale, y, &[a.arg(Access::READ), y.arg(Access::RW)])
    }

    /// The dot product `x . y` over the owned entities (all-reduced under
    /// MPI), every component of every entity. Deterministic run to run on
    /// every backend (see the module documentation for the order).
    ///
    /// ```
    /// # let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// # let s = rt.set("s", 2)?;
    /// let x = rt.dat("x", &s, 2, vec![1.0, 2.0, 3.0, 4.0])?;
    /// assert_eq!(rt.dot(&x, &x)?, 30.0);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn dot<T: Real>(&self, x: &Dat<T>, y: &Dat<T>) -> Result<T> {
        let k = agreed_kernels("dot", &[("x", x), ("y", y)])?;
        let s = scalar(self, "dot", "sum", T::ZERO)?;
        if x.id() == y.id() {
            self.vec_loop(k.sumsq, x, &[x.arg(Access::READ), s.arg(Access::INC)])?;
        } else {
            self.vec_loop(k.dot, x, &[x.arg(Access::READ), y.arg(Access::READ), s.arg(Access::INC)])?;
        }
        s.value()
    }

    /// The fused update of a CG iteration, one pass: `x += alpha p`,
    /// `r -= alpha q`, and of the new `r` the sums `(r . z, r . r)` with
    /// `z = r .* dinv` (not stored; `z = r` without `dinv`). All dats on
    /// one set with one dim, distinct.
    pub(crate) fn cg_update<T: Real>(
        &self,
        alpha: T,
        p: &Dat<T>,
        q: &Dat<T>,
        x: &Dat<T>,
        r: &Dat<T>,
        dinv: Option<&Dat<T>>,
    ) -> Result<(T, T)> {
        let mut dats = vec![("r", r), ("x", x), ("p", p), ("q", q)];
        dats.extend(dinv.map(|d| ("dinv", d)));
        let k = kernels_for("cg update", &dats)?;
        let a = scalar(self, "cg", "alpha", alpha)?;
        let n = self.names.number();
        let (pa, qa, xa, ra) = (p.arg(Access::READ), q.arg(Access::READ), x.arg(Access::RW), r.arg(Access::RW));
        match dinv {
            None => {
                let s = self.internal_global(&format!("cg#{n}:rr"), &[T::ZERO])?;
                self.vec_loop(k.cg_update, r, &[a.arg(Access::READ), pa, qa, xa, ra, s.arg(Access::INC)])?;
                let rr = s.value()?;
                Ok((rr, rr))
            }
            Some(d) => {
                let s = self.internal_global(&format!("cg#{n}:sums"), &[T::ZERO, T::ZERO])?;
                let args = [a.arg(Access::READ), pa, qa, d.arg(Access::READ), xa, ra, s.arg(Access::INC)];
                self.vec_loop(k.cg_update_jacobi, r, &args)?;
                let v = s.values()?;
                Ok((v[0], v[1]))
            }
        }
    }

    /// `(r . z, r . r)` with `z = r .* dinv` (not stored; `z = r` without
    /// `dinv`), one pass.
    pub(crate) fn cg_sums<T: Real>(&self, r: &Dat<T>, dinv: Option<&Dat<T>>) -> Result<(T, T)> {
        let Some(d) = dinv else {
            let rr = self.dot(r, r)?;
            return Ok((rr, rr));
        };
        let k = kernels_for("cg sums", &[("r", r), ("dinv", d)])?;
        let n = self.names.number();
        let s = self.internal_global(&format!("cg#{n}:sums"), &[T::ZERO, T::ZERO])?;
        self.vec_loop(k.cg_sums_jacobi, r, &[r.arg(Access::READ), d.arg(Access::READ), s.arg(Access::INC)])?;
        let v = s.values()?;
        Ok((v[0], v[1]))
    }

    /// CG's new search direction `p = z + beta p` with `z = r .* dinv`
    /// computed on the fly (`z = r` without `dinv`); `p = z` when `beta` is
    /// `None` (a (re)start: the old `p` is not read).
    pub(crate) fn cg_direction<T: Real>(
        &self,
        r: &Dat<T>,
        dinv: Option<&Dat<T>>,
        beta: Option<T>,
        p: &Dat<T>,
    ) -> Result<()> {
        match (dinv, beta) {
            (None, None) => self.copy_from(p, r),
            (None, Some(b)) => self.axpby(T::ONE, r, b, p),
            (Some(d), None) => self.pointwise_mult(p, r, d),
            (Some(d), Some(b)) => {
                let k = kernels_for("cg direction", &[("p", p), ("r", r), ("dinv", d)])?;
                let b = scalar(self, "cg", "beta", b)?;
                let args = [r.arg(Access::READ), d.arg(Access::READ), b.arg(Access::READ), p.arg(Access::RW)];
                self.vec_loop(k.cg_direction_jacobi, p, &args)
            }
        }
    }

    /// The Euclidean norm `sqrt(x . x)`.
    ///
    /// ```
    /// # let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// # let s = rt.set("s", 2)?;
    /// let x = rt.dat("x", &s, 1, vec![3.0, 4.0])?;
    /// assert_eq!(rt.norm2(&x)?, 5.0);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn norm2<T: Real>(&self, x: &Dat<T>) -> Result<T> {
        let ss = self.dot(x, x)?.to_f64();
        // The plain sum of squares, unless it under- or overflowed (an
        // underflow loses digits below MIN_POSITIVE / EPSILON): then scaled
        // by the largest magnitude, as LAPACK's nrm2 does (two more passes,
        // only for vectors near the ends of the range).
        if ss.is_nan() || (ss >= T::MIN_POSITIVE / T::EPSILON && ss <= T::MAX) {
            return Ok(T::from_f64(ss).sqrt());
        }
        let k = kernels_for("norm2", &[("x", x)])?;
        let m = scalar(self, "norm2", "max", T::ZERO)?;
        self.vec_loop(k.maxabs, x, &[x.arg(Access::READ), m.arg(Access::MAX)])?;
        let largest = m.value()?;
        let l = largest.to_f64();
        if l == 0.0 || !l.is_finite() {
            return Ok(largest);
        }
        let s = scalar(self, "norm2", "sum", T::ZERO)?;
        self.vec_loop(k.sumsq_scaled, x, &[x.arg(Access::READ), m.arg(Access::READ), s.arg(Access::INC)])?;
        Ok(T::from_f64(l * s.value()?.to_f64().sqrt()))
    }

    /// `y = x` (`y.copy_from(x)`). Copying a dat onto itself does nothing.
    ///
    /// ```
    /// # let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// # let s = rt.set("s", 2)?;
    /// let x = rt.dat("x", &s, 1, vec![1.0, 2.0])?;
    /// let y = rt.dat("y", &s, 1, vec![0.0; 2])?;
    /// rt.copy_from(&y, &x)?;
    /// assert_eq!(y.values()?, vec![1.0, 2.0]);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn copy_from<T: Real>(&self, y: &Dat<T>, x: &Dat<T>) -> Result<()> {
        let k = agreed_kernels("copy_from", &[("y", y), ("x", x)])?;
        if x.id() == y.id() {
            return Ok(());
        }
        self.vec_loop(k.copy, y, &[x.arg(Access::READ), y.arg(Access::WRITE)])
    }

    /// `y = alpha` in every component of every owned entity.
    ///
    /// ```
    /// # let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// # let s = rt.set("s", 2)?;
    /// let y = rt.dat("y", &s, 2, vec![0.0; 4])?;
    /// rt.fill(&y, 1.5)?;
    /// assert_eq!(y.values()?, vec![1.5; 4]);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn fill<T: Real>(&self, y: &Dat<T>, alpha: T) -> Result<()> {
        let k = agreed_kernels("fill", &[("y", y)])?;
        let a = scalar(self, "fill", "alpha", alpha)?;
        self.vec_loop(k.fill, y, &[a.arg(Access::READ), y.arg(Access::WRITE)])
    }

    /// `w = x .* y`, component by component (a lumped mass, a Jacobi
    /// preconditioner). `w` may be `x` or `y`.
    ///
    /// ```
    /// # let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// # let s = rt.set("s", 2)?;
    /// let x = rt.dat("x", &s, 1, vec![1.0, 2.0])?;
    /// let y = rt.dat("y", &s, 1, vec![3.0, 4.0])?;
    /// let w = rt.dat("w", &s, 1, vec![0.0; 2])?;
    /// rt.pointwise_mult(&w, &x, &y)?;
    /// assert_eq!(w.values()?, vec![3.0, 8.0]);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn pointwise_mult<T: Real>(&self, w: &Dat<T>, x: &Dat<T>, y: &Dat<T>) -> Result<()> {
        let (wi, xi, yi) = (w.id(), x.id(), y.id());
        let k = kernels_for("pointwise_mult", &[("w", w), ("x", x), ("y", y)]).and_then(|k| {
            // w = w .* w: the product of w with a copy would need a temporary;
            // multiplying by itself through one RW parameter needs a kernel of
            // its own, which squaring does not merit.
            if wi == xi && wi == yi {
                return Err(all_one_dat("pointwise_mult", w, "square into another dat"));
            }
            Ok(k)
        });
        let k = agreed_on("pointwise_mult", k, &[("w", w), ("x", x), ("y", y)])?;
        if wi == xi {
            return self.vec_loop(k.mul_in, w, &[y.arg(Access::READ), w.arg(Access::RW)]);
        }
        if wi == yi {
            return self.vec_loop(k.mul_in, w, &[x.arg(Access::READ), w.arg(Access::RW)]);
        }
        self.vec_loop(k.mul, w, &[x.arg(Access::READ), y.arg(Access::READ), w.arg(Access::WRITE)])
    }

    /// `w = x ./ y`, component by component (IEEE division: a zero in `y`
    /// gives an infinity or a NaN in `w`, never a panic). `w` may be `x` or
    /// `y`.
    ///
    /// ```
    /// # let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// # let s = rt.set("s", 2)?;
    /// let x = rt.dat("x", &s, 1, vec![3.0, 8.0])?;
    /// let m = rt.dat("m", &s, 1, vec![3.0, 4.0])?;
    /// rt.pointwise_divide(&x, &x, &m)?;
    /// assert_eq!(x.values()?, vec![1.0, 2.0]);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn pointwise_divide<T: Real>(&self, w: &Dat<T>, x: &Dat<T>, y: &Dat<T>) -> Result<()> {
        let (wi, xi, yi) = (w.id(), x.id(), y.id());
        let k = kernels_for("pointwise_divide", &[("w", w), ("x", x), ("y", y)]).and_then(|k| {
            if wi == xi && wi == yi {
                return Err(all_one_dat("pointwise_divide", w, "divide into another dat"));
            }
            Ok(k)
        });
        let k = agreed_on("pointwise_divide", k, &[("w", w), ("x", x), ("y", y)])?;
        if wi == xi {
            return self.vec_loop(k.div_in, w, &[y.arg(Access::READ), w.arg(Access::RW)]);
        }
        if wi == yi {
            return self.vec_loop(k.rdiv_in, w, &[x.arg(Access::READ), w.arg(Access::RW)]);
        }
        self.vec_loop(k.div, w, &[x.arg(Access::READ), y.arg(Access::READ), w.arg(Access::WRITE)])
    }
}
