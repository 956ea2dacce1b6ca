//! traj-sample-tools: see `traj::cmd::sample` for what it does and `traj-sample-tools --help` for its flags.
use clap::Parser;

fn main() -> std::process::ExitCode {
    let args = traj::cmd::sample::Args::parse();
    traj::cli::main("traj-sample-tools", || traj::cmd::sample::run_cli(args))
}
