//! Kernels: a name, a monomorphised host function, a parameter signature and
//! (for the GPU backends) CUDA C++ source.
//!
//! A kernel is an ordinary Rust function whose parameters are references to
//! scalars or fixed arrays. `#[parloop::kernel]` keeps the function,
//! translates it to CUDA, and generates a [`Kernel`] whose host adapter loops over a range
//! of elements and calls the function directly, so the compiler inlines it:
//! there is one indirect call per block, never per element, and nothing is
//! allocated per element.
//!
//! The argument views a host adapter receives are in [`crate::views`], and
//! how it binds them to the kernel's parameters in `crate::bind`.

use crate::types::ElemType;
use crate::views::ArgView;

/// The type and shape of one kernel parameter.
///
/// ```
/// #[parloop::kernel]
/// fn flux(q: &[f64; 4], res: &mut [[f64; 4]; 2]) {
///     for i in 0..4 {
///         res[0][i] += q[i];
///         res[1][i] -= q[i];
///     }
/// }
/// let p = flux::KERNEL.params();
/// assert_eq!((p[0].len(), p[1].len()), (4, 8));
/// assert_eq!(p[1].describe(), "&mut [[f64; 4]; 2]");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamSig {
    /// Element type.
    pub elem: ElemType,
    /// Rows: 1 for `&T` and `&[T; N]`, `N` for `&[[T; M]; N]`.
    pub rows: usize,
    /// Values per row: 1 for `&T`, `N` for `&[T; N]`, `M` for `&[[T; M]; N]`.
    pub cols: usize,
    /// Whether the parameter is an array of rows, `&[[T; M]; N]`, even
    /// with `N` = 1 (a vector argument through a map of arity 1): its
    /// device code takes rows, `T (*)[M]`, where `&[T; M]` takes `T*`.
    pub nested: bool,
    /// Whether the parameter is `&mut`.
    pub mutable: bool,
    /// Whether the kernel only adds to the parameter (`*p += x`, `p[i] -= x`)
    /// and never reads or assigns it otherwise: only then may it take an
    /// INC argument, because INC gives the kernel a zeroed private copy
    /// (whose sum is added to the target) on some backends and not on
    /// others. `#[parloop::kernel]` derives it from the body; hand-written
    /// kernels (`cuda = "..."`, [`Kernel::from_parts`]) and `&` parameters
    /// have `true` (not known, allowed).
    pub increment_only: bool,
    /// Whether a MIN global may take the parameter: the body combines it
    /// with itself by `min` only (`*m = m.min(v)`, `if v < *m { *m = v }`),
    /// because a reduction's parameter holds the running minimum on one
    /// backend, a block's on another and the initial value on a third.
    /// Derived like [`ParamSig::increment_only`]; `true` where not known.
    pub min_only: bool,
    /// [`ParamSig::min_only`] for MAX (`max`, `>`).
    pub max_only: bool,
    /// The parameter's name (empty when not known).
    pub name: &'static str,
    /// Where [`ParamSig::increment_only`] is false, what the body does
    /// instead of adding (`uses it in \`*y = 0.0\``, `passes it to
    /// \`helper\`, ...`), for the error an INC argument gets; empty when
    /// not known.
    pub increment_use: &'static str,
}

impl ParamSig {
    /// The signature with what the body says: the parameter's name and
    /// [`ParamSig::increment_only`]. Used by `#[parloop::kernel]`.
    pub const fn with_body(self, name: &'static str, increment_only: bool) -> ParamSig {
        ParamSig { name, increment_only, ..self }
    }

    /// The signature with [`ParamSig::increment_use`]. Used by
    /// `#[parloop::kernel]`.
    pub const fn with_increment_use(self, increment_use: &'static str) -> ParamSig {
        ParamSig { increment_use, ..self }
    }

    /// The signature with [`ParamSig::min_only`] and
    /// [`ParamSig::max_only`] from the body. Used by `#[parloop::kernel]`.
    pub const fn with_reductions(self, min_only: bool, max_only: bool) -> ParamSig {
        ParamSig { min_only, max_only, ..self }
    }

