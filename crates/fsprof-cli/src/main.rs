//! `fsprof`: see `fsprof --help`. Exit status: what the profiled command
//! returned for `run`; otherwise 0 on success, 1 when `check` finds an
//! inconsistent profile or `compare` finds an op that changed, 2 on any
//! error.

// On glibc the C `main` is in `rt.rs` (why there). Elsewhere (musl) std
// learns the arguments only in its own set-up, so `main` stays std's.
#![cfg_attr(all(not(test), target_env = "gnu"), no_main)]

mod args;
mod cli;
mod commands;
mod entry;
mod files;
mod png;
mod quick;
#[cfg(all(not(test), target_env = "musl"))]
mod relro;
#[cfg(all(not(test), target_env = "gnu"))]
mod rt;

use clap::error::ErrorKind;
use clap::Parser;

#[cfg(not(target_env = "gnu"))]
fn main() {
    #[cfg(all(not(test), target_env = "musl"))]
    relro::protect();
    run()
}

#[cfg_attr(test, allow(dead_code))]
fn run() -> ! {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let quick = match quick::quick_run(&args) {
        Some(run) => Some(cli::Command::Run(cli::Lazy(run))),
        None => quick::quick_trace(&args).map(|t| cli::Command::Trace(cli::Lazy(t))),
    };
    let parsed = match quick {
        Some(command) => Ok(cli::Cli { command }),
        None => cli::Cli::try_parse_from(args),
    };
    let cli = parsed.unwrap_or_else(|e| parse_error(e));
    let code = match cli.command.dispatch() {
        Ok(code) => code,
        Err(e) => {
            fsprof_sys::diag!("fsprof: {}", one_line(&e));
            2
        }
    };
    std::process::exit(code);
}

/// The error and its causes on one line: `context: cause: cause`. A
/// cause whose text the line already ends with (an error that prints its
/// source, as `cannot read X: {source}` does) is not repeated.
fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain().map(|c| c.to_string()) {
        if line.is_empty() {
            line = cause;
        } else if !line.ends_with(&cause) {
            line.push_str(": ");
            line.push_str(&cause);
        }
    }
    line
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
    fsprof_sys::diag!("fsprof: {first}{usage}");
    std::process::exit(2);
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn causes_are_printed_once() {
        let io = std::io::Error::from_raw_os_error(libc::ENOENT);
        let e = fsprof_core::format::FormatError::Read {
            path: "p.json".into(),
            source: io,
        };
        let e = anyhow::Error::new(e).context("comparing");
        assert_eq!(
            one_line(&e),
            "comparing: cannot read p.json: No such file or directory (os error 2)"
        );
    }
}
