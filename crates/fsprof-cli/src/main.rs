//! `fsprof`: see `fsprof --help`. Exit status: what the profiled command
//! returned for `run`; otherwise 0 on success, 1 when `check` finds an
//! inconsistent profile or `compare` finds an op that changed, 2 on any
//! error.

mod cli;
mod commands;

use clap::error::ErrorKind;
use clap::Parser;

fn main() {
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => parse_error(e),
    };
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

/// Help and version print as clap prints them; a bad command line is one
/// line like every other error (`fsprof: invalid value '1x' for
/// '--file-size <SIZE>': ...`), with the usage when clap has one, exit 2.
fn parse_error(e: clap::Error) -> ! {
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        e.exit();
    }
    let text = e.render().to_string();
    let mut parts = Vec::new();
    let mut usage = String::new();
    for l in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(u) = l.strip_prefix("Usage: ") {
            usage = format!(" (usage: {u}; --help lists the options)");
        } else if !l.starts_with("For more information") {
            parts.push(l.strip_prefix("error: ").unwrap_or(l));
        }
    }
    let first = parts.join(" ").replace(" tip: ", "; tip: ");
    eprintln!("fsprof: {first}{usage}");
    std::process::exit(2);
}