    /// Values the parameter holds.
    pub fn len(&self) -> usize {
        self.rows * self.cols
    }

    /// Whether the parameter holds no value (never, for valid shapes).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Rust spelling of the parameter type, for messages.
    pub fn describe(&self) -> String {
        let m = if self.mutable { "&mut " } else { "&" };
        match (self.rows, self.cols) {
            (1, 1) => format!("{m}{}", self.elem),
            (1, n) => format!("{m}[{}; {n}]", self.elem),
            (r, c) => format!("{m}[[{}; {c}]; {r}]", self.elem),
        }
    }
}

/// The host entry point of a kernel: runs elements `start..end` with the
/// argument views.
///
/// # Safety
/// The views must describe live, correctly typed and sized data as built by
/// the executor, and no other code may access the written parts meanwhile.
pub type HostFn = unsafe fn(&[ArgView], usize, usize);

/// A kernel: what [`par_loop`](crate::Runtime::par_loop) runs.
///
/// ```
/// #[parloop::kernel]
/// fn scale(w: &f64, x: &mut [f64; 2]) {
///     x[0] *= *w;
///     x[1] *= *w;
/// }
/// let k: &parloop::Kernel = scale::KERNEL;
/// assert_eq!(k.name(), "scale");
/// assert_eq!(k.params().len(), 2);
/// assert_eq!(k.params()[1].describe(), "&mut [f64; 2]");
/// // The CUDA C++ the device backends compile:
/// assert!(k.cuda_source().unwrap().contains("scale"));
/// assert!(!k.may_panic());
/// ```
#[derive(Debug)]
pub struct Kernel {
    name: &'static str,
    /// `module::path::name` (`#[parloop::kernel]` sets it; the name
    /// alone otherwise): the profile's row key.
    path: &'static str,
    params: &'static [ParamSig],
    host: HostFn,
    /// The adapter of the lane-wise twin (see [`crate::lanes`]), when the
    /// kernel has one; it falls back to `host` where lanes cannot run.
    lanes: Option<HostFn>,
    device: Option<&'static DeviceFn>,
}

/// A function's CUDA C++ translation and the helpers it calls, generated by
/// `#[parloop::kernel]` and `#[parloop::device]`.
///
/// ```
/// #[parloop::device]
/// fn square(x: f64) -> f64 {
///     x * x
/// }
/// #[parloop::kernel]
/// fn energy(u: &f64, e: &mut f64) {
///     *e += square(*u);
/// }
/// let device = energy::KERNEL.device_fn().expect("translated");
/// assert_eq!(device.name(), "energy");
/// assert_eq!(device.deps().len(), 1); // square
/// assert!(device.module_source().contains(device.deps()[0].cname()));
/// ```
#[derive(Debug)]
pub struct DeviceFn {
    name: &'static str,
    cname: &'static str,
    source: &'static str,
    deps: &'static [&'static DeviceFn],
    may_panic: bool,
    /// Whether the host function (the Rust body) can panic: a panic site,
    /// a checked division, a dynamic index, or a body written by hand
    /// (`cuda = ...`: nothing is known of it).
    host_panics: bool,
    frame_bytes: usize,
    /// The messages of the body's `assert!`/`panic!`/`unreachable!` sites,
    /// by site (the device reports the site and this function's id).
    panics: &'static [&'static str],
    /// FNV-1a of this function's C++ name and source and of its helpers'
    /// hashes, computed at compile time: the kernel's identity in the plan
    /// cache, free on every loop call.
    hash: u64,
}

/// FNV-1a over `bytes`, from `h`, in a `const` context.
const fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    let mut i = 0;
    while i < bytes.len() {
        h ^= bytes[i] as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    h
}

