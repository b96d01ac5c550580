//! `fsprof bench SUITE`: the arguments and the handler. The suites live in
//! fsprof-bench, which also lists them and their own options
//! (`fsprof_bench::SUITES`): the suite's choices and its options' flags are
//! built from that list ([`SuiteOptions`]), so a new suite needs nothing
//! here. This file turns flags into `Params`, draws the progress bar
//! (indicatif, hidden when stderr is not a terminal), writes the result
//! file and prints the chosen format.

use std::path::PathBuf;

use anyhow::Result;
use clap::builder::{PossibleValue, PossibleValuesParser};
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Args, FromArgMatches, ValueEnum};
use fsprof_bench::figure::{sweep_svg, SweepMetric as PlotMetric};
use fsprof_bench::params::{Kind, Opt, ParamError, Params};
use fsprof_bench::result::BenchResult;
use fsprof_bench::{export, result, runner, Suite, SUITES};
use fsprof_core::format::write_atomic;
use fsprof_measure::cache::CacheMode;

use super::bar::Bar;
use super::report::finish;
use crate::args::{pick_format, TargetDirArgs};

/// The suites' names, with their one-line descriptions for `--help`.
fn suite_names() -> PossibleValuesParser {
    PossibleValuesParser::new(
        SUITES
            .iter()
            .map(|s| PossibleValue::new(s.name()).help(s.about())),
    )
}

/// Every suite option once, with the suites that take it.
fn distinct_options() -> Vec<(&'static Opt, Vec<&'static str>)> {
    let mut out: Vec<(&'static Opt, Vec<&'static str>)> = Vec::new();
    for s in SUITES {
        for o in s.options() {
            match out.iter_mut().find(|(seen, _)| seen.name == o.name) {
                Some((_, owners)) => owners.push(s.name()),
                None => out.push((o, vec![s.name()])),
            }
        }
    }
    out
}

