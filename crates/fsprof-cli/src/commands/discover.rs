//! `fsprof discover DIR`: infers the file system's block size, read-ahead,
//! page-cache capacity and direct block pointers from latency against file
//! offset (fsprof-discover), and prints them next to what the kernel
//! states. Every output is checked before anything is measured; Ctrl-C
//! stops between measurements, and the test files, the memory cgroup and
//! (after a remount) the mount are left as they were.

use std::cell::Cell;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use clap::{Args, ValueEnum};
use fsprof_capture::Output;
use fsprof_core::format::write_atomic;
use fsprof_discover::{
    ColdChoice, ColdMethod, Ctx, DiscoverError, Options, Parameter, Progress, Report, Silent,
};
use fsprof_sys::signals::{StopSignals, Wake};

use super::bar::Bar;
use super::report::write_stdout;
use crate::args::{pick_format, TextOrJson};

#[derive(Debug, Args)]
pub struct DiscoverArgs {
    /// A directory on the file system to examine; test files go in a
    /// private subdirectory that is removed afterwards
    pub dir: PathBuf,
    /// What to discover (comma-separated)
    #[arg(long, value_enum, value_delimiter = ',', default_value = "all")]
    pub what: Vec<WhatArg>,
    /// Iterations of every method [default: per method: block-size 20,
    /// readahead 3, page-cache 3, direct-blocks 30]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub iterations: Option<u32>,
    /// The block device DIR's file system is on: its read-ahead setting is
    /// shown, and (as root) caches are emptied by unmounting and mounting it
    #[arg(long, value_name = "DEV")]
    pub device: Option<PathBuf>,
    /// How caches are emptied between iterations: auto = remount (root and
    /// --device), else drop-caches (root, machine-wide), else fadvise (the
    /// test files only)
    #[arg(long, value_enum, default_value_t = ColdArg::Auto)]
    pub cold: ColdArg,
    /// Limit of the memory cgroup the page-cache method reads in (root),
    /// e.g. 64M [default: 256M, less on a small file system]
    #[arg(long, value_name = "SIZE", value_parser = parse_limit)]
    pub cgroup_limit: Option<u64>,
    /// Write the latency-against-offset figures (SVG) and discovery.html here
    #[arg(long, value_name = "PATH")]
    pub plot_dir: Option<PathBuf>,
    /// Write the findings to FILE instead of standard output, as report
    /// does; with -o, the table is also printed on standard error
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// How to print the findings [default: -o FILE's extension (.json), else text]
    #[arg(long, value_enum)]
    pub format: Option<TextOrJson>,
    /// Write every measured latency as an fsprof profile (layer `discover`)
    #[arg(long, value_name = "FILE")]
    pub profile: Option<PathBuf>,
    /// Replace output files that exist
    #[arg(short, long)]
    pub force: bool,
    /// No progress bar, and no table on standard error with -o
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum WhatArg {
    BlockSize,
    Readahead,
    PageCache,
    DirectBlocks,
    All,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ColdArg {
    Auto,
    Remount,
    DropCaches,
    Fadvise,
}

fn parse_limit(s: &str) -> Result<u64, String> {
    let v = fsprof_discover::methods::parse_bytes(s)?;
    if v < 16 << 20 {
        return Err(format!(
            "{s:?} is below the smallest cgroup limit fsprof uses (16M)"
        ));
    }
    Ok(v)
}

fn parameters(what: &[WhatArg]) -> Vec<Parameter> {
    if what.contains(&WhatArg::All) {
        return Parameter::ALL.to_vec();
    }
    let mut out: Vec<Parameter> = what
        .iter()
        .map(|w| match w {
            WhatArg::BlockSize => Parameter::BlockSize,
            WhatArg::Readahead => Parameter::Readahead,
            WhatArg::PageCache => Parameter::PageCache,
            WhatArg::DirectBlocks => Parameter::DirectBlocks,
            WhatArg::All => unreachable!(),
        })
        .collect();
    // Direct blocks use the block size found before them.
    out.sort();
    out.dedup();
    out
}

/// Refuses a plot directory that is a file, or whose figures exist.
fn check_plot_dir(dir: &Path, force: bool) -> Result<()> {
    if dir.exists() && !dir.is_dir() {
        return Err(anyhow!("--plot-dir {} is not a directory", dir.display()));
    }
    if !force {
        let taken = dir.join("discovery.html");
        if taken.symlink_metadata().is_ok() {
            return Err(anyhow!(
                "{} exists: pass --force to replace it",
                taken.display()
            ));
        }
    }
    Ok(())
}

fn write_plots(dir: &Path, r: &fsprof_discover::Report, force: bool) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for f in &r.findings {
        for (c, name) in f.curves.iter().zip(fsprof_discover::plot::file_names(f)) {
            let path = dir.join(name);
            write_atomic(&path, fsprof_discover::plot::svg(c).as_bytes(), force)?;
        }
    }
    write_atomic(
        &dir.join("discovery.html"),
        fsprof_discover::plot::html(r).as_bytes(),
        force,
    )?;
    Ok(())
}

pub fn discover(a: DiscoverArgs) -> Result<i32> {
    for path in [&a.output, &a.profile].into_iter().flatten() {
        Output {
            path: Some(path.clone()),
            force: a.force,
        }
        .check()?;
    }
    if let Some(d) = &a.plot_dir {
        check_plot_dir(d, a.force)?;
    }
    let opts = options(&a);
    if let Some(d) = &a.device {
        if !d.exists() {
            return Err(anyhow!("--device {}: no such device", d.display()));
        }
    }
    let sigs = StopSignals::block();
    let stopped = Cell::new(None);
    let stop = || {
        if stopped.get().is_some() {
            return true;
        }
        match sigs.wait(Duration::ZERO) {
            Wake::Stop(s) => {
                stopped.set(Some(s.signo));
                true
            }
            _ => false,
        }
    };
    let mut bar = Bar::new("{msg:48} [{bar:30}] {pos}/{len} {elapsed}");
    let mut silent = Silent;
    let progress: &mut dyn Progress = if !a.quiet && std::io::stderr().is_terminal() {
        &mut bar
    } else {
        &mut silent
    };
    let mut ctx = Ctx {
        progress,
        stop: &stop,
    };
    let result = fsprof_discover::discover(&opts, &mut ctx);
    drop(bar);
    let report = match result {
        Ok(r) => r,
        Err(DiscoverError::Interrupted) => {
            let signo = stopped.get().unwrap_or(libc::SIGINT);
            fsprof_sys::diag!("fsprof: interrupted; test files removed, nothing written");
            return Ok(128 + signo);
        }
        Err(e) => return Err(e.into()),
    };
    write_results(&a, &report)?;
    Ok(0)
}

fn options(a: &DiscoverArgs) -> Options {
    Options {
        dir: a.dir.clone(),
        what: parameters(&a.what),
        iterations: a.iterations,
        device: a.device.clone(),
        cold: match a.cold {
            ColdArg::Auto => ColdChoice::Auto,
            ColdArg::Remount => ColdChoice::Only(ColdMethod::Remount),
            ColdArg::DropCaches => ColdChoice::Only(ColdMethod::DropCaches),
            ColdArg::Fadvise => ColdChoice::Only(ColdMethod::Fadvise),
        },
        cgroup_limit: a.cgroup_limit,
        command: std::env::args().collect(),
    }
}

/// The findings (to -o or standard output, the table on standard error
/// beside a file), the latency profile and the figures.
fn write_results(a: &DiscoverArgs, report: &Report) -> Result<()> {
    let text = fsprof_discover::render::text(report);
    let findings = match pick_format(a.format, a.output.as_deref(), TextOrJson::Text) {
        TextOrJson::Text => text.clone(),
        TextOrJson::Json => serde_json::to_string_pretty(report)? + "\n",
    };
    match &a.output {
        None => write_stdout(&findings)?,
        Some(out) => {
            crate::files::write_output(findings.as_bytes(), Some(out), a.force)?;
            if !a.quiet {
                fsprof_sys::diag_nonl!("{text}");
            }
        }
    }
    if let Some(out) = &a.profile {
        let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
        let p = fsprof_discover::profile::build(report, &args, fsprof_core::Resolution::DEFAULT);
        fsprof_core::format::write_profile(out, &p, a.force)?;
        fsprof_sys::diag!("fsprof: latency profile written to {}", out.display());
    }
    if let Some(d) = &a.plot_dir {
        write_plots(d, report, a.force)?;
        fsprof_sys::diag!("fsprof: figures written to {}", d.display());
    }
    Ok(())
}
