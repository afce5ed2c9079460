//! A loop as a value: kernel, iteration set and arguments, validated on
//! construction. `Runtime::par_loop` builds one and executes it; keeping it
//! a value is what lets a lazy trace queue loops instead of running them.

use std::sync::Arc;

use crate::arg::{Arg, ArgKind};
use crate::decl::{Set, Subset};
use crate::error::{Error, Result};
use crate::kernel::Kernel;

/// What a loop iterates over: a [`Set`] or a [`Subset`] (both convert,
/// so `par_loop(k, &set, ..)` and `par_loop(k, &subset, ..)` both work).
#[derive(Clone, Copy, Debug)]
pub enum LoopSet<'a> {
    /// Every element of a set.
    Set(&'a Set),
    /// The entities of a subset, in order.
    Subset(&'a Subset),
}

impl<'a> From<&'a Set> for LoopSet<'a> {
    fn from(s: &'a Set) -> Self {
        LoopSet::Set(s)
    }
}

impl<'a> From<&'a Subset> for LoopSet<'a> {
    fn from(s: &'a Subset) -> Self {
        LoopSet::Subset(s)
    }
}

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
pub struct ParLoop(Arc<LoopInner>);

/// What a [`ParLoop`] holds: shared by its clones and never changed while
/// shared (`Arc::make_mut`), so that the lazy trace can keep a weak
/// reference to a user's loop and run it as it was recorded (see
/// `ParLoop::downgrade`).
#[derive(Clone, Debug)]
pub(crate) struct LoopInner {
    kernel: &'static Kernel,
    set: Set,
    args: Vec<Arg>,
    /// Runs the exec halo whatever the arguments (a device assembly's
    /// loop, whose matrix argument became a direct element-matrix dat).
    exec_halo: bool,
    /// Descriptive tags, comma-joined (`None`: untagged): shown in the
    /// profile and NVTX ranges, never part of what the loop computes.
    tags: Option<Arc<str>>,
    /// Whether an argument is a temporary (`Runtime::temporary`): only
    /// then does running the loop check and mark first writes, a call
    /// through `dyn Storage` per argument that every other loop skips.
    temporaries: bool,
    /// `arg::writes_indirectly(&args)`, kept: the trace and the replay ask
    /// for a loop's sections at every recording.
    writes_indirectly: bool,
}

