//! traj-normalize: see `traj::cmd::normalize` for what it does and `traj-normalize --help` for its flags.
use clap::Parser;

// Normalisation builds and drops many small `Value`s per row; mimalloc measured
// faster here than the system allocator (docs/bench-normalize.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    let args = traj::cmd::normalize::Args::parse();
    traj::cli::main("traj-normalize", || traj::cmd::normalize::run_cli(args))
}
