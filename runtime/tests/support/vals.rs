//! Running a kernel with direct arguments of any element type on `seq`
//! and on the device backend, values compared as 64-bit words: the
//! harness of the construct-by-construct translation tests
//! (`kernel_semantics.rs`, `kernel_methods.rs`).
#![allow(dead_code)]

use super::device::device_backend;
use parloop::{Access, Arg, Backend, Dat, Kernel, Runtime};

/// Values of one parameter, all elements, as words of its element type.
#[derive(Clone, Debug, PartialEq)]
pub enum Vals {
    F64(Vec<f64>),
    F32(Vec<f32>),
    I32(Vec<i32>),
    U32(Vec<u32>),
    I64(Vec<i64>),
    U64(Vec<u64>),
}

impl Vals {
    pub fn len(&self) -> usize {
        match self {
            Vals::F64(v) => v.len(),
            Vals::F32(v) => v.len(),
            Vals::I32(v) => v.len(),
            Vals::U32(v) => v.len(),
            Vals::I64(v) => v.len(),
            Vals::U64(v) => v.len(),
        }
    }
    /// Bitwise equality (NaN bits compared as bits).
    pub fn bits(&self) -> Vec<u64> {
        match self {
            Vals::F64(v) => v.iter().map(|x| x.to_bits()).collect(),
            Vals::F32(v) => v.iter().map(|x| u64::from(x.to_bits())).collect(),
            Vals::I32(v) => v.iter().map(|&x| x as u32 as u64).collect(),
            Vals::U32(v) => v.iter().map(|&x| x as u64).collect(),
            Vals::I64(v) => v.iter().map(|&x| x as u64).collect(),
            Vals::U64(v) => v.clone(),
        }
    }
}

enum AnyDat {
    F64(Dat<f64>),
    F32(Dat<f32>),
    I32(Dat<i32>),
    U32(Dat<u32>),
    I64(Dat<i64>),
    U64(Dat<u64>),
}

impl AnyDat {
    fn new(rt: &Runtime, set: &parloop::Set, name: &str, dim: usize, v: &Vals) -> AnyDat {
        match v {
            Vals::F64(v) => AnyDat::F64(rt.dat(name, set, dim, v.clone()).unwrap()),
            Vals::F32(v) => AnyDat::F32(rt.dat(name, set, dim, v.clone()).unwrap()),
            Vals::I32(v) => AnyDat::I32(rt.dat(name, set, dim, v.clone()).unwrap()),
            Vals::U32(v) => AnyDat::U32(rt.dat(name, set, dim, v.clone()).unwrap()),
            Vals::I64(v) => AnyDat::I64(rt.dat(name, set, dim, v.clone()).unwrap()),
            Vals::U64(v) => AnyDat::U64(rt.dat(name, set, dim, v.clone()).unwrap()),
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
    /// The values; under the lazy trace (`PARLOOP_LAZY=1`) a failed loop's
    /// error comes here.
    fn vals(&self) -> Result<Vals, String> {
        let e = |e: parloop::Error| e.to_string();
        Ok(match self {
            AnyDat::F64(d) => Vals::F64(d.values().map_err(e)?),
            AnyDat::F32(d) => Vals::F32(d.values().map_err(e)?),
            AnyDat::I32(d) => Vals::I32(d.values().map_err(e)?),
            AnyDat::U32(d) => Vals::U32(d.values().map_err(e)?),
            AnyDat::I64(d) => Vals::I64(d.values().map_err(e)?),
            AnyDat::U64(d) => Vals::U64(d.values().map_err(e)?),
        })
    }
}

/// Runs `kernel` over `n` elements on `backend`, each parameter a direct
/// dat with `inputs[p]` (READ for `&`, RW for `&mut`); the values after.
pub fn run_on(backend: Backend, kernel: &'static Kernel, n: usize, inputs: &[Vals]) -> Result<Vec<Vals>, String> {
    let sigs = kernel.params();
    assert_eq!(sigs.len(), inputs.len(), "one input per parameter");
    let rt = Runtime::with_backend(backend).map_err(|e| e.to_string())?;
    let set = rt.set("elems", n).unwrap();
    let dats: Vec<AnyDat> = sigs
        .iter()
        .zip(inputs)
        .enumerate()
        .map(|(i, (s, v))| {
            assert_eq!(v.len(), n * s.len(), "parameter {i}: {} values per element", s.len());
            AnyDat::new(&rt, &set, &format!("p{i}"), s.len(), v)
        })
        .collect();
    let args: Vec<Arg> =
        dats.iter().zip(sigs).map(|(d, s)| d.arg(if s.mutable { Access::RW } else { Access::READ })).collect();
    rt.par_loop(kernel, &set, &args).map_err(|e| e.to_string())?;
    dats.iter().map(AnyDat::vals).collect()
}

/// Seq and the device backend on the same inputs; both results.
pub fn seq_and_device(kernel: &'static Kernel, n: usize, inputs: &[Vals]) -> (Vec<Vals>, Vec<Vals>) {
    let seq = run_on(Backend::Seq, kernel, n, inputs).unwrap_or_else(|e| panic!("seq: {e}"));
    let dev = run_on(device_backend(), kernel, n, inputs).unwrap_or_else(|e| {
        panic!(
            "{:?}: {e}\n--- translation ---\n{}",
            device_backend(),
            kernel.device_fn().map(|d| d.source().to_string()).unwrap_or_default()
        )
    });
    (seq, dev)
}

/// Seq equals `want` (the plain Rust calls; every parameter's values after
/// the loop) and the device equals seq, bitwise.
pub fn check(kernel: &'static Kernel, n: usize, inputs: &[Vals], want: &[Vals]) {
    let (seq, dev) = seq_and_device(kernel, n, inputs);
    assert_eq!(want.len(), seq.len(), "one expected value list per parameter");
    for (p, w) in want.iter().enumerate() {
        assert_eq!(
            seq[p].bits(),
            w.bits(),
            "{}: seq vs plain Rust, parameter {p}: {:?} vs {:?}",
            kernel.name(),
            seq[p],
            w
        );
    }
    for p in 0..seq.len() {
        assert_eq!(
            dev[p].bits(),
            seq[p].bits(),
            "{}: device vs seq, parameter {p}:\n device {:?}\n seq    {:?}\n--- translation ---\n{}",
            kernel.name(),
            dev[p],
            seq[p],
            kernel.device_fn().map(|d| d.source().to_string()).unwrap_or_default()
        );
    }
}
