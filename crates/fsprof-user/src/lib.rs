//! The user layer: `fsprof run` runs a dynamically linked program with the
//! preload shim and turns the counters the shim keeps into a profile.

pub mod clock;
mod collector;
pub mod launch;
pub mod reader;
pub mod rundir;
mod selfcost;
mod session;
pub mod sysinfo;

pub use clock::ClockChoice;
pub use launch::LaunchError;
pub use session::{run, LiveSink, RunError, RunOptions, RunOutcome};
