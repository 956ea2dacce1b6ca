//! traj-run (not built yet).

/// Flags of traj-run.
#[derive(Debug, clap::Parser)]
#[command(name = "traj-run", version)]
pub struct Args {
    #[command(flatten)]
    pub io: crate::cli::IoArgs,
}

/// Run traj-run.
pub fn run_cli(_args: Args) -> anyhow::Result<crate::cli::Status> {
    crate::usage_bail!("traj-run is not built yet")
}