impl DeviceFn {
    /// A translated function: Rust name, C++ name, `__device__` source and
    /// the helpers it calls.
    pub const fn new(
        name: &'static str,
        cname: &'static str,
        source: &'static str,
        deps: &'static [&'static DeviceFn],
    ) -> DeviceFn {
        let mut hash = fnv1a(fnv1a(0xcbf2_9ce4_8422_2325, cname.as_bytes()), source.as_bytes());
        let mut i = 0;
        while i < deps.len() {
            hash = fnv1a(hash, &deps[i].hash.to_le_bytes());
            i += 1;
        }
        DeviceFn { name, cname, source, deps, may_panic: false, host_panics: false, frame_bytes: 0, panics: &[], hash }
    }

    /// A hash of the translation: this function's C++ name and source and,
    /// through their hashes, every helper it calls.
    pub(crate) fn hash(&self) -> u64 {
        self.hash
    }

    /// Adds what the translator knows of the body: whether it can report a
    /// panic in every build (checked integer division or remainder) and
    /// the bytes of its locals. Used by `#[parloop::kernel]`.
    pub const fn with_checks(self, may_panic: bool, frame_bytes: usize) -> DeviceFn {
        DeviceFn { may_panic, frame_bytes, ..self }
    }

    /// Adds whether the Rust body can panic (see [`DeviceFn::host_may_panic`]).
    /// Used by `#[parloop::kernel]`.
    pub const fn with_host_panics(self, host_panics: bool) -> DeviceFn {
        DeviceFn { host_panics, ..self }
    }

    /// Adds the messages of the body's panic sites. Used by
    /// `#[parloop::kernel]`.
    pub const fn with_panics(self, panics: &'static [&'static str]) -> DeviceFn {
        DeviceFn { panics, ..self }
    }

    /// The message of panic site `site` of the function (this one or a
    /// helper it calls) whose id (`parloop_kernels::function_id` of its
    /// C++ name) is `function`.
    pub(crate) fn panic_message(&self, function: i64, site: i64) -> Option<&'static str> {
        if parloop_kernels::function_id(self.cname) == function {
            return usize::try_from(site).ok().and_then(|s| self.panics.get(s)).copied();
        }
        self.deps.iter().find_map(|d| d.panic_message(function, site))
    }

    /// Whether this function or a helper it calls indexes an array with a
    /// value not known in range at compile time (a bounds check in a
    /// checked build).
    pub(crate) fn indexes_dynamically(&self) -> bool {
        self.source.contains("PL_IX(") || self.deps.iter().any(|d| d.indexes_dynamically())
    }

    /// Whether this function or a helper it calls can report a panic in an
    /// unchecked build.
    pub fn may_panic(&self) -> bool {
        self.may_panic || self.deps.iter().any(|d| d.may_panic())
    }

    /// Whether this function's Rust body or a helper it calls can panic on
    /// the host (a panic site, a checked division, a dynamic index, or a
    /// body with hand-written CUDA, of which nothing is known).
    pub fn host_may_panic(&self) -> bool {
        self.host_panics || self.deps.iter().any(|d| d.host_may_panic())
    }

    /// Bytes of the locals of this function and of every helper it calls
    /// (transitively, each counted once per call edge): an upper bound of
    /// the stack a call needs, before the compiler's own spills.
    pub fn frame_bytes(&self) -> usize {
        self.deps.iter().fold(self.frame_bytes, |acc, d| acc.saturating_add(d.frame_bytes()))
    }

    /// The Rust name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The C++ name.
    pub fn cname(&self) -> &'static str {
        self.cname
    }

    /// The helpers this function calls directly.
    pub fn deps(&self) -> &'static [&'static DeviceFn] {
        self.deps
    }

    /// This function's `__device__` definition alone.
    pub fn source(&self) -> &'static str {
        self.source
    }

    /// A complete CUDA C++ module: the prelude, every helper this function
    /// calls (transitively, each once, callees first), then the function.
    pub fn module_source(&self) -> String {
        DeviceFn::modules_source(&[self])
    }

    /// One CUDA C++ module holding several functions (a fused launch's
    /// kernels): the prelude, then every function and helper once, callees
    /// first.
    pub(crate) fn modules_source(fns: &[&DeviceFn]) -> String {
        let mut out = String::from(parloop_kernels::PRELUDE);
        let mut done: Vec<&str> = Vec::new();
        for f in fns {
            f.append(&mut out, &mut done);
        }
        out
    }

    fn append(&self, out: &mut String, done: &mut Vec<&'static str>) {
        if done.contains(&self.cname) {
            return;
        }
        done.push(self.cname);
        for dep in self.deps {
            dep.append(out, done);
        }
        out.push_str(self.source);
    }
}

