//! Describes the device parloop would use and measures its device-to-device
//! copy bandwidth (the yardstick for the loops' GB/s).
//!
//! `cargo run --release --bin parloop-device -- --backend cuda --bytes 2147483648`

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use parloop::{Backend, Error, Runtime};
use parloop_examples::cli::{count, invalid, stdout_error};

#[derive(Parser, Debug)]
#[command(
    allow_negative_numbers = true,
    about = "Describes the parloop device and measures its copy bandwidth",
    long_about = "Describes the parloop device and measures its copy bandwidth.\n\n\
                  The backend is a device backend: cuda (a GPU) or emu (the emulated device, whose \
                  buffers are host memory); auto is cuda where a GPU is present, else emu."
)]
struct Args {
    /// Backend: auto, emu or cuda (default: PARLOOP_BACKEND, else auto).
    #[arg(long, value_parser = ["auto", "emu", "cuda"])]
    backend: Option<String>,
    /// Bytes per copy (at least 1).
    #[arg(long, value_name = "N", default_value = "1073741824", value_parser = count)]
    bytes: usize,
    /// Timed copies (at least 1), after one untimed warm-up copy.
    #[arg(long, value_name = "N", default_value = "20", value_parser = count)]
    repeats: usize,
}

/// The device backend of `--backend` (`option`), else of `PARLOOP_BACKEND`,
/// else auto: cuda where a GPU is present, else emu (and `true`: the
/// emulator stands in for a missing GPU).
fn device_backend(option: Option<&str>) -> Result<(Backend, bool), Error> {
    let from_env = option.is_none();
    let backend = match option {
        Some("auto") => None,
        Some(b) => Some(b.parse()?),
        None => match std::env::var("PARLOOP_BACKEND") {
            Ok(b) if !b.trim().is_empty() && !b.trim().eq_ignore_ascii_case("auto") => {
                Some(parloop_examples::cli::backend(None)?)
            }
            _ => None,
        },
    };
    match backend {
        None if Backend::auto() == Backend::Cuda => Ok((Backend::Cuda, false)),
        None => Ok((Backend::Emu, true)),
        Some(b @ (Backend::Emu | Backend::Cuda)) => Ok((b, false)),
        Some(b) if from_env => Err(Error::Env {
            var: "PARLOOP_BACKEND",
            value: b.to_string(),
            reason: "parloop-device measures a device backend (emu or cuda); pass --backend auto, emu or cuda".into(),
        }),
        Some(b) => Err(invalid("--backend", format!("{b}: a device backend expected (auto, emu or cuda)"))),
    }
}

/// `bytes` in the largest binary unit it makes at least one of.
fn size(bytes: usize) -> String {
    match bytes {
        b if b < 1 << 10 => format!("{b} bytes"),
        b if b < 1 << 20 => format!("{:.1} KiB", b as f64 / (1u64 << 10) as f64),
        b if b < 1 << 30 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
    }
}

fn run(args: Args) -> Result<(), Error> {
    if args.bytes == 0 {
        return Err(invalid("--bytes", "0: a copy of at least 1 byte"));
    }
    if args.repeats == 0 {
        return Err(invalid("--repeats", "0: at least 1 timed copy"));
    }
    let (backend, stand_in) = device_backend(args.backend.as_deref())?;
    let rt = Runtime::with_backend(backend)?;
    // Checked writes: a full disk or a closed pipe is an error, not a panic.
    let mut out = std::io::stdout().lock();
    let name = rt.device_name().unwrap_or_else(|| format!("{} (no device)", rt.backend()));
    let note =
        if stand_in { " (no CUDA GPU found: auto measures the emulator, whose buffers are host memory)" } else { "" };
    writeln!(out, "device: {name}; backend {}{note}", rt.backend()).map_err(stdout_error)?;
    if let Some(p) = rt.device_properties() {
        if let Some((major, minor)) = p.compute_capability {
            writeln!(out, "compute capability: {major}.{minor}").map_err(stdout_error)?;
        }
        writeln!(out, "multiprocessors: {}", p.multiprocessors).map_err(stdout_error)?;
        writeln!(
            out,
            "shared memory per block: {} KiB ({} KiB opt-in)",
            p.shared_memory_per_block >> 10,
            p.shared_memory_per_block_optin >> 10
        )
        .map_err(stdout_error)?;
        if p.global_memory > 0 {
            writeln!(out, "global memory: {:.1} GiB", p.global_memory as f64 / (1u64 << 30) as f64)
                .map_err(stdout_error)?;
        }
    }
    out.flush().map_err(stdout_error)?;
    let gbs = rt.copy_bandwidth(args.bytes, args.repeats)?;
    writeln!(
        out,
        "copy bandwidth: {gbs:.1} GB/s ({} per copy, read + written; {} timed copies)",
        size(args.bytes),
        args.repeats
    )
    .map_err(stdout_error)?;
    out.flush().map_err(stdout_error)
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("parloop-device: error: {e}");
            ExitCode::FAILURE
        }
    }
}
