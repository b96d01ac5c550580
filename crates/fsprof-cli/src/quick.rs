//! The common `fsprof run [-q] [-f] [-o FILE] -- CMD...` and `fsprof trace
//! [-q] [-f] [-o TRACE] [--data MODE] -- CMD...` parsed without clap:
//! building clap's command (the subcommand list, then `run`'s arguments)
//! and matching against it was ~0.1 ms of every run's start-up
//! (docs/benchmarks.md, "Start-up cost"), and for `trace`, as root, it
//! was before the page-fault programs start attaching, which the held
//! command waits for (docs/benchmarks/trace-replay.md). Only an exact subset is taken
//! here; anything else (help, version, any other option, a repeated or
//! odd one, no `--`) goes to clap, so messages and errors are clap's. The
//! test below holds both parsers to the same result on every form this one
//! takes.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use crate::args::{CaptureArgs, ClockArg, MetricsArgs, OutputArgs, SummaryArgs};
use crate::commands::run::{ColdArgs, RunArgs};
use crate::commands::trace::{DataArg, TraceArgs};

/// `run`'s arguments when `args` (with the program name first) is
/// `fsprof run` with only `-q`/`--quiet`, `-f`/`--force` and
/// `-o`/`--output` (each at most once) before `--` and a command after it;
/// `None` for anything else.
pub fn quick_run(args: &[OsString]) -> Option<RunArgs> {
    let q = quick(args, "run", false)?;
    Some(RunArgs {
        out: OutputArgs {
            output: q.output,
            force: q.force,
        },
        capture: CaptureArgs {
            interval: None,
            resolution: fsprof_core::Resolution::DEFAULT,
        },
        clock: ClockArg::Auto,
        summary: SummaryArgs {
            quiet: q.quiet,
            top: 5,
        },
        metrics: MetricsArgs {
            serve_metrics: None,
            metrics_allow_remote: false,
            metrics_argv: false,
        },
        cold: ColdArgs::default(),
        no_aslr: false,
        command: q.command,
    })
}

/// `trace`'s arguments when `args` is `fsprof trace` with only `-q`, `-f`,
/// `-o` and `--data` (each at most once, `--data` with one of its three
/// values) before `--` and a command after it; `None` for anything else
/// (`trace show` among it).
pub fn quick_trace(args: &[OsString]) -> Option<TraceArgs> {
    let q = quick(args, "trace", true)?;
    Some(TraceArgs {
        sub: None,
        output: q.output,
        profile: None,
        force: q.force,
        data: q.data.unwrap_or(DataArg::Digest),
        clock: ClockArg::Auto,
        summary: SummaryArgs {
            quiet: q.quiet,
            top: 5,
        },
        command: q.command,
    })
}

/// The options both quick forms take.
struct Quick {
    quiet: bool,
    force: bool,
    output: Option<PathBuf>,
    data: Option<DataArg>,
    command: Vec<OsString>,
}

/// `fsprof SUB [options] -- CMD...` with the options of [`Quick`]
/// (`--data` only when `data` is taken), or `None`.
fn quick(args: &[OsString], sub: &str, data: bool) -> Option<Quick> {
    let (first, rest) = args.get(1..)?.split_first()?;
    if first != sub {
        return None;
    }
    let mut q = Quick {
        quiet: false,
        force: false,
        output: None,
        data: None,
        command: Vec::new(),
    };
    let mut it = rest.iter();
    loop {
        let a = it.next()?.as_encoded_bytes();
        match a {
            b"--" => break,
            b"-q" | b"--quiet" if !q.quiet => q.quiet = true,
            b"-f" | b"--force" if !q.force => q.force = true,
            b"-o" | b"--output" if q.output.is_none() => q.output = Some(value(it.next()?)?),
            b"--data" if data && q.data.is_none() => {
                q.data = Some(data_mode(it.next()?.as_encoded_bytes())?)
            }
            _ => match (a.strip_prefix(b"--output="), a.strip_prefix(b"--data=")) {
                (Some(v), _) if q.output.is_none() => {
                    // SAFETY: `v` is a suffix of an OsStr's encoded bytes
                    // after the ASCII `=`, so it starts at a valid boundary.
                    q.output = Some(value(unsafe { OsStr::from_encoded_bytes_unchecked(v) })?)
                }
                (_, Some(v)) if data && q.data.is_none() => q.data = Some(data_mode(v)?),
                _ => return None,
            },
        }
    }
    q.command = it.cloned().collect();
    (!q.command.is_empty()).then_some(q)
}