impl Kernel {
    /// Builds a kernel from its parts. Used by `#[parloop::kernel]`;
    /// the host function must follow the [`HostFn`] contract for `params`.
    ///
    /// # Safety
    /// `host` must only access the views as `params` describes them.
    pub const unsafe fn from_parts(
        name: &'static str,
        params: &'static [ParamSig],
        host: HostFn,
        device: Option<&'static DeviceFn>,
    ) -> Kernel {
        Kernel { name, path: name, params, host, lanes: None, device }
    }

    /// Adds the kernel's path, `module::path::name`. Used by
    /// `#[parloop::kernel]`.
    pub const fn with_path(self, path: &'static str) -> Kernel {
        Kernel { path, ..self }
    }

    /// The kernel's path, `module::path::name`: two kernels of one name in
    /// different modules are two rows of the profile.
    ///
    /// ```
    /// #[parloop::kernel]
    /// fn scale(x: &mut f64) {
    ///     *x *= 2.0;
    /// }
    /// assert!(scale::KERNEL.path().ends_with("::scale"));
    /// assert_eq!(scale::KERNEL.name(), "scale");
    /// ```
    pub fn path(&self) -> &'static str {
        self.path
    }

    /// Adds the adapter of the kernel's lane-wise twin. Used by
    /// `#[parloop::kernel]`.
    ///
    /// # Safety
    /// As [`Kernel::from_parts`], for `lanes`.
    pub const unsafe fn with_lanes(self, lanes: HostFn) -> Kernel {
        Kernel { lanes: Some(lanes), ..self }
    }

    /// Whether the CPU backends can run the kernel four or eight elements
    /// at a time with SIMD (see [`Runtime::set_simd`](crate::Runtime::set_simd)).
    /// `#[parloop::kernel]` makes a lane-wise twin when float values never
    /// decide control flow, casts or integer values, and every parameter has
    /// the same float element type.
    pub fn has_lanes(&self) -> bool {
        self.lanes_usable().is_some()
    }

    /// The twin, unless a helper the kernel calls can panic: the twin
    /// calls helpers once per lane under one guard for the group, so a
    /// panic would be reported at the group's first element (the kernel's
    /// own panics are integer-valued, the same in every lane).
    fn lanes_usable(&self) -> Option<HostFn> {
        let helper_may_panic = self.device.is_some_and(|d| d.deps().iter().any(|h| h.may_panic()));
        self.lanes.filter(|_| !helper_may_panic)
    }

    /// The kernel's name (the Rust function's).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The parameter signature.
    pub fn params(&self) -> &'static [ParamSig] {
        self.params
    }

    /// Whether a call may fail on one element and not another (a kernel
    /// panic): see [`DeviceFn::host_may_panic`]; a kernel without a
    /// translation may. Under MPI the ranks agree on such a loop's outcome.
    pub fn may_panic(&self) -> bool {
        self.device.is_none_or(|d| d.host_may_panic())
    }

    /// The kernel's CUDA translation, when it has one.
    pub fn device_fn(&self) -> Option<&'static DeviceFn> {
        self.device
    }

    /// The CUDA C++ module of the kernel (prelude, helpers, device function).
    pub fn cuda_source(&self) -> Option<String> {
        self.device.map(DeviceFn::module_source)
    }

    /// The host adapter: the lane-wise one when `simd` and there is one.
    pub(crate) fn host(&self, simd: bool) -> HostFn {
        match self.lanes_usable() {
            Some(lanes) if simd => lanes,
            _ => self.host,
        }
    }
}
