//! traj-sample-tools (not built yet).

/// Flags of traj-sample-tools.
#[derive(Debug, clap::Parser)]
#[command(name = "traj-sample-tools", version)]
pub struct Args {
    #[command(flatten)]
    pub io: crate::cli::IoArgs,
}

/// Run traj-sample-tools.
pub fn run_cli(_args: Args) -> anyhow::Result<crate::cli::Status> {
    crate::usage_bail!("traj-sample-tools is not built yet")
}
