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

    /// The sections of the iteration set this loop executes, from the
    /// set's current numbering (which partitioning changes).
    pub(crate) fn sections(&self) -> LoopSections {
        let s = self.set.sections();
        LoopSections {
            core: s.core,
            owned: s.owned,
            exec: s.exec,
            exec_halo: crate::arg::writes_indirectly(&self.args),
        }
    }
}

/// The element ranges of one loop, in execution order (seed 004): core,
/// owned, and the exec halo when the loop writes through a map (its
/// elements then run redundantly, so that halo entities get every
/// increment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LoopSections {
    core: usize,
    owned: usize,
    exec: usize,
    /// Whether the exec halo runs.
    pub exec_halo: bool,
}

impl LoopSections {
    /// Elements that touch no halo data: they run while halos travel.
    pub fn core(&self) -> std::ops::Range<usize> {
        0..self.core
    }

    /// Owned elements that read halo data.
    pub fn owned(&self) -> std::ops::Range<usize> {
        self.core..self.core + self.owned
    }

    /// Other ranks' elements this rank runs too (empty unless `exec_halo`).
    pub fn exec(&self) -> std::ops::Range<usize> {
        let owned = self.core + self.owned;
        owned..owned + if self.exec_halo { self.exec } else { 0 }
    }

    /// The sizes of the sections that run, in order (what plans are built
    /// over).
    pub fn sizes(&self) -> Vec<usize> {
        let mut sizes = vec![self.core, self.owned];
        if self.exec_halo {
            sizes.push(self.exec);
        }
        sizes
    }

    /// Elements executed in all.
    pub fn executed(&self) -> usize {
        self.exec().end
    }
}
