//! traj-run: see `traj::cmd::run` for what it does and `traj-run --help` for its flags.
use clap::Parser;

// Hundreds of agent threads allocate and free request and reply buffers at once: glibc's
// malloc took a quarter of traj-run's own CPU in a profile of 256 workers, mimalloc
// measured faster (BENCHMARKS.md bench:run-scale).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // Started inside a sandbox as the supervisor of a kept sandbox (traj::toolbox::pod).
    if let Some(code) = traj::toolbox::pod::serve_if_supervisor() {
        return code;
    }
    let args = traj::cmd::run::Args::parse();
    traj::cli::finish("traj-run", traj::cmd::run::run_cli(args))
}