impl ParLoop {
    /// Validates the arguments against the kernel's signature and the set
    /// (see [`Error`](crate::Error) for what is checked). Over a
    /// [`Subset`], arguments are those of a loop over its parent set: a
    /// direct argument reaches the subset's entities, an indirect one goes
    /// through its map from the subset's entities.
    pub fn new<'s>(kernel: &'static Kernel, set: impl Into<LoopSet<'s>>, args: &[Arg]) -> Result<ParLoop> {
        match set.into() {
            LoopSet::Set(set) => {
                crate::validate::validate(kernel, set, args)?;
                let mut args = args.to_vec();
                for a in args.iter_mut().filter(|a| matches!(a.kind, ArgKind::Index)) {
                    a.set = Some(set.clone());
                    // A distributed set's element numbers are global: read
                    // from a table of them (kept by the set's part), as a
                    // direct argument, on every backend.
                    if let Some(numbers) = set.global_numbers()? {
                        a.set_storage(numbers);
                        a.kind = ArgKind::Direct;
                    }
                }
                Ok(ParLoop::from_parts(kernel, set.clone(), args, false))
            }
            LoopSet::Subset(subset) => {
                crate::validate::validate(kernel, subset.parent(), args).map_err(|e| name_subset(e, subset))?;
                let args = args.iter().map(|a| through_subset(subset, a)).collect::<Result<Vec<_>>>()?;
                Ok(ParLoop::from_parts(kernel, subset.iter_set().clone(), args, false))
            }
        }
    }

    /// A loop from parts validated before (the lazy trace's recorded loops).
    pub(crate) fn from_parts(kernel: &'static Kernel, set: Set, args: Vec<Arg>, exec_halo: bool) -> ParLoop {
        let temporaries = args.iter().any(|a| a.storage.temp().is_some());
        let writes_indirectly = crate::arg::writes_indirectly(&args);
        ParLoop(Arc::new(LoopInner { kernel, set, args, exec_halo, tags: None, temporaries, writes_indirectly }))
    }

    /// Whether an argument is a temporary (see `decl::temporary::check_loop`).
    pub(crate) fn has_temporaries(&self) -> bool {
        self.0.temporaries
    }

    /// This loop with descriptive tags (seed 003): the profile reports
    /// tagged loops in rows of their own (`kernel [tag,tag]`) and NVTX
    /// ranges carry them, so that one kernel used in several places of a
    /// time step can be told apart. Tags never change what a loop
    /// computes. Each tag is non-empty, without commas or control
    /// characters.
    ///
    /// ```
    /// use parloop::{Access, Backend, ParLoop, Runtime};
    /// #[parloop::kernel] fn zero(a: &mut f64) { *a = 0.0; }
    /// let rt = Runtime::with_backend(Backend::Seq)?;
    /// let s = rt.set("s", 3)?;
    /// let a = rt.dat("a", &s, 1, vec![1.0; 3])?;
    /// let lp = ParLoop::new(zero::KERNEL, &s, &[a.arg(Access::WRITE)])?.with_tags(&["setup"])?;
    /// rt.execute(&lp)?;
    /// assert_eq!(rt.report()[0].tags, "setup");
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn with_tags(mut self, tags: &[&str]) -> Result<ParLoop> {
        for t in tags {
            if t.is_empty() || t.contains(',') || t.chars().any(char::is_control) {
                return Err(crate::Error::InvalidDeclaration {
                    what: "loop",
                    name: self.0.kernel.name().into(),
                    reason: format!("tag {t:?}: tags are non-empty, without commas or control characters"),
                });
            }
        }
        Arc::make_mut(&mut self.0).tags = (!tags.is_empty()).then(|| Arc::from(tags.join(",")));
        Ok(self)
    }

    /// The tags, comma-joined (empty when untagged).
    pub fn tags(&self) -> &str {
        self.0.tags.as_deref().unwrap_or("")
    }

    /// The tags as shared (what the trace keeps).
    pub(crate) fn tags_shared(&self) -> Option<Arc<str>> {
        self.0.tags.clone()
    }

    /// The loop's arguments, taken out (the trace reuses their vector).
    pub(crate) fn into_args(self) -> Vec<Arg> {
        match Arc::try_unwrap(self.0) {
            Ok(inner) => inner.args,
            Err(shared) => shared.args.clone(),
        }
    }

    /// A weak reference to this loop (the lazy trace's, to run the user's
    /// loop itself when it is still alive: no argument rebuilt).
    pub(crate) fn downgrade(&self) -> std::sync::Weak<LoopInner> {
        Arc::downgrade(&self.0)
    }

    /// The loop behind `weak`, if some handle still holds it: exactly the
    /// loop `downgrade` was called on (shared loops are never changed).
    pub(crate) fn upgrade(weak: &std::sync::Weak<LoopInner>) -> Option<ParLoop> {
        weak.upgrade().map(ParLoop)
    }

    /// This loop with `tags` as kept by [`ParLoop::tags_shared`].
    pub(crate) fn with_shared_tags(mut self, tags: Option<Arc<str>>) -> ParLoop {
        Arc::make_mut(&mut self.0).tags = tags;
        self
    }

    /// The kernel.
    pub fn kernel(&self) -> &'static Kernel {
        self.0.kernel
    }

    /// The iteration set.
    pub fn set(&self) -> &Set {
        &self.0.set
    }

    /// The arguments, one per kernel parameter.
    pub fn args(&self) -> &[Arg] {
        &self.0.args
    }

    /// The sections of the iteration set this loop executes, from the
    /// set's current numbering (which partitioning changes).
    pub(crate) fn sections(&self) -> LoopSections {
        let s = self.0.set.sections();
        LoopSections {
            core: s.core,
            owned: s.owned,
            exec: s.exec,
            exec_halo: self.0.exec_halo || self.0.writes_indirectly,
        }
    }

    /// This loop, running the exec halo under MPI also when no argument
    /// writes through a map.
    pub(crate) fn with_exec_halo(mut self) -> ParLoop {
        Arc::make_mut(&mut self.0).exec_halo = true;
        self
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
    pub fn sizes(&self) -> smallvec::SmallVec<[usize; 3]> {
        // Inline: every eager loop and recorded loop asks (plan lookup).
        let mut sizes = smallvec::smallvec![self.core, self.owned];
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

/// An argument error of a loop over `subset` (checked as a loop over its
/// parent) naming the subset as what the loop iterates, with its parent.
fn name_subset(e: Error, subset: &Subset) -> Error {
    match e {
        Error::Argument { kernel, set, arg, dat, problem } => {
            Error::Argument { kernel, set: format!("{} (a subset of {set})", subset.name()), arg, dat, problem }
        }
        other => other,
    }
}

/// `arg` of a loop over `subset`'s parent, rewritten for the loop over the
/// subset's iteration set: maps composed with the subset (cached there),
/// direct arguments through the subset's own map, the element index from
/// the subset's numbers.
fn through_subset(subset: &Subset, arg: &Arg) -> Result<Arg> {
    let mut out = arg.clone();
    out.kind = match &arg.kind {
        ArgKind::Direct => ArgKind::Indirect { map: subset.composed(None)?, column: 0 },
        ArgKind::Indirect { map, column } => ArgKind::Indirect { map: subset.composed(Some(map))?, column: *column },
        ArgKind::Vector { map } => ArgKind::Vector { map: subset.composed(Some(map))? },
        ArgKind::Global => ArgKind::Global,
        ArgKind::Mat(m) => {
            let (row, col) = (subset.composed(Some(&m.row_map))?, subset.composed(Some(&m.col_map))?);
            ArgKind::Mat(Arc::new(m.through(row, col)))
        }
        ArgKind::Index => {
            let numbers = subset.numbers()?;
            out.set_storage(numbers.0.clone());
            out.set = Some(subset.iter_set().clone());
            ArgKind::Direct
        }
    };
    Ok(out)
}
