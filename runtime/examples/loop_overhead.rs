//! Host cost per loop where the kernel costs nothing: `N` loops
//! `y = 0.5 y + x` over a set of one element, ten per window, each window
//! ended by a host read, eager, through the lazy trace, or replayed.
//!
//! ```text
//! cargo run --release -p parloop --example loop_overhead -- [eager|lazy|replay] [seq|threads] [N]
//! perf stat -e instructions:u target/release/examples/loop_overhead replay seq 1000000
//! ```
//! Wall time per loop is printed; on a shared machine count instructions
//! (`perf stat`) to compare two builds, since they do not depend on load.

use parloop::{Access, Backend, ParLoop, Runtime};

#[parloop::kernel]
fn axpy(x: &f64, y: &mut f64) {
    *y = 0.5 * *y + *x;
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut argv = std::env::args().skip(1);
    let mode = argv.next().unwrap_or_else(|| "eager".into());
    let backend = match argv.next().as_deref() {
        Some("threads") => Backend::Threads,
        _ => Backend::Seq,
    };
    let loops: u64 = argv.next().map(|n| n.parse()).transpose()?.unwrap_or(1_000_000);
    let rt = Runtime::with_lazy(backend, mode != "eager")?;
    rt.set_replay(mode == "replay");
    let s = rt.set("one", 1)?;
    let x = rt.dat("x", &s, 1, vec![1.0f64])?;
    let y = rt.dat("y", &s, 1, vec![0.0f64])?;
    let lp = ParLoop::new(axpy::KERNEL, &s, &[x.arg(Access::READ), y.arg(Access::RW)])?;
    let start = std::time::Instant::now();
    for _ in 0..loops / 10 {
        for _ in 0..10 {
            rt.execute(&lp)?;
        }
        y.values()?;
    }
    let secs = start.elapsed().as_secs_f64();
    println!("{mode} {}: {:.3} us per loop ({loops} loops)", backend.name(), secs * 1e6 / loops as f64);
    Ok(())
}
