//! The common `fsprof run [-q] [-f] [-o FILE] -- CMD...` parsed without
//! clap: building clap's command (the subcommand list, then `run`'s
//! arguments) and matching against it was ~0.1 ms of every run's start-up
//! (docs/benchmarks.md, "Start-up cost"). Only an exact subset is taken
//! here; anything else (help, version, any other option, a repeated or
//! odd one, no `--`) goes to clap, so messages and errors are clap's. The
//! test below holds both parsers to the same result on every form this one
//! takes.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use crate::args::{CaptureArgs, ClockArg, MetricsArgs, OutputArgs, SummaryArgs};
use crate::commands::run::{ColdArgs, RunArgs};

/// `run`'s arguments when `args` (with the program name first) is
/// `fsprof run` with only `-q`/`--quiet`, `-f`/`--force` and
/// `-o`/`--output` (each at most once) before `--` and a command after it;
/// `None` for anything else.
pub fn quick_run(args: &[OsString]) -> Option<RunArgs> {
    let (sub, rest) = args.get(1..)?.split_first()?;
    if sub != "run" {
        return None;
    }
    let (mut quiet, mut force, mut output) = (false, false, None);
    let mut it = rest.iter();
    loop {
        let a = it.next()?.as_encoded_bytes();
        match a {
            b"--" => break,
            b"-q" | b"--quiet" if !quiet => quiet = true,
            b"-f" | b"--force" if !force => force = true,
            b"-o" | b"--output" if output.is_none() => output = Some(value(it.next()?)?),
            _ => match a.strip_prefix(b"--output=") {
                Some(v) if output.is_none() => {
                    // SAFETY: `v` is a suffix of an OsStr's encoded bytes
                    // after the ASCII `=`, so it starts at a valid boundary.
                    output = Some(value(unsafe { OsStr::from_encoded_bytes_unchecked(v) })?)
                }
                _ => return None,
            },
        }
    }
    let command: Vec<OsString> = it.cloned().collect();
    if command.is_empty() {
        return None;
    }
    Some(RunArgs {
        out: OutputArgs { output, force },
        capture: CaptureArgs {
            interval: None,
            resolution: fsprof_core::Resolution::DEFAULT,
        },
        clock: ClockArg::Auto,
        summary: SummaryArgs { quiet, top: 5 },
        metrics: MetricsArgs {
            serve_metrics: None,
            metrics_allow_remote: false,
            metrics_argv: false,
        },
        cold: ColdArgs::default(),
        no_aslr: false,
        command,
    })
}

/// An `-o` value clap takes as it is: not empty, and not something that
/// looks like an option (`-` alone is a value).
fn value(v: &OsStr) -> Option<PathBuf> {
    let b = v.as_encoded_bytes();
    (!b.is_empty() && (b == b"-" || !b.starts_with(b"-"))).then(|| PathBuf::from(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn argv(s: &[&str]) -> Vec<OsString> {
        std::iter::once("fsprof")
            .chain(s.iter().copied())
            .map(OsString::from)
            .collect()
    }

    /// clap's `run` arguments for `args`, or its error's kind.
    fn by_clap(args: &[OsString]) -> Result<String, clap::error::ErrorKind> {
        match Cli::try_parse_from(args) {
            Ok(Cli {
                command: Command::Run(a),
            }) => Ok(format!("{:?}", a.0)),
            Ok(other) => panic!("not run: {other:?}"),
            Err(e) => Err(e.kind()),
        }
    }

    /// Every form the quick parser takes parses the same with clap.
    #[test]
    fn quick_forms_parse_as_clap_parses_them() {
        let taken: &[&[&str]] = &[
            &["run", "--", "true"],
            &["run", "-q", "--", "true"],
            &["run", "--quiet", "--", "grep", "-r", "x", "/usr/include"],
            &[
                "run", "-q", "-f", "-o", "out.json", "--", "sh", "-c", "echo hi",
            ],
            &["run", "-o", "-", "-q", "--", "true"],
            &["run", "--output=p.json", "--force", "--", "true"],
            &["run", "--output", "dir/p q.json", "--", "true", "--", "-q"],
            &["run", "--", "--help"],
            &["run", "--", "-o", "x"],
            &["run", "--", ""],
        ];
        for a in taken {
            let args = argv(a);
            let quick = quick_run(&args).unwrap_or_else(|| panic!("{a:?} not taken"));
            assert_eq!(Ok(format!("{quick:?}")), by_clap(&args), "{a:?}");
        }
        // Not UTF-8: taken as bytes, as clap takes a path.
        use std::os::unix::ffi::OsStringExt;
        let mut args = argv(&["run", "-o", "x", "--", "cat"]);
        args[3] = OsString::from_vec(b"p\xff.json".to_vec());
        args[5] = OsString::from_vec(b"f\xfe".to_vec());
        let quick = quick_run(&args).expect("non-UTF-8 taken");
        assert_eq!(Ok(format!("{quick:?}")), by_clap(&args));
    }

    /// Everything else is left to clap, whether clap accepts it (other
    /// options, no `--`, combined flags) or refuses it (a repeated flag, a
    /// missing value or command).
    #[test]
    fn other_forms_are_left_to_clap() {
        let left: &[&[&str]] = &[
            &[],
            &["run"],
            &["run", "--"],
            &["run", "true"],
            &["run", "-q", "true"],
            &["run", "-qf", "--", "true"],
            &["run", "--top", "3", "--", "true"],
            &["run", "--interval", "1s", "--", "true"],
            &["run", "-q", "-q", "--", "true"],
            &["run", "-o", "a", "--output", "b", "--", "true"],
            &["run", "-o", "--", "true"],
            &["run", "-o", "-x", "--", "true"],
            &["run", "-o", "", "--", "true"],
            &["run", "--output=", "--", "true"],
            &["run", "-oout.json", "--", "true"],
            &["run", "--help"],
            &["run", "-h", "--", "true"],
            &["run", "--version", "--", "true"],
            &["report", "--", "true"],
            &["--version"],
        ];
        for a in left {
            assert!(quick_run(&argv(a)).is_none(), "{a:?} taken");
        }
    }
}
