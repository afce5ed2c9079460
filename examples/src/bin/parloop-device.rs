//! Describes the device parloop would use and measures its device-to-device
//! copy bandwidth (the yardstick for the loops' GB/s).
//!
//! `cargo run --release --bin parloop-device -- --backend cuda --bytes 2147483648`

use std::process::ExitCode;

use clap::Parser;
use parloop::{Backend, Runtime};

#[derive(Parser, Debug)]
#[command(about = "Describes the parloop device and measures its copy bandwidth")]
struct Args {
    /// Backend: auto, emu or cuda.
    #[arg(long, default_value = "auto")]
    backend: String,
    /// Bytes per copy.
    #[arg(long, default_value_t = 1 << 30)]
    bytes: usize,
    /// Timed copies.
    #[arg(long, default_value_t = 20)]
    repeats: usize,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let result = args.backend.parse::<Backend>().and_then(Runtime::with_backend).and_then(|rt| {
        let name = rt.device_name().unwrap_or_else(|| format!("{} (no device)", rt.backend()));
        println!("device: {name}");
        if let Some(p) = rt.device_properties() {
            if let Some((major, minor)) = p.compute_capability {
                println!("compute capability: {major}.{minor}");
            }
            println!("multiprocessors: {}", p.multiprocessors);
            println!(
                "shared memory per block: {} KiB ({} KiB opt-in)",
                p.shared_memory_per_block >> 10,
                p.shared_memory_per_block_optin >> 10
            );
            if p.global_memory > 0 {
                println!("global memory: {:.1} GiB", p.global_memory as f64 / (1u64 << 30) as f64);
            }
        }
        let gbs = rt.copy_bandwidth(args.bytes, args.repeats)?;
        println!("copy bandwidth: {gbs:.1} GB/s ({} MiB per copy, read + written)", args.bytes >> 20);
        Ok(())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("parloop-device: error: {e}");
            ExitCode::FAILURE
        }
    }
}
