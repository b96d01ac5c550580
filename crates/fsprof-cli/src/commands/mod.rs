//! The subcommands, one file each: clap's arguments are in `cli.rs`, the
//! work in the library crates; these files join the two.

mod analysis;
mod bar;
pub mod bench;
mod calibrate;
mod capture;
mod check;
mod compare;
pub mod compile;
pub mod completions;
pub(crate) mod discover;
mod export;
pub mod import;
mod kernel;
mod merge;
pub(crate) mod mount;
mod plot;
pub mod replay;
mod report;
mod run;
pub mod trace;

use crate::cli::{Cli, Command};

/// Runs a subcommand; the result is the process exit status.
pub fn dispatch(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Run(a) => run::run(a.0),
        Command::Report(a) => report::report(a.0),
        Command::Check(a) => check::check(a.0),
        Command::Merge(a) => merge::merge(a.0),
        Command::Kernel(a) => kernel::kernel(a.0),
        Command::Plot(a) => plot::plot(a.0),
        Command::Export(a) => export::export(a.0),
        Command::Compare(a) => compare::compare(a.0),
        Command::Calibrate(a) => calibrate::calibrate(a.0),
        Command::Discover(a) => discover::discover(a.0),
        Command::Trace(a) => trace::trace(a.0),
        Command::Compile(a) => compile::compile(a.0),
        Command::Replay(a) => replay::replay(a.0),
        Command::Import(a) => import::import(a.0),
        Command::Mount(a) => mount::mount(a.0),
        Command::Stat(a) => mount::stat(a.0),
        Command::Umount(a) => mount::umount(a.0),
        Command::Bench(a) => bench::bench(a.0),
        Command::Completions(a) => completions::completions(a.0),
        Command::Man(a) => completions::man(a.0),
    }
}
