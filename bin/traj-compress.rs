//! traj-compress: see `traj::cmd::compress` for what it does and `traj-compress --help` for its flags.
use clap::Parser;

fn main() -> std::process::ExitCode {
    let args = traj::cmd::compress::Args::parse();
    traj::cli::main("traj-compress", || traj::cmd::compress::run_cli(args))
}
