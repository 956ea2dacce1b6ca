//! traj-filter (not built yet).

/// Flags of traj-filter.
#[derive(Debug, clap::Parser)]
#[command(name = "traj-filter", version)]
pub struct Args {
    #[command(flatten)]
    pub io: crate::cli::IoArgs,
}

/// Run traj-filter.
pub fn run_cli(_args: Args) -> anyhow::Result<crate::cli::Status> {
    crate::usage_bail!("traj-filter is not built yet")
}
