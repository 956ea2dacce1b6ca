//! traj-merge: see `traj::cmd::merge` for what it does and `traj-merge --help` for its flags.
use clap::Parser;

fn main() -> std::process::ExitCode {
    let args = traj::cmd::merge::Args::parse();
    traj::cli::main("traj-merge", || traj::cmd::merge::run_cli(args))
}
