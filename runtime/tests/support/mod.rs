//! Test support for translated kernels, shared by the runtime's and the
//! examples' tests (`#[path]`-included there).
//!
//! - [`differential`]: runs a kernel on random inputs through the runtime
//!   (the Rust function, via `seq`) and through its CUDA translation
//!   compiled by the host C++ compiler (`__device__` defined empty), loaded
//!   with libloading; compares every output.
//! - [`nvrtc_check`]: compiles a kernel's CUDA module with NVRTC for sm_90
//!   and requires an empty log (no warnings).
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

use parloop::{Access, Arg, Backend, Dat, ElemType, Kernel, ParamSig, Runtime};

/// Float inputs.
#[derive(Clone, Copy, Debug)]
pub enum Floats {
    /// Finite values over many magnitudes, zeros of both signs, edge values.
    Finite,
    /// `Finite` plus NaN and infinities.
    WithNan,
    /// Strictly positive `Finite` magnitudes.
    Positive,
    /// Uniform in [-10, 10].
    Small,
}

/// Integer inputs.
#[derive(Clone, Copy, Debug)]
pub enum Ints {
    /// [-1000, 1000] (unsigned: [0, 1000]).
    Small,
    /// `Small` plus MIN, MAX and neighbours.
    Full,
}

/// How outputs must agree.
#[derive(Clone, Copy, Debug)]
pub enum Compare {
    /// Bitwise (NaN equals NaN).
    Exact,
    /// Within this many units in the last place.
    Ulps(u64),
    /// Bitwise, except that +0 and -0 are equal (min/max of zeros).
    ZerosEqual,
}

/// A kernel and its input domain.
pub struct Spec {
    pub kernel: &'static Kernel,
    pub floats: Floats,
    pub ints: Ints,
    pub compare: Compare,
}

#[path = "rng.rs"]
mod rng;
pub use rng::Rng;

fn float(rng: &mut Rng, d: Floats, f32: bool) -> f64 {
    let (tiny, huge) = if f32 { (1e-38, 1e38) } else { (1e-300, 1e300) };
    let finite = |rng: &mut Rng| -> f64 {
        let r = rng.unit();
        if r < 0.7 {
            (2.0 * rng.unit() - 1.0) * 10f64.powf(6.0 * rng.unit() - 3.0)
        } else if r < 0.85 {
            (rng.next() % 21) as f64 - 10.0
        } else {
            rng.pick(&[0.0, -0.0, 1.0, -1.0, tiny, -tiny, huge, -huge, 0.5, -2.5, 1e-10, 1e10, 3.0, -7.0])
        }
    };
    match d {
        Floats::Finite => finite(rng),
        Floats::WithNan => {
            if rng.unit() < 0.06 {
                rng.pick(&[f64::NAN, f64::INFINITY, f64::NEG_INFINITY])
            } else {
                finite(rng)
            }
        }
        Floats::Positive => {
            let v = finite(rng).abs();
            if v == 0.0 {
                0.25
            } else {
                v
            }
        }
        Floats::Small => 20.0 * rng.unit() - 10.0,
    }
}

fn int(rng: &mut Rng, d: Ints, signed: bool, bits: u32) -> i128 {
    let small = |rng: &mut Rng| -> i128 {
        let v = (rng.next() % 1001) as i128;
        if signed && rng.next().is_multiple_of(2) {
            -v
        } else {
            v
        }
    };
    match d {
        Ints::Small => small(rng),
        Ints::Full => {
            if rng.unit() < 0.2 {
                let (min, max) =
                    if signed { (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1) } else { (0, (1i128 << bits) - 1) };
                rng.pick(&[min, min + 1, max, max - 1, 0, 1, if signed { -1 } else { 2 }])
            } else {
                small(rng)
            }
        }
    }
}

/// Random values of `elem`, as raw 64-bit words (one word per value).
fn values(rng: &mut Rng, elem: ElemType, n: usize, floats: Floats, ints: Ints) -> Vec<u64> {
    (0..n)
        .map(|_| match elem {
            ElemType::F64 => float(rng, floats, false).to_bits(),
            ElemType::F32 => u64::from((float(rng, floats, true) as f32).to_bits()),
            ElemType::I32 => int(rng, ints, true, 32) as i32 as u32 as u64,
            ElemType::U32 => int(rng, ints, false, 32) as u32 as u64,
            ElemType::I64 => int(rng, ints, true, 64) as i64 as u64,
            ElemType::U64 => int(rng, ints, false, 64) as u64,
        })
        .collect()
}

