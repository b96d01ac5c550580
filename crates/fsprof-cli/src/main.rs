//! `fsprof`: see `fsprof --help`. Exit status: what the profiled command
//! returned for `run`; otherwise 0 on success, 1 when `check` finds an
//! inconsistent profile or `compare` finds an op that changed, 2 on any
//! error.

mod cli;
mod commands;

use clap::Parser;

fn main() {
    let cli = cli::Cli::parse();
    let code = match commands::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("fsprof: {}", one_line(&e));
            2
        }
    };
    std::process::exit(code);
}

/// The error and its causes on one line: `context: cause: cause`.
fn one_line(e: &anyhow::Error) -> String {
    e.chain()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(": ")
}
