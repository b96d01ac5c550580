//! `fsprof bench SUITE`: the arguments and the handler. The suites live in
//! fsprof-bench; this file turns flags into `Params`, draws the progress
//! bar (indicatif, hidden when stderr is not a terminal), writes the
//! result file and prints the chosen format.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, ValueEnum};
use fsprof_bench::figure::{sweep_svg, SweepMetric as PlotMetric};
use fsprof_bench::params::{parse_size, Align, Params, Suite};
use fsprof_bench::{export, result, runner};
use fsprof_core::format::write_atomic;
use fsprof_measure::cache::CacheMode;

use super::bar::Bar;
use super::report::finish;
use crate::args::{pick_format, TargetDirArgs};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SuiteArg {
    /// Sprite LFS large-file: seq/random write and read over --files files
    Sprite,
    /// Bonnie++-style create/stat/unlink of --dirs × --files-per-dir empty files
    Metadata,
    /// T threads pread-ing a cached 1 KiB buffer (the harness-cost benchmark)
    Pread,
    /// Sprite over file sizes spanning the CPU caches and memory
    Sweep,
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
pub enum AlignArg {
    /// Random offsets at multiples of --io-size
    Page,
    /// Random offsets shifted by a random amount below --io-size
    None,
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
    #[arg(value_enum)]
    pub suite: SuiteArg,
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
    /// Files per phase (sprite, sweep); the first one's figures are dropped
    #[arg(long, default_value_t = 11, value_name = "N")]
    pub files: usize,
    /// File size (sprite)
    #[arg(long, default_value = "1M", value_parser = parse_size, value_name = "SIZE")]
    pub file_size: u64,
    /// Bytes per read/write (sprite, sweep)
    #[arg(long, default_value = "4k", value_parser = parse_size, value_name = "SIZE")]
    pub io_size: u64,
    /// Random offsets aligned to --io-size or not (sprite, sweep)
    #[arg(long, value_enum, default_value_t = AlignArg::Page)]
    pub align: AlignArg,
    /// Sequential phases make the same dummy lseek and random draw as random ones
    #[arg(long)]
    pub pad_syscalls: bool,
    /// Directories (metadata)
    #[arg(long, default_value_t = 1024, value_name = "N")]
    pub dirs: usize,
    /// Empty files per directory (metadata)
    #[arg(long, default_value_t = 16, value_name = "N")]
    pub files_per_dir: usize,
    /// Reader threads (pread)
    #[arg(long, default_value_t = 1, value_name = "T")]
    pub threads: usize,
    /// preads per thread per run (pread)
    #[arg(long, default_value_t = 100_000, value_name = "N")]
    pub ops: usize,
    /// Smallest file size (sweep)
    #[arg(long, default_value = "4k", value_parser = parse_size, value_name = "SIZE")]
    pub min_size: u64,
    /// Largest file size (sweep)
    #[arg(long, default_value = "64M", value_parser = parse_size, value_name = "SIZE")]
    pub max_size: u64,
    /// Draw the sweep's throughput against file size, cache sizes marked (.svg or .png)
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Draw the sweep's median latency per op against file size (.svg or .png): robust on a loaded machine
    #[arg(long, value_name = "FILE")]
    pub plot_p50: Option<PathBuf>,
}

fn params(a: &BenchArgs) -> Params {
    let suite = match a.suite {
        SuiteArg::Sprite => Suite::Sprite,
        SuiteArg::Metadata => Suite::Metadata,
        SuiteArg::Pread => Suite::Pread,
        SuiteArg::Sweep => Suite::Sweep,
    };
    Params {
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
        files: a.files,
        file_size: a.file_size,
        io_size: a.io_size,
        align: match a.align {
            AlignArg::Page => Align::Page,
            AlignArg::None => Align::None,
        },
        pad_syscalls: a.pad_syscalls,
        dirs: a.dirs,
        files_per_dir: a.files_per_dir,
        threads: a.threads,
        ops: a.ops,
        min_size: a.min_size,
        max_size: a.max_size,
        ..Params::defaults(suite, a.dir.get())
    }
}

pub fn bench(a: BenchArgs) -> Result<i32> {
    if (a.plot.is_some() || a.plot_p50.is_some()) && a.suite != SuiteArg::Sweep {
        anyhow::bail!("--plot and --plot-p50 draw a sweep: use them with `fsprof bench sweep`");
    }
    for p in a.output.iter().chain(&a.plot).chain(&a.plot_p50) {
        fsprof_core::output::check_output(p, a.force)?;
    }
    let p = params(&a);
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
    let (profile, bench) = runner::run(&p, command, &mut bar, &stop)?;
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
        fsprof_plot::svg_to_png(&svg, 2.0)?
    } else {
        svg.into_bytes()
    };
    write_atomic(path, &bytes, force)?;
    Ok(())
}

/// What `fsprof report --format html` adds for a bench result: a sweep's
/// charts. Nothing for a plain profile or a result without a sweep (the
/// profile part is reported as any profile's).
pub fn report_figures(path: &std::path::Path) -> Vec<fsprof_plot::html::Figure> {
    match result::read_result(path) {
        Ok((_, b)) => fsprof_bench::figure::report_figures(&b),
        Err(_) => Vec::new(),
    }
}

/// `fsprof compare A B` on two bench results: phases whose 95% intervals
/// are disjoint changed. `None` when either file is not a bench result
/// (the profile comparison then runs as before).
pub fn compare_results(
    a: &std::path::Path,
    b: &std::path::Path,
    format: crate::args::FormatArg,
    output: Option<&std::path::Path>,
    force: bool,
) -> Result<Option<i32>> {
    let is_bench = |p: &std::path::Path| {
        std::fs::read(p)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .is_some_and(|v| result::is_bench(&v))
    };
    if !(is_bench(a) && is_bench(b)) {
        return Ok(None);
    }
    let (_, ra) = result::read_result(a)?;
    let (_, rb) = result::read_result(b)?;
    let c = fsprof_bench::compare::compare(&ra, &rb);
    let (na, nb) = (a.display().to_string(), b.display().to_string());
    let text = match format {
        crate::args::FormatArg::Text => fsprof_bench::compare::text(&c, &na, &nb),
        crate::args::FormatArg::Json => serde_json::to_string_pretty(&c)? + "\n",
        crate::args::FormatArg::Csv => fsprof_bench::compare::csv(&c),
        crate::args::FormatArg::Html => {
            anyhow::bail!("bench results compare as text, json or csv (not html)")
        }
    };
    finish(&text, output, force)?;
    Ok(Some(c.exit_code()))
}
