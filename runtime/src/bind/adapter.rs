//! The host adapter macros `#[parloop::kernel]`'s expansion calls (through
//! `$crate::__private`): the scalar adapter, which runs a kernel over a range
//! in batches, and the lane-wise adapter, which runs its twins over groups
//! of elements with the scalar one for the rest.

/// The group loop of a lane-wise adapter (see [`__host_adapter`]): runs
/// the twin `$twin` of `$width` lanes over every whole group of
/// `start..end`, compiled for the CPU features `$features`; returns where
/// the scalar tail starts.
///
/// Software-pipelined: group `g + 1` is gathered and computed before the
/// increments of group `g` are added, so that the out-of-order core
/// overlaps `g`'s chain of read-modify-writes (neighbouring elements share
/// targets, so each add waits for the store before it) with `g + 1`'s loads
/// and arithmetic. Increments still land group after group, lane after
/// lane, argument after argument: every target receives its contributions
/// in element order, as in the scalar adapter, so results are bitwise the
/// same. Computing `g + 1` first is sound because no kernel reads what a
/// mapped increment writes: validation rejects a dat that is incremented
/// and otherwise accessed in one loop (`validate::check_conflicts`), mapped
/// increments start from zero, and direct writes touch only their own
/// element (stored before the next group is gathered).
#[doc(hidden)]
#[macro_export]
macro_rules! __lane_groups {
    ($name:ident, $width:literal, $features:literal, $twin:ident, $( $param:ident : $ty:ty ),* $(,)?) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        #[allow(unused_mut, unused_variables, clippy::too_many_arguments)]
        unsafe fn $name(views: &[$crate::__private::ArgView], start: usize, end: usize) -> usize {
            const __PL_LANE_WIDTH: usize = $width;
            if start + __PL_LANE_WIDTH > end {
                return start;
            }
            // Two binders per argument, used in turn when pipelined: one
            // holds the group computed and not yet added, the other the next
            // group.
            // The twin, named before the parameters' binders, which take
            // the parameters' names and could shadow it (see `__host_adapter`).
            let twin = $twin;
            let mut group = views.iter();
            $(
                let view = *group.next().expect("validated argument count");
                let mut $param = [
                    $crate::__private::LaneBinder::<<$ty as $crate::__private::KernelParam>::Shape, { __PL_LANE_WIDTH }>::new(view),
                    $crate::__private::LaneBinder::<<$ty as $crate::__private::KernelParam>::Shape, { __PL_LANE_WIDTH }>::new(view),
                ];
            )*
            // Gathers group `$first` into binders `$b`, runs the twin, stores
            // direct results and turns increments into rows.
            macro_rules! compute {
                ($b:literal, $first:expr) => {{
                    let first = $first;
                    // SAFETY: the HostFn contract, `lanes_usable` held, and
                    // the caller detected `$features`.
                    unsafe {
                        $( $param[$b].load(first); )*
                        // The lanes of a group share every integer value, so a
                        // panic is the group's first element's.
                        let guard = $crate::__private::ElementGuard(first);
                        twin( $( <$ty as $crate::__private::KernelParam>::bind_lanes(&mut $param[$b]) ),* );
                        ::core::mem::forget(guard);
                        // Only `&mut` parameters write; the others' checks
                        // are compiled out rather than made per lane.
                        $( if <$ty as $crate::__private::KernelParam>::SIG.mutable { $param[$b].store_direct(first); } )*
                        $( if <$ty as $crate::__private::KernelParam>::SIG.mutable { $param[$b].finish(); } )*
                    }
                }};
            }
            // Adds the increments of group `$first`, held by binders `$b`,
            // lane by lane and argument by argument (the scalar order).
            macro_rules! add {
                ($b:literal, $first:expr) => {{
                    let first = $first;
                    for l in 0..__PL_LANE_WIDTH {
                        // SAFETY: as in `compute`, after it for this group.
                        $( if <$ty as $crate::__private::KernelParam>::SIG.mutable { unsafe { $param[$b].store_lane(l, first) }; } )*
                    }
                }};
            }
            let mut first = start;
            if !$crate::__private::lanes_pipelined(views) {
                // Nothing to overlap (no mapped increment): one group at a
                // time.
                while first + __PL_LANE_WIDTH <= end {
                    compute!(0, first);
                    add!(0, first);
                    first += __PL_LANE_WIDTH;
                }
                return first;
            }
            compute!(0, first);
            loop {
                // Binders 0 hold group `first`.
                if first + 2 * __PL_LANE_WIDTH > end {
                    add!(0, first);
                    return first + __PL_LANE_WIDTH;
                }
                compute!(1, first + __PL_LANE_WIDTH);
                add!(0, first);
                first += __PL_LANE_WIDTH;
                // Binders 1 hold group `first`.
                if first + 2 * __PL_LANE_WIDTH > end {
                    add!(1, first);
                    return first + __PL_LANE_WIDTH;
                }
                compute!(0, first + __PL_LANE_WIDTH);
                add!(1, first);
                first += __PL_LANE_WIDTH;
            }
        }
    };
}

