//! A loop as a value: kernel, iteration set and arguments, validated on
//! construction. `Runtime::par_loop` builds one and executes it; keeping it
//! a value is what lets a lazy trace queue loops instead of running them.

use crate::arg::Arg;
use crate::decl::Set;
use crate::error::Result;
use crate::kernel::Kernel;

/// A validated loop: `kernel` over every element of `set` with `args`.
///
/// ```
/// use parloop::{Access, Backend, ParLoop, Runtime};
/// #[parloop::kernel] fn zero(a: &mut f64) { *a = 0.0; }
/// let rt = Runtime::with_backend(Backend::Seq).unwrap();
/// let s = rt.set("s", 3).unwrap();
/// let a = rt.dat("a", &s, 1, vec![1.0; 3]).unwrap();
/// let lp = ParLoop::new(zero::KERNEL, &s, &[a.arg(Access::WRITE)]).unwrap();
/// rt.execute(&lp).unwrap();
/// assert_eq!(a.values().unwrap(), vec![0.0; 3]);
/// ```
#[derive(Clone, Debug)]
pub struct ParLoop {
    kernel: &'static Kernel,
    set: Set,
    args: Vec<Arg>,
}

impl ParLoop {
    /// Validates the arguments against the kernel's signature and the set
    /// (see [`Error`](crate::Error) for what is checked).
    pub fn new(kernel: &'static Kernel, set: &Set, args: &[Arg]) -> Result<ParLoop> {
        crate::validate::validate(kernel, set, args)?;
        Ok(ParLoop { kernel, set: set.clone(), args: args.to_vec() })
    }

    /// The kernel.
    pub fn kernel(&self) -> &'static Kernel {
        self.kernel
    }

    /// The iteration set.
    pub fn set(&self) -> &Set {
        &self.set
    }

    /// The arguments, one per kernel parameter.
    pub fn args(&self) -> &[Arg] {
        &self.args
    }
}
