//! The airfoil kernels' CUDA translations against the Rust functions: 1000
//! random inputs each through g++, bitwise equal (they use only + - * /,
//! sqrt and abs), and an NVRTC compile for sm_90 without warnings.

#[path = "../../runtime/tests/support/mod.rs"]
mod support;

use parloop::{Backend, Runtime, Strategy};
use parloop_examples::airfoil::kernels::{adt_calc, bres_calc, res_calc, save_soln, update};
use parloop_examples::airfoil::{grid::Grid, Airfoil};
use support::{differential, nvrtc_available, nvrtc_check, nvrtc_compile, Compare, Floats, Ints, Spec};

fn specs() -> Vec<Spec> {
    [save_soln::KERNEL, adt_calc::KERNEL, res_calc::KERNEL, bres_calc::KERNEL, update::KERNEL]
        .into_iter()
        .map(|kernel| Spec { kernel, floats: Floats::Finite, ints: Ints::Small, compare: Compare::Exact })
        .collect()
}

#[test]
fn airfoil_kernels_translate_bitwise_exactly() {
    for (k, spec) in specs().iter().enumerate() {
        differential(spec, 1000, 0xA1F0 + k as u64);
    }
}

#[test]
fn bres_calc_takes_both_boundary_branches() {
    // bound is an i32 in [-1000, 1000]: make sure the wall branch (1) runs.
    let spec = Spec { kernel: bres_calc::KERNEL, floats: Floats::Small, ints: Ints::Full, compare: Compare::Exact };
    differential(&spec, 4000, 7);
}

#[test]
fn airfoil_kernels_compile_with_nvrtc_for_sm_90_without_warnings() {
    if !nvrtc_available() {
        return;
    }
    let failures: Vec<String> = specs().iter().filter_map(|s| nvrtc_check(s.kernel).err()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn airfoil_loops_generate_cuda_that_nvrtc_compiles_for_sm_90_for_every_strategy() {
    if !nvrtc_available() {
        return;
    }
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let grid = Grid::generate(10, 15).unwrap().rounded();
    let airfoil = Airfoil::new(&rt, &grid).unwrap();
    let mut failures = Vec::new();
    for lp in airfoil.loops() {
        for strategy in [Strategy::Staged, Strategy::StagedAtomic, Strategy::Atomic, Strategy::GlobalColour] {
            let source = rt.cuda_loop_source(lp, strategy).unwrap();
            if let Err(e) = nvrtc_compile(&format!("{}/{}", lp.kernel().name(), strategy.name()), &source) {
                failures.push(e);
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