/// `--data`'s value, spelled exactly as clap names it.
fn data_mode(v: &[u8]) -> Option<DataArg> {
    match v {
        b"none" => Some(DataArg::None),
        b"digest" => Some(DataArg::Digest),
        b"full" => Some(DataArg::Full),
        _ => None,
    }
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

    /// clap's arguments for `args` as `sub` (`run` or `trace`) takes them,
    /// or its error's kind.
    fn by_clap(args: &[OsString], sub: &str) -> Result<String, clap::error::ErrorKind> {
        match Cli::try_parse_from(args).map(|c| c.command) {
            Ok(Command::Run(a)) if sub == "run" => Ok(format!("{:?}", a.0)),
            Ok(Command::Trace(a)) if sub == "trace" => Ok(format!("{:?}", a.0)),
            Ok(other) => panic!("not {sub}: {other:?}"),
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
            assert_eq!(Ok(format!("{quick:?}")), by_clap(&args, "run"), "{a:?}");
        }
        // Not UTF-8: taken as bytes, as clap takes a path.
        use std::os::unix::ffi::OsStringExt;
        let mut args = argv(&["run", "-o", "x", "--", "cat"]);
        args[3] = OsString::from_vec(b"p\xff.json".to_vec());
        args[5] = OsString::from_vec(b"f\xfe".to_vec());
        let quick = quick_run(&args).expect("non-UTF-8 taken");
        assert_eq!(Ok(format!("{quick:?}")), by_clap(&args, "run"));
    }

    /// Every form the quick parser takes for `trace` parses the same with
    /// clap (the data mode's default included).
    #[test]
    fn quick_trace_forms_parse_as_clap_parses_them() {
        let taken: &[&[&str]] = &[
            &["trace", "--", "true"],
            &["trace", "-q", "-f", "-o", "t.trace", "--", "cat", "x"],
            &["trace", "--data", "full", "-o", "t.trace", "--", "true"],
            &[
                "trace", "-f", "--data", "digest", "-o", "t", "--", "./scan", "f",
            ],
            &["trace", "--data=none", "--quiet", "--force", "--", "true"],
            &["trace", "--output=a b.trace", "--", "true", "--", "-q"],
            &["trace", "--", "show", "x.trace"],
            &["trace", "--", "--data", "x"],
        ];
        for a in taken {
            let args = argv(a);
            let quick = quick_trace(&args).unwrap_or_else(|| panic!("{a:?} not taken"));
            assert_eq!(Ok(format!("{quick:?}")), by_clap(&args, "trace"), "{a:?}");
        }
        assert!(quick_run(&argv(&["trace", "--", "true"])).is_none());
    }

    /// `trace show`, other options and anything clap refuses are clap's.
    #[test]
    fn other_trace_forms_are_left_to_clap() {
        let left: &[&[&str]] = &[
            &["trace"],
            &["trace", "--"],
            &["trace", "show", "x.trace"],
            &["trace", "true"],
            &["trace", "--data", "Full", "--", "true"],
            &["trace", "--data", "", "--", "true"],
            &["trace", "--data=", "--", "true"],
            &["trace", "--data", "full", "--data", "full", "--", "true"],
            &["trace", "--data", "--", "true"],
            &["trace", "--profile", "p.json", "--", "true"],
            &["trace", "--clock", "tsc", "--", "true"],
            &["trace", "--top", "3", "--", "true"],
            &["trace", "-qf", "--", "true"],
            &["trace", "--help"],
            &["run", "--data", "full", "--", "true"],
        ];
        for a in left {
            assert!(quick_trace(&argv(a)).is_none(), "{a:?} taken");
        }
        assert!(quick_run(&argv(&["run", "--data", "full", "--", "true"])).is_none());
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
