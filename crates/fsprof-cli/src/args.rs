//! The argument groups several commands share, each flattened into the
//! commands' own `Args` (which live in `commands/<name>.rs`): one spelling,
//! one help text and one parser per option, whichever command takes it.
//! This module depends on no command and on nothing in `cli.rs`; the
//! arrows run `cli` → `commands` → `args` (a test in `cli.rs` keeps them).
//! The groups carry `//` comments, not doc comments: clap would take a
//! flattened struct's doc comment as the command's description.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use fsprof_core::Resolution;
use fsprof_user::ClockChoice;

// Where a capture writes its profile (`run`, `kernel`).
#[derive(Debug, Args)]
pub struct OutputArgs {
    /// Where to write the profile (`-` for standard output)
    /// [default: fsprof-<command>-<program>-<UTC time>.json in the current directory]
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace FILE if it exists
    #[arg(short, long)]
    pub force: bool,
}

// A printed result sent to a file instead of standard output (`report`,
// `compare`, `export`, `trace show`).
#[derive(Debug, Args)]
pub struct ToFileArgs {
    /// Write to FILE instead of standard output
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace FILE if it exists
    #[arg(short, long, requires = "output")]
    pub force: bool,
}

// How a capture buckets its latencies.
#[derive(Debug, Args)]
pub struct CaptureArgs {
    /// Also record the profile per time interval, e.g. 1s or 250ms
    #[arg(long, value_name = "DURATION", value_parser = parse_interval)]
    pub interval: Option<u64>,
    /// Buckets per power of two (1, 2, 4, 8 or 16)
    #[arg(long, default_value = "1", value_parser = parse_resolution)]
    pub resolution: Resolution,
}

// Live Prometheus metrics while a capture runs.
#[derive(Debug, Args)]
pub struct MetricsArgs {
    /// Serve live Prometheus metrics on http://ADDR/metrics while capturing (e.g. 127.0.0.1:9464)
    #[arg(long, value_name = "ADDR")]
    pub serve_metrics: Option<String>,
    /// Allow --serve-metrics on an address other than loopback
    #[arg(long, requires = "serve_metrics")]
    pub metrics_allow_remote: bool,
    /// Label the metrics with the whole command line, not only the program's name
    #[arg(long, requires = "serve_metrics")]
    pub metrics_argv: bool,
}

impl MetricsArgs {
    /// How the served series are labelled.
    pub fn labels(&self) -> fsprof_export::LabelOptions {
        fsprof_export::LabelOptions {
            argv: self.metrics_argv,
        }
    }
}

// The report printed after a capture.
#[derive(Debug, Args)]
pub struct SummaryArgs {
    /// Don't print the report (the profile is still written)
    #[arg(short, long)]
    pub quiet: bool,
    /// Ops that get a histogram in the report
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub top: usize,
}

// Peak labels from a calibration (`report`, `compare`, `plot`).
#[derive(Debug, Args)]
pub struct CalibrationArgs {
    /// Label peaks with this machine's characteristic latencies from FILE
    /// [default: the file `fsprof calibrate` wrote, if any]
    #[arg(long, value_name = "FILE")]
    pub calibration: Option<PathBuf>,
    /// Don't label peaks, even if a calibration file exists
    #[arg(long, conflicts_with = "calibration")]
    pub no_labels: bool,
}

// The directory a measurement runs in (`bench`, `calibrate`): a
// positional, as `discover DIR` takes it. `--dir DIR` is still read
// (hidden) so that scripts written for it keep working.
#[derive(Debug, Args)]
pub struct TargetDirArgs {
    /// Directory on the file system to measure (scratch files go there) [default: .]
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,
    #[arg(long = "dir", value_name = "DIR", hide = true, conflicts_with = "dir")]
    pub dir_option: Option<PathBuf>,
}