/// A dat of any element type, read back as words.
enum AnyDat {
    F64(Dat<f64>),
    F32(Dat<f32>),
    I32(Dat<i32>),
    U32(Dat<u32>),
    I64(Dat<i64>),
    U64(Dat<u64>),
}

impl AnyDat {
    fn new(rt: &Runtime, set: &parloop::Set, sig: &ParamSig, words: &[u64], index: usize) -> AnyDat {
        let dim = sig.len();
        let name = format!("p{index}");
        let name = name.as_str();
        match sig.elem {
            ElemType::F64 => {
                AnyDat::F64(rt.dat(name, set, dim, words.iter().map(|&w| f64::from_bits(w)).collect()).unwrap())
            }
            ElemType::F32 => {
                AnyDat::F32(rt.dat(name, set, dim, words.iter().map(|&w| f32::from_bits(w as u32)).collect()).unwrap())
            }
            ElemType::I32 => {
                AnyDat::I32(rt.dat(name, set, dim, words.iter().map(|&w| w as u32 as i32).collect()).unwrap())
            }
            ElemType::U32 => AnyDat::U32(rt.dat(name, set, dim, words.iter().map(|&w| w as u32).collect()).unwrap()),
            ElemType::I64 => AnyDat::I64(rt.dat(name, set, dim, words.iter().map(|&w| w as i64).collect()).unwrap()),
            ElemType::U64 => AnyDat::U64(rt.dat(name, set, dim, words.to_vec()).unwrap()),
        }
    }
    fn arg(&self, access: Access) -> Arg {
        match self {
            AnyDat::F64(d) => d.arg(access),
            AnyDat::F32(d) => d.arg(access),
            AnyDat::I32(d) => d.arg(access),
            AnyDat::U32(d) => d.arg(access),
            AnyDat::I64(d) => d.arg(access),
            AnyDat::U64(d) => d.arg(access),
        }
    }
    fn words(&self) -> Vec<u64> {
        match self {
            AnyDat::F64(d) => d.values().unwrap().iter().map(|v| v.to_bits()).collect(),
            AnyDat::F32(d) => d.values().unwrap().iter().map(|v| u64::from(v.to_bits())).collect(),
            AnyDat::I32(d) => d.values().unwrap().iter().map(|&v| v as u32 as u64).collect(),
            AnyDat::U32(d) => d.values().unwrap().iter().map(|&v| v as u64).collect(),
            AnyDat::I64(d) => d.values().unwrap().iter().map(|&v| v as u64).collect(),
            AnyDat::U64(d) => d.values().unwrap(),
        }
    }
}

/// Raw bytes of `words` as values of `elem` (4 or 8 bytes each).
fn to_bytes(elem: ElemType, words: &[u64]) -> Vec<u8> {
    match elem.size() {
        8 => words.iter().flat_map(|w| w.to_ne_bytes()).collect(),
        _ => words.iter().flat_map(|&w| (w as u32).to_ne_bytes()).collect(),
    }
}

fn from_bytes(elem: ElemType, bytes: &[u8]) -> Vec<u64> {
    match elem.size() {
        8 => bytes.chunks_exact(8).map(|c| u64::from_ne_bytes(c.try_into().unwrap())).collect(),
        _ => bytes.chunks_exact(4).map(|c| u64::from(u32::from_ne_bytes(c.try_into().unwrap()))).collect(),
    }
}

fn cpp_type(elem: ElemType) -> &'static str {
    match elem {
        ElemType::F64 => "double",
        ElemType::F32 => "float",
        ElemType::I32 => "int",
        ElemType::U32 => "unsigned int",
        ElemType::I64 => "long long",
        ElemType::U64 => "unsigned long long",
    }
}

/// `(T*)base + offset`, typed as the translated parameter.
fn param_expr(sig: &ParamSig, base: &str, offset: &str) -> String {
    let c = if sig.mutable { "" } else { "const " };
    let t = cpp_type(sig.elem);
    if sig.nested {
        format!("({c}{t} (*)[{}])(({c}{t}*)({base}) + {offset})", sig.cols)
    } else {
        format!("(({c}{t}*)({base}) + {offset})")
    }
}