/// The suites' own options as the command line gave them (defaults are
/// the suite's, filled in by `Params::defaults`).
#[derive(Clone, Debug, Default)]
pub struct SuiteOptions {
    given: Vec<(&'static Opt, serde_json::Value)>,
}

impl Args for SuiteOptions {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        distinct_options()
            .into_iter()
            .fold(cmd, |cmd, (o, owners)| {
                let arg = Arg::new(o.name).long(o.name).help(format!(
                    "{} ({})",
                    o.help,
                    owners.join(", ")
                ));
                cmd.arg(match o.kind {
                    Kind::Flag => arg.action(ArgAction::SetTrue),
                    kind => arg
                        .value_name(o.value_name)
                        .default_value(o.default)
                        .value_parser(move |text: &str| kind.parse(text)),
                })
            })
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for SuiteOptions {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut given = Vec::new();
        for (o, _) in distinct_options() {
            if m.value_source(o.name) != Some(ValueSource::CommandLine) {
                continue;
            }
            let v = match o.kind {
                Kind::Flag => serde_json::Value::Bool(m.get_flag(o.name)),
                _ => m
                    .get_one::<serde_json::Value>(o.name)
                    .cloned()
                    .unwrap_or_default(),
            };
            given.push((o, v));
        }
        Ok(SuiteOptions { given })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = SuiteOptions::from_arg_matches(m)?;
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CacheArg {
    /// Evict the files before each phase and verify they left the page cache
    Cold,
    /// Read the files before each phase and verify they are cached
    Warm,
    /// Leave the cache as the previous phase left it
    Asis,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BenchFormat {
    Text,
    /// The result: a profile with the bench statistics, which `report` and `compare` read
    Json,
    Csv,
    #[value(alias = "md")]
    Markdown,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Which benchmark
    #[arg(value_parser = suite_names())]
    pub suite: String,
    #[command(flatten)]
    pub dir: TargetDirArgs,
    /// Write to FILE instead of standard output, as report does; repeat
    /// it for several formats (`-o r.json -o r.csv`); with -o, the table is
    /// also printed on standard error
    #[arg(short, long, value_name = "FILE")]
    pub output: Vec<PathBuf>,
    /// Replace FILE and the --plot files if they exist
    #[arg(short, long)]
    pub force: bool,
    /// How to print the result [default: -o FILE's extension (.json, .csv, .md), else text]
    #[arg(long, value_enum)]
    pub format: Option<BenchFormat>,
    /// No progress bar, and no table on standard error with -o
    #[arg(short, long)]
    pub quiet: bool,
    /// Measured runs
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub runs: usize,
    /// Runs done first and discarded
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub warmup: usize,
    /// Page-cache state before each phase
    #[arg(long, value_enum, default_value_t = CacheArg::Asis)]
    pub cache: CacheArg,
    /// Make cold with sync + drop_caches (root; machine-wide) instead of per-file fadvise
    #[arg(long)]
    pub drop_caches: bool,
    /// Seed of the random offsets and orders
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Latency histogram buckets per power of two
    #[arg(long, default_value_t = 1, value_name = "R")]
    pub resolution: u32,
    /// Keep every operation's latency in the JSON result (default: per-run and per-file figures, per-op histograms)
    #[arg(long)]
    pub raw_samples: bool,
    #[command(flatten)]
    pub options: SuiteOptions,
    /// Draw the sweep's throughput against file size, cache sizes marked (.svg or .png)
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Draw the sweep's median latency per op against file size (.svg or .png): robust on a loaded machine
    #[arg(long, value_name = "FILE")]
    pub plot_p50: Option<PathBuf>,
}

fn params(a: &BenchArgs, suite: &dyn Suite) -> Result<Params, ParamError> {
    let mut p = Params {
        runs: a.runs,
        warmup: a.warmup,
        cache: match a.cache {
            CacheArg::Cold => CacheMode::Cold,
            CacheArg::Warm => CacheMode::Warm,
            CacheArg::Asis => CacheMode::Asis,
        },
        drop_caches: a.drop_caches,
        resolution: a.resolution,
        seed: a.seed,
        raw_samples: a.raw_samples,
        ..Params::defaults(suite.name(), a.dir.get())
    };
    for (o, v) in &a.options.given {
        if !suite.options().iter().any(|mine| mine.name == o.name) {
            let owners = distinct_options()
                .into_iter()
                .find(|(d, _)| d.name == o.name)
                .map(|(_, owners)| owners.join(", "))
                .unwrap_or_default();
            return Err(ParamError::NotItsOption {
                option: o.name,
                suite: suite.name(),
                owners,
            });
        }
        p.set(&o.key(), v.clone());
    }
    Ok(p)
}

/// The suites whose results are drawn against file size.
fn sweeping_suites() -> Vec<&'static str> {
    SUITES
        .iter()
        .filter(|s| s.sweep(&Params::defaults(s.name(), ".".into())).is_some())
        .map(|s| s.name())
        .collect()
}

pub fn bench(a: BenchArgs) -> Result<i32> {
    let suite = fsprof_bench::suites::find(&a.suite)
        .ok_or_else(|| ParamError::UnknownSuite(a.suite.clone()))?;
    let p = params(&a, suite)?;
    if (a.plot.is_some() || a.plot_p50.is_some()) && suite.sweep(&p).is_none() {
        anyhow::bail!(
            "--plot and --plot-p50 draw results against file size: use them with a suite that sweeps it ({})",
            sweeping_suites().join(", ")
        );
    }
    for p in a.output.iter().chain(&a.plot).chain(&a.plot_p50) {
        fsprof_core::output::check_output(p, a.force)?;
    }
    let sigs = fsprof_sys::StopSignals::block();
    let stop = || {
        matches!(
            sigs.wait(std::time::Duration::ZERO),
            fsprof_sys::signals::Wake::Stop(_)
        )
    };
    let command: Vec<String> = std::env::args().collect();
    let mut bar =
        Bar::new("fsprof bench {msg} [{bar:30}] {pos}/{len} runs {elapsed}").hidden(a.quiet);
    let (profile, bench) = runner::run_suite(suite, &p, command, &mut bar, &stop)?;
    drop(bar);
    let json = result::to_json(&profile, &bench);
    if let Some(plot) = &a.plot {
        write_plot(plot, &bench, PlotMetric::Rate, a.force)?;
        fsprof_sys::diag!("fsprof: wrote {}", plot.display());
    }
    if let Some(plot) = &a.plot_p50 {
        write_plot(plot, &bench, PlotMetric::OpP50, a.force)?;
        fsprof_sys::diag!("fsprof: wrote {}", plot.display());
    }
    let render =
        |output: Option<&std::path::Path>| match pick_format(a.format, output, BenchFormat::Text) {
            BenchFormat::Text => export::text(&bench),
            BenchFormat::Json => json.clone(),
            BenchFormat::Csv => export::csv(&bench),
            BenchFormat::Markdown => export::markdown(&bench),
        };
    if a.output.is_empty() {
        return finish(&render(None), None, false);
    }
    for o in &a.output {
        finish(&render(Some(o)), Some(o), a.force)?;
    }
    if !a.quiet {
        fsprof_sys::diag_nonl!("{}", export::text(&bench));
    }
    Ok(0)
}

/// The sweep's figures against file size, one line per phase, the CPU
/// caches and available memory marked; PNG when FILE ends in `.png`.
fn write_plot(
    path: &std::path::Path,
    b: &result::BenchResult,
    metric: PlotMetric,
    force: bool,
) -> Result<()> {
    let svg = sweep_svg(b, metric);
    let is_png = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("png"));
    let bytes = if is_png {
        crate::png::svg_to_png(&svg, 2.0)?
    } else {
        svg.into_bytes()
    };
    write_atomic(path, &bytes, force)?;
    Ok(())
}

/// `fsprof compare A B` on two bench results: phases whose 95% intervals
/// are disjoint changed.
pub fn compare_results(
    (ra, na): (&BenchResult, &str),
    (rb, nb): (&BenchResult, &str),
    format: crate::args::FormatArg,
    output: Option<&std::path::Path>,
    force: bool,
    fail_on: fsprof_analysis::compare::FailOn,
) -> Result<i32> {
    let c = fsprof_bench::compare::compare(ra, rb);
    let text = match format {
        crate::args::FormatArg::Text => fsprof_bench::compare::text(&c, na, nb),
        crate::args::FormatArg::Json => serde_json::to_string_pretty(&c)? + "\n",
        crate::args::FormatArg::Csv => fsprof_bench::compare::csv(&c),
        crate::args::FormatArg::Html => {
            anyhow::bail!("bench results compare as text, json or csv (not html)")
        }
    };
    finish(&text, output, force)?;
    Ok(c.exit_code(fail_on))
}
