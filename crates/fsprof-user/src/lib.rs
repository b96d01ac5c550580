//! The user layer: `fsprof run` runs a dynamically linked program with the
//! preload shim and turns the counters the shim keeps into a profile. It
//! is a [`fsprof_capture::Source`] ([`UserSource`]); the capture loop,
//! the launcher and the profile's metadata are fsprof-capture's.

pub mod arena;
pub mod clock;
mod collector;
mod layers;
mod notes;
pub mod reader;
pub mod rundir;
mod selfcost;
mod source;
mod written;

pub use clock::{ClockChoice, ClockError};
pub use collector::REFILL_NS;
pub use source::{SetupError, UserOptions, UserSource};
