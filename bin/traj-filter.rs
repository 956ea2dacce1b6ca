//! traj-filter: see `traj::cmd::filter` for what it does and `traj-filter --help` for its flags.
use clap::Parser;

fn main() -> std::process::ExitCode {
    let args = traj::cmd::filter::Args::parse();
    traj::cli::main("traj-filter", || traj::cmd::filter::run_cli(args))
}
