//! traj-run: see `traj::cmd::run` for what it does and `traj-run --help` for its flags.
use clap::Parser;

fn main() -> std::process::ExitCode {
    let args = traj::cmd::run::Args::parse();
    traj::cli::finish("traj-run", traj::cmd::run::run_cli(args))
}
