//! traj-normalize (not built yet).

/// Flags of traj-normalize.
#[derive(Debug, clap::Parser)]
#[command(name = "traj-normalize", version)]
pub struct Args {
    #[command(flatten)]
    pub io: crate::cli::IoArgs,
}

/// Run traj-normalize.
pub fn run_cli(_args: Args) -> anyhow::Result<crate::cli::Status> {
    crate::usage_bail!("traj-normalize is not built yet")
}
