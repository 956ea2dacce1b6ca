//! traj-normalize: see `traj::cmd::normalize` for what it does and `traj-normalize --help` for its flags.
use clap::Parser;

fn main() -> std::process::ExitCode {
    let args = traj::cmd::normalize::Args::parse();
    traj::cli::finish("traj-normalize", traj::cmd::normalize::run_cli(args))
}
