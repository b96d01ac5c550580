//! The subcommands, one file each: a command's clap arguments and its
//! handler, which joins them to the library crates that do the work.
//! Groups of arguments several commands share are in `args.rs`.

pub mod agent;
mod analysis;
mod bar;
pub mod bench;
pub mod calibrate;
mod capture;
pub mod check;
pub mod compare;
pub mod compile;
pub mod completions;
pub mod discover;
pub mod export;
pub mod import;
pub mod kernel;
pub mod merge;
pub mod mount;
pub mod plot;
pub mod pull;
pub mod replay;
pub mod report;
pub mod run;
pub mod trace;