impl TargetDirArgs {
    pub fn get(&self) -> PathBuf {
        self.dir
            .clone()
            .or_else(|| self.dir_option.clone())
            .unwrap_or_else(|| PathBuf::from("."))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    Text,
    Json,
    Csv,
    /// One self-contained page with charts (needs -o)
    Html,
}

/// `--format` if given, else the format `-o FILE`'s extension names (a
/// value of `--format`, or one of its aliases: `-o r.json`, `-o r.md`),
/// else `text`, as `plot` picks its image format: `-o r.json` writes JSON
/// wherever `-o` takes a printed result.
pub fn pick_format<F: ValueEnum + Copy>(explicit: Option<F>, output: Option<&Path>, text: F) -> F {
    explicit
        .or_else(|| {
            let ext = output?.extension()?.to_str()?;
            F::from_str(ext, true).ok()
        })
        .unwrap_or(text)
}

/// `--format` of commands whose result is a table or its JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TextOrJson {
    Text,
    Json,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ClockArg {
    /// The cycle counter when the CPU guarantees a constant rate, else monotonic
    Auto,
    /// The calibrated cycle counter (x86-64 with an invariant TSC)
    Tsc,
    /// clock_gettime(CLOCK_MONOTONIC)
    Monotonic,
}

impl From<ClockArg> for ClockChoice {
    fn from(c: ClockArg) -> ClockChoice {
        match c {
            ClockArg::Auto => ClockChoice::Auto,
            ClockArg::Tsc => ClockChoice::Tsc,
            ClockArg::Monotonic => ClockChoice::Monotonic,
        }
    }
}

/// An interval of at least 1 ms, for every command's `--interval`: one
/// minimum and one message, whether the value is `0`, `1us` or `999us`.
pub fn parse_interval(s: &str) -> Result<u64, String> {
    const MIN: &str = "an interval must be at least 1ms (e.g. 100ms or 1s)";
    let number = s
        .trim()
        .trim_end_matches(|c: char| c.is_alphabetic() || c == 'µ');
    match fsprof_core::units::parse_duration_ns(s) {
        Ok(ns) if ns >= 1_000_000 => Ok(ns),
        Ok(_) => Err(MIN.into()),
        // `0`, `0ms`: a number, but not a duration fsprof accepts at all.
        Err(_) if number.parse::<f64>().is_ok_and(|v| v >= 0.0) => Err(MIN.into()),
        Err(e) => Err(e),
    }
}

/// `--resolution`, kept as the checked `Resolution` the captures take.
pub fn parse_resolution(s: &str) -> Result<Resolution, String> {
    let r: u32 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    Resolution::new(r).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolution_is_kept_typed_and_checked() {
        assert_eq!(parse_resolution("4").map(Resolution::get), Ok(4));
        let e = parse_resolution("3").unwrap_err();
        assert!(e.contains("1, 2, 4, 8, 16"), "{e}");
        assert!(parse_resolution("x").unwrap_err().contains("not a number"));
    }

    #[test]
    fn the_output_extension_picks_the_format_unless_format_does() {
        let pick = |f, o: Option<&str>| pick_format(f, o.map(Path::new), FormatArg::Text);
        assert_eq!(pick(None, None), FormatArg::Text);
        assert_eq!(pick(None, Some("r.json")), FormatArg::Json);
        assert_eq!(pick(None, Some("r.CSV")), FormatArg::Csv);
        assert_eq!(pick(None, Some("r.html")), FormatArg::Html);
        assert_eq!(pick(None, Some("report")), FormatArg::Text);
        assert_eq!(pick(Some(FormatArg::Csv), Some("r.json")), FormatArg::Csv);
        let json = Some(Path::new("x.json"));
        assert_eq!(pick_format(None, json, TextOrJson::Text), TextOrJson::Json);
    }

    #[test]
    fn intervals_under_a_millisecond_are_refused_alike() {
        assert_eq!(parse_interval("250ms"), Ok(250_000_000));
        for s in ["0", "0ms", "1us", "999us"] {
            assert!(
                parse_interval(s).unwrap_err().contains("at least 1ms"),
                "{s}"
            );
        }
    }
}
