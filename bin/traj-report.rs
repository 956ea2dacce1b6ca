//! traj-report: see `traj::cmd::report` for what it does and `traj-report --help` for its flags.
use clap::Parser;

fn main() -> std::process::ExitCode {
    let args = traj::cmd::report::Args::parse();
    traj::cli::main("traj-report", || traj::cmd::report::run_cli(args))
}
