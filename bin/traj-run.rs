//! traj-run: see `traj::cmd::run` for what it does and `traj-run --help` for its flags.
use clap::Parser;

fn main() -> std::process::ExitCode {
    // Started inside a sandbox as the supervisor of a kept sandbox (traj::toolbox::pod).
    if let Some(code) = traj::toolbox::pod::serve_if_supervisor() {
        return code;
    }
    let args = traj::cmd::run::Args::parse();
    traj::cli::finish("traj-run", traj::cmd::run::run_cli(args))
}