/// Generates a kernel's host adapter (used by `#[parloop::kernel]`): an
/// `unsafe fn $host(views, start, end)` that runs the kernel over elements
/// `start..end` in batches (see [`Binder`](super::Binder)).
#[doc(hidden)]
#[macro_export]
macro_rules! __host_adapter {
    // The adapter of lane-wise twins `$lanes4` (four lanes, AVX2) and
    // `$lanes8` (eight, AVX-512; see `parloop::lanes`): groups of elements
    // where `lanes::usable` holds, with the scalar adapter `$scalar` for the
    // rest of the range and for loops lanes cannot run.
    ($host:ident, lanes = [$lanes4:ident, $lanes8:ident], scalar = $scalar:ident, exact = [$($exact:expr),*],
     $( $param:ident : $ty:ty ),* $(,)?) => {
        #[allow(unused_mut, unused_variables, clippy::too_many_arguments)]
        unsafe fn $host(views: &[$crate::__private::ArgView], start: usize, end: usize) {
            if end - start < $crate::__private::LANES || !$crate::__private::lanes_usable(views, &[$($exact),*]) {
                // SAFETY: forwarded HostFn contract.
                return unsafe { $scalar(views, start, end) };
            }
            $crate::__lane_groups!(groups_avx2, 4, "avx2,fma", $lanes4, $( $param: $ty ),*);
            $crate::__lane_groups!(groups_avx512, 8, "avx2,fma,avx512f,avx512vl", $lanes8, $( $param: $ty ),*);
            // Twins run only where their instruction set does; elsewhere the
            // scalar adapter runs the whole range.
            #[cfg(target_arch = "x86_64")]
            let tail = match $crate::__private::vector_isa() {
                // Eight-lane groups, then one four-lane group where four to
                // seven elements remain.
                // SAFETY: AVX-512 F and VL (and so AVX2 and FMA) were
                // detected; the rest is forwarded.
                $crate::__private::VectorIsa::Avx512 => unsafe {
                    groups_avx2(views, groups_avx512(views, start, end), end)
                },
                // SAFETY: AVX2 and FMA were detected; the rest is forwarded.
                $crate::__private::VectorIsa::Avx2 => unsafe { groups_avx2(views, start, end) },
                $crate::__private::VectorIsa::None => start,
            };
            #[cfg(not(target_arch = "x86_64"))]
            let tail = start;
            // SAFETY: forwarded contract.
            unsafe { $scalar(views, tail, end) }
        }
    };
    ($host:ident, $name:ident, $( $param:ident : $ty:ty ),* $(,)?) => {
        #[allow(unused_mut, unused_variables, clippy::too_many_arguments)]
        unsafe fn $host(views: &[$crate::__private::ArgView], start: usize, end: usize) {
            // The kernel, named before the binders below take the
            // parameters' names: a parameter called like its kernel
            // (`fn rms(rms: &mut f64)`) shadowed the function, and the
            // adapter did not compile. (A zero-sized fn item: calls stay
            // direct.)
            let kernel = $name;
            let mut views = views.iter();
            $(
                let mut $param = $crate::__private::Binder::<
                    <$ty as $crate::__private::KernelParam>::Shape,
                >::new(*views.next().expect("validated argument count"));
            )*
            let mut unmapped = true;
            $( unmapped &= $param.unmapped(); )*
            if unmapped {
                // No maps: pointers inline, no batches.
                for e in start..end {
                    // Names the element if the kernel panics (see
                    // `kernel_panic`); forgotten, so it costs nothing else.
                    let guard = $crate::__private::ElementGuard(e);
                    // SAFETY: the executor upholds the HostFn contract.
                    unsafe { kernel( $( <$ty as $crate::__private::KernelParam>::bind_at(&$param, e) ),* ) };
                    ::core::mem::forget(guard);
                }
                return;
            }
            let mut batch = $crate::__private::BATCH;
            $( if $param.sequential() { batch = 1; } )*
            let mut first = start;
            while first < end {
                let n = batch.min(end - first);
                // SAFETY: the executor upholds the HostFn contract.
                unsafe {
                    $( $param.prepare(first, n); )*
                    for i in 0..n {
                        let guard = $crate::__private::ElementGuard(first + i);
                        kernel( $( <$ty as $crate::__private::KernelParam>::bind(&mut $param, i) ),* );
                        ::core::mem::forget(guard);
                    }
                    for i in 0..n {
                        $( $param.finish(i, first + i); )*
                    }
                }
                first += n;
            }
        }
    };
}
