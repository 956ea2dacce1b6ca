//! traj-compress (not built yet).

/// Flags of traj-compress.
#[derive(Debug, clap::Parser)]
#[command(name = "traj-compress", version)]
pub struct Args {
    #[command(flatten)]
    pub io: crate::cli::IoArgs,
}

/// Run traj-compress.
pub fn run_cli(_args: Args) -> anyhow::Result<crate::cli::Status> {
    crate::usage_bail!("traj-compress is not built yet")
}
