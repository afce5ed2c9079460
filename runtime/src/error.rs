//! The one error type of the public API.

use std::fmt;

/// Everything that can go wrong in a parloop call. Messages name the loop,
/// argument, set, map or dat involved and the offending value.
///
/// `Debug` writes the same message as `Display`, so that a program whose
/// `main` returns `Result<(), parloop::Error>` ends with `Error: <message>`
/// rather than the variant's fields; match on the variant to inspect them.
///
/// ```
/// let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
/// let nodes = rt.set("nodes", 2)?;
/// let err = rt.dat("x", &nodes, 1, vec![0.0; 3]).unwrap_err();
/// assert_eq!(format!("{err:?}"), err.to_string());
/// assert!(err.to_string().contains("`x`"));
/// # Ok::<(), parloop::Error>(())
/// ```
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A map value lies outside its target set.
    #[error("map `{map}`: entity {entity} of `{from}`, column {column}, has value {value}, outside the target set `{to}` (0..{to_size})")]
    MapValueOutOfRange {
        /// The map.
        map: String,
        /// Its source set.
        from: String,
        /// Its target set.
        to: String,
        /// The entity whose value is bad.
        entity: usize,
        /// The column.
        column: usize,
        /// The value.
        value: i64,
        /// Size of the target set.
        to_size: usize,
    },
    /// A map, dat or global was given the wrong number of values.
    #[error("{what} `{name}`: expected {expected} values ({detail}), got {got}")]
    WrongLength {
        /// "map", "dat" or "global".
        what: &'static str,
        /// Its name.
        name: String,
        /// Values expected.
        expected: usize,
        /// Values given.
        got: usize,
        /// How the expectation arises.
        detail: String,
    },
    /// A declaration's parameter is invalid (zero arity or dim, ...).
    #[error("{what} `{name}`: {reason}")]
    InvalidDeclaration {
        /// "map", "dat", "set" or "global".
        what: &'static str,
        /// Its name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// A loop was given a different number of arguments than its kernel takes.
    #[error("loop `{kernel}`: kernel takes {expected} arguments, got {got}")]
    ArgumentCount {
        /// The kernel.
        kernel: String,
        /// Parameters of the kernel.
        expected: usize,
        /// Arguments given.
        got: usize,
    },
    /// An argument does not fit the loop or the kernel parameter.
    #[error("loop `{kernel}` over `{set}`, argument {arg} ({dat}): {problem}")]
    Argument {
        /// The kernel.
        kernel: String,
        /// The iteration set.
        set: String,
        /// Index of the argument (0-based).
        arg: usize,
        /// The dat or global of the argument.
        dat: String,
        /// What is wrong (boxed to keep `Result`s small).
        problem: Box<ArgProblem>,
    },
    /// A dat is borrowed by the host while a loop needs it.
    #[error("loop `{kernel}`: dat `{dat}` is borrowed by the host (inside a `with_values` closure?)")]
    Busy {
        /// The kernel.
        kernel: String,
        /// The dat or global.
        dat: String,
    },
    /// The host asked for values this thread already holds in a way that
    /// excludes the request (a write inside `with_values`, any access
    /// inside `with_values_mut`): waiting would never end.
    #[error("`{name}`: cannot be {wanted} here: this thread holds it {held}")]
    HostBusy {
        /// The dat or global.
        name: String,
        /// What was asked ("read", "written").
        wanted: &'static str,
        /// How this thread holds it.
        held: &'static str,
    },
    /// The backend name is unknown or the backend is not available here.
    #[error("backend `{name}`: {reason}")]
    Backend {
        /// The requested backend.
        name: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// A device library (the CUDA driver, NVRTC, the emulator's compiler or
    /// loader) failed; its error is kept as the source.
    #[error("backend `{name}`: {doing}: {source}")]
    DeviceLibrary {
        /// The backend ("cuda", "emu").
        name: String,
        /// What was being done.
        doing: String,
        /// The library's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A distributed run cannot proceed (partitioning, a rank mismatch, MPI).
    #[error("distributed run, rank {rank}: {reason}")]
    Distributed {
        /// The rank that found the problem.
        rank: usize,
        /// What went wrong, naming the set, map, dat or loop.
        reason: String,
    },
    /// A `PARLOOP_*` environment variable that parloop does not read (a
    /// misspelt name would otherwise be ignored in silence).
    #[error(
        "environment variable {var} is not one parloop reads{}; the variables are listed in the README (section \
         \"Backends and environment\") (unset it, or rename it outside the PARLOOP_ prefix)",
        match suggestion { Some(s) => format!(" (did you mean {s}?)"), None => String::new() }
    )]
    UnknownEnv {
        /// The variable's name.
        var: String,
        /// The known variable closest to it, when one is close.
        suggestion: Option<&'static str>,
    },
    /// An environment variable has a value parloop does not understand.
    #[error("environment variable {var}={value}: {reason}")]
    Env {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What is expected.
        reason: String,
    },
    /// The planner could not build a plan.
    #[error("loop `{kernel}`: cannot plan: {source}")]
    Plan {
        /// The kernel.
        kernel: String,
        /// The planner's reason.
        source: parloop_planner::PlanError,
    },
    /// Malformed input data (a mesh file, say), with its line.
    #[error("{source_name}:{line}: {reason}")]
    Input {
        /// The file or stream.
        source_name: String,
        /// 1-based line number (0 when unknown).
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// Malformed binary input data (a binary mesh file, say), with the byte
    /// offset where reading failed.
    #[error("{source_name}: byte {offset}: {reason}")]
    InputAtByte {
        /// The file or stream.
        source_name: String,
        /// 0-based byte offset.
        offset: usize,
        /// What is wrong.
        reason: String,
    },
    /// Generated device code did not compile: the compiler's log and the
    /// source with line numbers.
    #[error("module `{module}` failed to compile:\n{log}\n--- generated source ---\n{source_text}")]
    Compile {
        /// The module.
        module: String,
        /// The compiler's messages.
        log: String,
        /// The source, numbered.
        source_text: String,
    },
    /// A kernel panicked (an explicit `panic!`, an index out of bounds, an
    /// integer division by zero, ...) on one element. The loop stopped:
    /// dats it writes hold a mix of old and new values (each element's
    /// writes are either all done or, for the failing element and those
    /// after it in its block, possibly partly done); read-only data and
    /// globals being reduced are unchanged.
    #[error("loop `{kernel}`: the kernel panicked at {place}: {message}")]
    KernelPanicked {
        /// The kernel.
        kernel: String,
        /// The element of the iteration set (local numbering: under MPI
        /// this rank's; over a subset, the position in the subset).
        element: usize,
        /// The element as a user finds it: ``element 5 of set `cells` ``,
        /// ``element 2 of subset `wall` (entity 117 of set `vertices`) ``,
        /// with the global number under MPI (``element 5 of set `cells`
        /// (global number 9001) ``).
        place: String,
        /// The panic's message.
        message: String,
    },
    /// An allocation whose size comes from the input could not be made.
    #[error("out of memory: {what} needs {}", bytes_needed(*bytes))]
    OutOfMemory {
        /// What was being allocated (naming the set, dat, map or loop).
        what: String,
        /// Bytes requested (`usize::MAX` when the size itself overflows).
        bytes: usize,
    },
    /// A size computation (entities x dim, section sums, byte counts)
    /// overflows `usize`.
    #[error("{what} `{name}`: size overflows: {detail}")]
    SizeOverflow {
        /// "set", "map", "dat", "global" or "loop".
        what: &'static str,
        /// Its name.
        name: String,
        /// The sizes involved.
        detail: String,
    },
    /// A declaration takes a name a live object of the runtime holds, so
    /// that messages naming it would be ambiguous (dats, globals, matrices
    /// and temporaries share one namespace; sets and maps have their own).
    #[error("{what} `{name}`: {}; names must be unique", taken_by(holder, what))]
    DuplicateName {
        /// What was being declared: "set", "map", "dat", "global", "matrix", ...
        what: &'static str,
        /// The name.
        name: String,
        /// What holds the name already (the same kinds).
        holder: &'static str,
    },
    /// A kernel's parameters hold more values per element than the CPU
    /// backends stage: they keep a batch of private copies per parameter on
    /// the stack, which such a kernel would overflow.
    #[error(
        "loop `{kernel}`: its parameters hold {bytes} bytes per element; the limit is {limit} bytes \
         (larger element data: split it over several parameters of smaller dats, or several loops)"
    )]
    KernelTooLarge {
        /// The kernel.
        kernel: String,
        /// Bytes its parameters hold per element.
        bytes: usize,
        /// The most they may hold.
        limit: usize,
    },
    /// An I/O error, with the path involved.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// The dats or matrix of a linear-algebra operation do not fit
    /// together (sets, dims, aliasing), or a dim the operations do not
    /// support.
    #[error("{op}: {reason}")]
    Incompatible {
        /// The operation (and the matrix, where there is one).
        op: String,
        /// What does not fit, naming the dats and values.
        reason: String,
    },
    /// A loop recorded by the lazy trace (`PARLOOP_LAZY=1`) failed when a
    /// later host access, flush or drop ran it; the loops recorded after
    /// it were discarded.
    #[error("{}", deferred_text(kernel, location, source))]
    Deferred {
        /// The kernel.
        kernel: String,
        /// `file:line:column` of the `par_loop`/`execute` that recorded it.
        location: String,
        /// What went wrong when it ran.
        source: Box<Error>,
    },
    /// A dat, global or matrix that loops discarded by the lazy trace would
    /// have written (they were recorded after a loop that failed, and
    /// nothing after a failed loop runs): its values are not what the
    /// program computed, so reading it, on the host or in a loop, is
    /// refused until it is written whole again (`set_values`, or a direct
    /// WRITE argument of a loop over its set).
    #[error(
        "`{name}` may hold stale values: loops that write it were discarded when loop `{kernel}` (recorded at \
         {location}) failed; {by} is refused until it is written whole again (set_values, a direct WRITE loop \
         over its set, or Mat::zero for a matrix)"
    )]
    Discarded {
        /// The datum.
        name: String,
        /// The loop that failed (a fused group's kernels, `a+b`).
        kernel: String,
        /// Where that loop was recorded.
        location: String,
        /// What wanted the datum: a host read, or a loop.
        by: String,
    },
    /// A temporary ([`Runtime::temporary`](crate::Runtime::temporary)) was
    /// read before anything wrote it, or first written by something that
    /// may not cover every entity (its values would be another
    /// temporary's or zeros).
    #[error("temporary `{name}` used before it was written: {by} (its first write must be `set_values` or a direct WRITE argument of a loop over its whole set)")]
    UnwrittenTemporary {
        /// The temporary.
        name: String,
        /// What used it and how: a loop and argument that reads it or
        /// writes only part of it, or a host access.
        by: String,
    },
    /// A recorded loop's dat or global was gone when the loop was to run
    /// (its last handle was dropped while the trace ran other loops).
    #[error("loop `{kernel}`: data #{id} it uses was dropped before it ran")]
    DataDropped {
        /// The kernel.
        kernel: String,
        /// The datum's id.
        id: u64,
    },
    /// An iterative solver stopped without a solution: the report says how
    /// far it got (its `x` is the last iterate, not a solution).
    #[error("{solver} on matrix `{matrix}` did not converge: {failure}{}", crate::solve::progress(.report))]
    NotConverged {
        /// The solver ("cg").
        solver: &'static str,
        /// The matrix (operator).
        matrix: String,
        /// Why it stopped.
        failure: crate::solve::SolveFailure,
        /// Iterations and residual history up to the stop.
        report: Box<crate::solve::CgReport>,
    },
}

