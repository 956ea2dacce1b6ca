//! traj-run's engine: the agent loop ([`agent`]) and the run directory ([`rundir`]).

pub mod agent;
pub mod rundir;