fn scratch_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("parloop-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Compiles `source` into a shared library with the host C++ compiler.
pub fn build_host_library(name: &str, source: &str) -> libloading::Library {
    let dir = scratch_dir();
    let cpp = dir.join(format!("{name}.cpp"));
    let so = dir.join(format!("lib{name}.so"));
    let full = format!("#include <math.h>\n#define __device__\n{source}");
    std::fs::write(&cpp, &full).unwrap();
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".into());
    let out = Command::new(&cxx)
        .args([
            "-std=c++17",
            "-O2",
            "-fPIC",
            "-shared",
            "-ffp-contract=off",
            "-fno-fast-math",
            "-Wall",
            "-Werror",
            "-o",
        ])
        .arg(&so)
        .arg(&cpp)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the host C++ compiler `{cxx}`: {e}"));
    assert!(
        out.status.success(),
        "{cxx} rejected the translation of `{name}`:\n{}\n--- source ---\n{}",
        String::from_utf8_lossy(&out.stderr),
        numbered(&full)
    );
    // SAFETY: the library is our own freshly compiled code with no initialisers.
    unsafe { libloading::Library::new(&so) }.unwrap()
}

fn numbered(src: &str) -> String {
    src.lines().enumerate().map(|(i, l)| format!("{:4} {l}\n", i + 1)).collect()
}

fn ulps(elem: ElemType, a: u64, b: u64) -> u64 {
    let key = |w: u64| -> i128 {
        match elem {
            ElemType::F64 => {
                let v = w as i64;
                if v < 0 {
                    i128::from(i64::MIN) - i128::from(v)
                } else {
                    i128::from(v)
                }
            }
            _ => {
                let v = w as u32 as i32;
                if v < 0 {
                    i128::from(i32::MIN) - i128::from(v)
                } else {
                    i128::from(v)
                }
            }
        }
    };
    (key(a) - key(b)).unsigned_abs() as u64
}

fn is_nan(elem: ElemType, w: u64) -> bool {
    match elem {
        ElemType::F64 => f64::from_bits(w).is_nan(),
        ElemType::F32 => f32::from_bits(w as u32).is_nan(),
        _ => false,
    }
}

fn is_zero(elem: ElemType, w: u64) -> bool {
    match elem {
        ElemType::F64 => f64::from_bits(w) == 0.0,
        ElemType::F32 => f32::from_bits(w as u32) == 0.0,
        _ => false,
    }
}

fn show(elem: ElemType, w: u64) -> String {
    match elem {
        ElemType::F64 => format!("{:e} ({w:#018x})", f64::from_bits(w)),
        ElemType::F32 => format!("{:e} ({:#010x})", f32::from_bits(w as u32), w as u32),
        ElemType::I32 => format!("{}", w as u32 as i32),
        ElemType::U32 => format!("{}", w as u32),
        ElemType::I64 => format!("{}", w as i64),
        ElemType::U64 => format!("{w}"),
    }
}

/// Runs `spec` on `samples` random inputs through Rust and through its C++
/// translation; panics with the inputs of the first disagreement.
pub fn differential(spec: &Spec, samples: usize, seed: u64) {
    let kernel = spec.kernel;
    let sigs = kernel.params();
    let mut rng = Rng(seed | 1);
    let inputs: Vec<Vec<u64>> =
        sigs.iter().map(|s| values(&mut rng, s.elem, samples * s.len(), spec.floats, spec.ints)).collect();

    // Rust, through the runtime's seq backend and direct arguments.
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let set = rt.set("samples", samples).unwrap();
    let dats: Vec<AnyDat> =
        sigs.iter().zip(&inputs).enumerate().map(|(i, (s, w))| AnyDat::new(&rt, &set, s, w, i)).collect();
    let args: Vec<Arg> =
        dats.iter().zip(sigs).map(|(d, s)| d.arg(if s.mutable { Access::RW } else { Access::READ })).collect();
    rt.par_loop(kernel, &set, &args).unwrap();
    let rust: Vec<Vec<u64>> = dats.iter().map(AnyDat::words).collect();

    // C++, the translation compiled for the host.
    let device = kernel.device_fn().expect("the kernel has a translation");
    let params: Vec<String> =
        sigs.iter().enumerate().map(|(i, s)| param_expr(s, &format!("b[{i}]"), &format!("e * {}", s.len()))).collect();
    let driver = format!(
        "extern \"C\" void pl_drive(void** b, long long n) {{\n    for (long long e = 0; e < n; ++e) {}({});\n}}\n",
        device.cname(),
        params.join(", ")
    );
    let lib = build_host_library(kernel.name(), &format!("{}{driver}", device.module_source()));
    let mut buffers: Vec<Vec<u8>> = sigs.iter().zip(&inputs).map(|(s, w)| to_bytes(s.elem, w)).collect();
    let mut ptrs: Vec<*mut u8> = buffers.iter_mut().map(|b| b.as_mut_ptr()).collect();
    // SAFETY: `pl_drive` has this signature, and every buffer holds
    // `samples` values of its parameter's shape.
    unsafe {
        let drive: libloading::Symbol<unsafe extern "C" fn(*mut *mut u8, i64)> = lib.get(b"pl_drive").unwrap();
        drive(ptrs.as_mut_ptr(), samples as i64);
    }
    let cpp: Vec<Vec<u64>> = sigs.iter().zip(&buffers).map(|(s, b)| from_bytes(s.elem, b)).collect();

    for (p, sig) in sigs.iter().enumerate() {
        for (k, (&r, &c)) in rust[p].iter().zip(&cpp[p]).enumerate() {
            let agree = r == c
                || (is_nan(sig.elem, r) && is_nan(sig.elem, c))
                || match spec.compare {
                    Compare::Exact => false,
                    Compare::Ulps(n) => {
                        sig.elem.size() > 0
                            && matches!(sig.elem, ElemType::F64 | ElemType::F32)
                            && ulps(sig.elem, r, c) <= n
                    }
                    Compare::ZerosEqual => is_zero(sig.elem, r) && is_zero(sig.elem, c),
                };
            if !agree {
                let e = k / sig.len();
                let sample: Vec<String> = sigs
                    .iter()
                    .zip(&inputs)
                    .map(|(s, w)| {
                        let vals: Vec<String> =
                            w[e * s.len()..(e + 1) * s.len()].iter().map(|&v| show(s.elem, v)).collect();
                        format!("[{}]", vals.join(", "))
                    })
                    .collect();
                panic!(
                    "kernel `{}`, parameter {p}, value {k} (sample {e}): Rust {} vs C++ {}\ninputs: {}\n--- translation ---\n{}",
                    kernel.name(),
                    show(sig.elem, r),
                    show(sig.elem, c),
                    sample.join(" "),
                    device.source()
                );
            }
        }
    }
}

/// Whether NVRTC can be loaded; when `PARLOOP_REQUIRE_NVRTC=1` (set by
/// `ci/test`), its absence is a failure rather than a skip.
pub fn nvrtc_available() -> bool {
    // SAFETY: only probes for the library with dlopen.
    let present = unsafe { cudarc::nvrtc::sys::is_culib_present() };
    if !present && std::env::var("PARLOOP_REQUIRE_NVRTC").is_ok_and(|v| v == "1") {
        panic!("PARLOOP_REQUIRE_NVRTC=1 but libnvrtc cannot be loaded (is LD_LIBRARY_PATH set? ci/test sets it)");
    }
    if !present {
        eprintln!("libnvrtc not found: NVRTC checks skipped (ci/test installs it)");
    }
    present
}

/// Compiles the kernel's CUDA module plus a `__global__` wrapper with NVRTC
/// for sm_90; errors with the log when it fails or warns.
pub fn nvrtc_check(kernel: &Kernel) -> Result<(), String> {
    let device = kernel.device_fn().expect("the kernel has a translation");
    let sigs = kernel.params();
    let decls: Vec<String> = sigs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let c = if s.mutable { "" } else { "const " };
            if s.nested {
                format!("{c}{} (*a{i})[{}]", cpp_type(s.elem), s.cols)
            } else {
                format!("{c}{}* a{i}", cpp_type(s.elem))
            }
        })
        .collect();
    let args: Vec<String> = (0..sigs.len()).map(|i| format!("a{i}")).collect();
    let source = format!(
        "{}extern \"C\" __global__ void pl_check({}) {{ {}({}); }}\n",
        device.module_source(),
        decls.join(", "),
        device.cname(),
        args.join(", ")
    );
    nvrtc_compile(kernel.name(), &source)
}

/// Compiles CUDA C++ with NVRTC for sm_90; errors with the log when it
/// fails or warns.
pub fn nvrtc_compile(name: &str, source: &str) -> Result<(), String> {
    use cudarc::nvrtc::result;
    let src = std::ffi::CString::new(source).unwrap();
    let prog = result::create_program(&src, None).map_err(|e| format!("{e:?}"))?;
    let opts = ["--gpu-architecture=sm_90", "-std=c++17", "-lineinfo"];
    // SAFETY: `prog` was just created and is destroyed below.
    let compiled = unsafe { result::compile_program(prog, &opts) };
    // SAFETY: as above.
    let log = unsafe { result::get_program_log(prog) }.map_err(|e| format!("{e:?}"))?;
    let log: String =
        log.iter().map(|&c| c as u8 as char).collect::<String>().trim_end_matches('\0').trim().to_string();
    // SAFETY: as above; not used afterwards.
    unsafe { result::destroy_program(prog) }.map_err(|e| format!("{e:?}"))?;
    if compiled.is_err() || !log.is_empty() {
        return Err(format!("NVRTC on `{name}`: {compiled:?}\n{log}\n--- source ---\n{}", numbered(source)));
    }
    Ok(())
}