impl Error {
    /// An [`Error::OutOfMemory`] from a layer that does not know what its
    /// buffer is for (a device allocation) gets `whose` named; other errors
    /// pass unchanged.
    pub(crate) fn out_of_memory_for(self, whose: impl FnOnce() -> String) -> Error {
        match self {
            Error::OutOfMemory { what, bytes } => Error::OutOfMemory { what: format!("{what} for {}", whose()), bytes },
            other => other,
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Why an argument does not fit its loop or kernel parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ArgProblem {
    /// The element type differs from the kernel parameter's.
    ElementType {
        /// The parameter's type.
        expected: &'static str,
        /// The argument's type.
        got: &'static str,
    },
    /// The number of values per entity differs from the parameter's.
    Dim {
        /// What the parameter holds.
        expected: String,
        /// What the argument provides.
        got: String,
    },
    /// A writing access on a `&` parameter, or READ on a `&mut` one.
    Mutability {
        /// The access mode given.
        access: &'static str,
        /// Whether the parameter is `&mut`.
        param_mutable: bool,
    },
    /// MIN or MAX on a dat (only globals reduce).
    ReductionOnDat {
        /// The access mode.
        access: &'static str,
    },
    /// WRITE or RW on a global (globals are READ constants or reductions).
    WriteToGlobal {
        /// The access mode.
        access: &'static str,
    },
    /// A direct dat lives on another set than the iteration set.
    DirectSet {
        /// The dat's set.
        dat_set: String,
    },
    /// The map's source set is not the iteration set.
    MapFrom {
        /// The map.
        map: String,
        /// The map's source set.
        from: String,
    },
    /// The map's target set is not the dat's set.
    MapTo {
        /// The map.
        map: String,
        /// The map's target set.
        to: String,
        /// The dat's set.
        dat_set: String,
    },
    /// A set of another runtime where the loop needs this runtime's set of
    /// the same name (names are unique within a runtime, not across
    /// runtimes): the names alone would not tell them apart.
    SameNameOtherSet {
        /// What lives on it: "the dat" or "map `m`'s source".
        what: String,
        /// The name both sets carry.
        set: String,
    },
    /// The map column is not below the arity.
    Column {
        /// The map.
        map: String,
        /// The column.
        column: usize,
        /// The arity.
        arity: usize,
    },
    /// An indirect WRITE or RW through a map whose rows share a target: two
    /// elements (or one element twice) would write one entity, and the
    /// result would depend on the backend's order (or alias two `&mut`).
    WriteRace {
        /// The map.
        map: String,
        /// The element that reaches `target` first.
        first: usize,
        /// The element that reaches it again (equal to `first` when one row
        /// repeats the target).
        second: usize,
        /// The entity of the dat's set written twice.
        target: usize,
    },
    /// A matrix WRITE reaches one entry (a block, for block sparsities)
    /// from two elements, or twice from one element: which value stays
    /// would depend on the backend's order.
    MatWriteRace {
        /// The row and column maps.
        maps: (String, String),
        /// The element that reaches the entry first.
        first: usize,
        /// The element that reaches it again (equal to `first` when the
        /// element's rows repeat a row and a column).
        second: usize,
        /// The entry: (row entity, column entity).
        entry: (usize, usize),
    },
    /// The dat (global, matrix) is used by another argument in a way that
    /// would race or alias.
    Conflict {
        /// "dat", "global" or "matrix".
        what: &'static str,
        /// The other argument.
        other: usize,
        /// Why.
        reason: &'static str,
    },
    /// INC on a kernel parameter that the kernel assigns or reads, not
    /// only adds to (`+=`, `-=`).
    IncNotIncrementOnly {
        /// The parameter's name.
        param: String,
        /// What the kernel does with it instead of adding
        /// ([`crate::ParamSig::increment_use`]; empty when not known).
        what: &'static str,
        /// Whether the argument is a global (RW and WRITE, the advice for
        /// a dat, are no access of a global's).
        global: bool,
        /// "MIN" or "MAX" where the body is a running minimum or maximum
        /// of the parameter (what it takes instead of INC on a global).
        reduction: Option<&'static str>,
    },
    /// A MIN or MAX global on a parameter the kernel uses otherwise than
    /// combining it with itself by that operation.
    ReductionNotOnly {
        /// The parameter's name.
        param: String,
        /// "MIN" or "MAX".
        access: &'static str,
    },
    /// A matrix argument through a (row map, column map) pair its
    /// sparsity was not built from.
    MatPair {
        /// The row map given.
        row_map: String,
        /// The column map given.
        col_map: String,
        /// The matrix's sparsity.
        sparsity: String,
        /// The pairs it was built from.
        pairs: String,
    },
    /// A matrix argument with an access other than INC or WRITE.
    MatAccess {
        /// The access given.
        access: &'static str,
    },
}

impl fmt::Display for ArgProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgProblem::ElementType { expected, got } => {
                write!(f, "element type {got} does not match the kernel parameter's {expected}")
            }
            ArgProblem::Dim { expected, got } => {
                write!(f, "the kernel parameter holds {expected}, the argument provides {got}")
            }
            ArgProblem::Mutability { access, param_mutable: true } => {
                write!(f, "{access} access on a `&mut` parameter (a READ argument needs a `&` parameter)")
            }
            ArgProblem::Mutability { access, param_mutable: false } => {
                write!(f, "{access} access on a `&` parameter (writing needs a `&mut` parameter)")
            }
            ArgProblem::ReductionOnDat { access } => {
                write!(f, "{access} is a reduction and only applies to a Global, not a Dat")
            }
            ArgProblem::WriteToGlobal { access } => {
                write!(f, "{access} on a Global: globals are READ constants or INC/MIN/MAX reductions")
            }
            ArgProblem::DirectSet { dat_set } => {
                write!(f, "a direct argument must live on the iteration set, this dat lives on `{dat_set}`")
            }
            ArgProblem::SameNameOtherSet { what, set } => {
                write!(f, "{what} lives on set `{set}` of another runtime, not on this runtime's set `{set}`")
            }
            ArgProblem::MapFrom { map, from } => {
                write!(f, "map `{map}` goes from `{from}`, not from the iteration set")
            }
            ArgProblem::MapTo { map, to, dat_set } => {
                write!(f, "map `{map}` goes to `{to}`, but the dat lives on `{dat_set}`")
            }
            ArgProblem::Column { map, column, arity } => {
                write!(f, "column {column} of map `{map}` is out of range (arity {arity})")
            }
            ArgProblem::WriteRace { map, first, second, target } if first == second => write!(
                f,
                "element {first}'s row of map `{map}` repeats target {target}: an indirect WRITE or RW may reach \
                 each entity once (use INC to accumulate)"
            ),
            ArgProblem::WriteRace { map, first, second, target } => write!(
                f,
                "elements {first} and {second} both reach target {target} through map `{map}`: an indirect \
                 WRITE or RW may reach each entity once per loop, or the result depends on the order (use INC \
                 to accumulate)"
            ),
            ArgProblem::MatWriteRace { maps, first, second, entry } if first == second => write!(
                f,
                "element {first}'s rows of maps (`{}`, `{}`) reach the entry of row entity {} and column \
                 entity {} twice: a matrix WRITE may set each entry once (use INC to accumulate)",
                maps.0, maps.1, entry.0, entry.1
            ),
            ArgProblem::MatWriteRace { maps, first, second, entry } => write!(
                f,
                "elements {first} and {second} both reach the entry of row entity {} and column entity {} \
                 through maps (`{}`, `{}`): a matrix WRITE may set each entry once per loop, or the value kept \
                 depends on the backend's order (use INC to accumulate, after `zero()`)",
                entry.0, entry.1, maps.0, maps.1
            ),
            ArgProblem::Conflict { what, other, reason } => {
                write!(f, "the same {what} is argument {other} too: {reason}")
            }
            ArgProblem::MatPair { row_map, col_map, sparsity, pairs } => {
                write!(
                    f,
                    "the map pair (`{row_map}`, `{col_map}`) is not one sparsity `{sparsity}` was built from ({pairs})"
                )?;
                if pairs.contains(&format!("(`{row_map}`, `{col_map}`)")) {
                    // Same names, other maps: one dropped and declared
                    // again, or another runtime's.
                    write!(
                        f,
                        ": the names are the same but the maps are not (a map declared again after the \
                         sparsity's was dropped, or another runtime's); a sparsity knows its maps, not their names"
                    )?;
                }
                Ok(())
            }
            ArgProblem::MatAccess { access } => {
                write!(f, "{access} on a matrix: matrices are assembled with INC or WRITE")
            }
            ArgProblem::IncNotIncrementOnly { param, what, global, reduction } => {
                let what = if what.is_empty() {
                    "assigns, reads, or passes to a helper that does more than add to it"
                } else {
                    what
                };
                write!(
                    f,
                    "INC on parameter `{param}`, which the kernel {what}, instead of only adding to it (`+=`, \
                     `-=`): INC gives the kernel a zeroed private copy on some backends and the target on others, \
                     so the result would depend on the backend; "
                )?;
                match (global, reduction) {
                    (false, _) => write!(f, "use RW or WRITE, or only add to it"),
                    (true, Some(access)) => {
                        let what = if *access == "MIN" { "minimum" } else { "maximum" };
                        write!(
                            f,
                            "the kernel computes a running {what} of it: use `Access::{access}` (a global is READ, \
                             INC, MIN or MAX, not RW or WRITE)"
                        )
                    }
                    (true, None) => write!(
                        f,
                        "on a global, use `Access::MIN` or `Access::MAX` for a running minimum or maximum \
                         (`*{param} = {param}.min(v)`), or only add to it for INC (a global is READ, INC, MIN or \
                         MAX, not RW or WRITE)"
                    ),
                }
            }
            ArgProblem::ReductionNotOnly { param, access } => {
                let (method, less) = if *access == "MIN" { ("min", "<") } else { ("max", ">") };
                write!(
                    f,
                    "{access} on parameter `{param}`, which the kernel uses otherwise than as a running {method}: \
                     a {access} global holds the running value on one backend, a block's on another and the initial \
                     value on a third, so only `*{param} = {param}.{method}(v)` or `if v {less} *{param} {{ *{param} = \
                     v; }}` (or the same on an element, `{param}[i]`) give one answer everywhere; use INC to add, \
                     or compute the {method} that way"
                )
            }
        }
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An allocation's size as [`Error::OutOfMemory`] shows it: `usize::MAX`
/// stands for a size that overflowed, not for a real request.
fn bytes_needed(bytes: usize) -> String {
    if bytes == usize::MAX {
        "more bytes than this machine can address (its size overflows)".into()
    } else {
        format!("{bytes} bytes")
    }
}

/// [`Error::Deferred`]'s message: "loop `k` recorded at L: " and the
/// error, or, when the error names the loop first (a kernel panic, an
/// argument problem), the place put after that name rather than the name
/// said twice ("loop `k` recorded at L: loop `k`: the kernel panicked").
fn deferred_text(kernel: &str, location: &str, source: &Error) -> String {
    let text = source.to_string();
    let head = format!("loop `{kernel}`");
    match text.strip_prefix(&head) {
        Some(rest) => format!("{head} (recorded at {location}){rest}"),
        None => format!("{head} recorded at {location}: {text}"),
    }
}

/// How [`Error::DuplicateName`] says who holds the name.
fn taken_by(holder: &str, what: &str) -> String {
    if holder == what {
        "a live one of this name exists in this runtime".into()
    } else {
        format!("the name is taken by a live {holder} of this runtime (dats, globals and matrices share names)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The demos' memory checks report a size that overflowed as
    /// `usize::MAX` bytes, which read as a real request of 18 EB.
    #[test]
    fn an_overflowed_allocation_size_is_not_shown_as_a_byte_count() {
        let e = Error::OutOfMemory { what: "dat `u`".into(), bytes: usize::MAX };
        assert!(!e.to_string().contains(&usize::MAX.to_string()), "{e}");
        assert!(e.to_string().contains("overflows"), "{e}");
        let e = Error::OutOfMemory { what: "dat `u`".into(), bytes: 4096 };
        assert_eq!(e.to_string(), "out of memory: dat `u` needs 4096 bytes");
    }
}
