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
        Command::Run(a) => run::run(a),
        Command::Report(a) => report::report(a),
        Command::Check(a) => check::check(a),
        Command::Merge(a) => merge::merge(a),
        Command::Kernel(a) => kernel::kernel(a),
        Command::Plot(a) => plot::plot(a),
        Command::Export(a) => export::export(a),
        Command::Compare(a) => compare::compare(a),
        Command::Calibrate(a) => calibrate::calibrate(a),
        Command::Discover(a) => discover::discover(a),
        Command::Trace(a) => trace::trace(a),
        Command::Compile(a) => compile::compile(a),
        Command::Replay(a) => replay::replay(a),
        Command::Import(a) => import::import(a),
        Command::Mount(a) => mount::mount(a),
        Command::Stat(a) => mount::stat(a),
        Command::Umount(a) => mount::umount(a),
        Command::Bench(a) => bench::bench(a),
        Command::Completions(a) => completions::completions(a),
        Command::Man(a) => completions::man(a),
    }
}
