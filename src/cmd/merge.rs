//! traj-merge (not built yet).

/// Flags of traj-merge.
#[derive(Debug, clap::Parser)]
#[command(name = "traj-merge", version)]
pub struct Args {
    #[command(flatten)]
    pub io: crate::cli::IoArgs,
}

/// Run traj-merge.
pub fn run_cli(_args: Args) -> anyhow::Result<crate::cli::Status> {
    crate::usage_bail!("traj-merge is not built yet")
}
