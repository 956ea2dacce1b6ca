//! The catalog: what traj knows by name, the same on every machine and in every build.
//!
//! - [`toolsets`]: the toolsets, their tool names, which tools traj implements, and the
//!   one rule for which toolsets a distribution may draw.
//! - [`distributions`]: the 17 built-in toolset distributions and the deterministic
//!   per-row draw of traj-sample-tools (and of traj-run's `--distribution`).
//!
//! Nothing here reads the machine or any other part of traj: the data stages
//! (traj-sample-tools) and the agent runtime (`crate::toolbox`) both read it.

pub mod distributions;
pub mod toolsets;

pub use distributions::Distribution;
pub use toolsets::{Toolset, UnknownToolset};
