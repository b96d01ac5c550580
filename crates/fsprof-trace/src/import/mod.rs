//! Traces from other tools: `strace -f -ttt -T -y` logs ([`strace`]) and
//! fio iologs ([`fio`]). A line that does not parse is an error naming its
//! line number, or with `lenient` skipped and counted.

pub mod fio;
pub mod strace;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fsprof_core::profile::RunInfo;

use crate::event::Record;
use crate::file::{TraceError, TraceHeader, TraceWriter};
use crate::resolve::Resolver;

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("line {line}: {what}")]
    Line { line: usize, what: String },
    #[error("{file}: {err}")]
    InFile {
        file: PathBuf,
        err: Box<ImportError>,
    },
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl ImportError {
    /// Line `line` refused because of `what`, which may quote the log: see
    /// [`shown`].
    pub(crate) fn line(line: usize, what: &str) -> ImportError {
        ImportError::Line {
            line,
            what: shown(what, 300),
        }
    }
}

/// The start of a line an error quotes (see [`shown`]).
pub(crate) fn excerpt(line: &str) -> String {
    shown(line, 120)
}

/// Text from a log as an error shows it: at most `max` characters, control
/// characters escaped, so that a hostile log can neither flood the terminal
/// nor reach it raw.
fn shown(s: &str, max: usize) -> String {
    let mut head: String = s.chars().take(max).collect();
    if head.len() < s.len() {
        head.push_str("...");
    }
    fsprof_core::printable::field(&head).into_owned()
}

/// Where parsed records go.
pub trait Sink {
    fn record(&mut self, r: Record) -> Result<(), ImportError>;
    /// A line skipped with `--lenient`.
    fn skipped(&mut self, why: &str);
}

/// What an import did.
#[derive(Clone, Debug, Default)]
pub struct ImportStats {
    pub calls: u64,
    pub processes: u64,
    pub skipped_lines: u64,
    pub first_skips: Vec<String>,
    /// Lines understood but not calls of the vocabulary, by syscall.
    pub ignored: BTreeMap<String, u64>,
}

/// Collects records, then writes them by time with paths resolved.
struct Collect {
    records: Vec<Record>,
    stats: ImportStats,
}

impl Sink for Collect {
    fn record(&mut self, r: Record) -> Result<(), ImportError> {
        match &r {
            Record::Call(_) => self.stats.calls += 1,
            Record::Process(_) => self.stats.processes += 1,
            // No import makes them: strace and fio see calls only.
            Record::Mapped(_) | Record::Descriptor(_) => {}
        }
        self.records.push(r);
        Ok(())
    }

    fn skipped(&mut self, why: &str) {
        self.stats.skipped_lines += 1;
        if self.stats.first_skips.len() < 5 {
            self.stats.first_skips.push(why.to_string());
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Strace,
    FioIolog,
}

fn read(path: &Path) -> Result<String, ImportError> {
    let bytes = std::fs::read(path).map_err(|e| ImportError::Io {
        path: path.into(),
        source: e,
    })?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The files of `LOG`: itself, or the `LOG.<pid>` files `strace -ff -o LOG`
/// writes, with their pids.
fn inputs(log: &Path) -> Result<Vec<(PathBuf, Option<i32>)>, ImportError> {
    if log.exists() {
        return Ok(vec![(log.to_path_buf(), None)]);
    }
    let dir = match log.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = log
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(&dir) {
        for e in rd.flatten() {
            let f = e.file_name().to_string_lossy().into_owned();
            if let Some(pid) = f
                .strip_prefix(&name)
                .and_then(|r| r.strip_prefix('.'))
                .and_then(|p| p.parse::<i32>().ok())
            {
                out.push((e.path(), Some(pid)));
            }
        }
    }
    if out.is_empty() {
        return Err(ImportError::Io {
            path: log.into(),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no such file (nor LOG.<pid> files of strace -ff)",
            ),
        });
    }
    out.sort();
    Ok(out)
}

/// Imports `log` into the trace `out`.
pub fn import(
    format: Format,
    log: &Path,
    out: &Path,
    opts: &strace::Options,
    force: bool,
) -> Result<ImportStats, ImportError> {
    let mut sink = Collect {
        records: Vec::new(),
        stats: ImportStats::default(),
    };
    let source = match format {
        Format::Strace => {
            let mut parser = strace::Parser::new(opts.clone());
            for (file, pid) in inputs(log)? {
                let text = read(&file)?;
                parser
                    .parse(&text, pid, opts.lenient, &mut sink)
                    .map_err(|e| ImportError::InFile {
                        file: file.clone(),
                        err: Box::new(e),
                    })?;
            }
            sink.stats.ignored = parser.ignored.clone();
            "strace"
        }
        Format::FioIolog => {
            fio::import(&read(log)?, opts.lenient, &mut sink).map_err(|e| ImportError::InFile {
                file: log.into(),
                err: Box::new(e),
            })?;
            "fio-iolog"
        }
    };
    // -ff files are read one after another: sort by time (stable, so a
    // process record stays before its first call).
    sink.records.sort_by_key(Record::start_ns);
    let t0 = sink.records.first().map(Record::start_ns).unwrap_or(0);
    let data = if format == Format::Strace {
        "full"
    } else {
        "none"
    };
    let mut header = TraceHeader::new(source, data);
    header.clock = "imported".into();
    header.command = vec![log.display().to_string()];
    let start_unix_ns = if format == Format::Strace { t0 } else { 0 };
    header.run = RunInfo::new(String::new(), String::new(), start_unix_ns);
    header.notes.push(match format {
        Format::Strace => "imported from strace: data beyond strace's string limit (-s) is not kept; fds strace did not annotate (-y) and paths relative to an unknown cwd stay unresolved; loads and stores through file mappings are not calls, and strace does not see them (the mmap, msync and munmap calls are kept)".into(),
        Format::FioIolog => "imported from a fio iolog: results, threads and return times are not in the log; every call is taken to have succeeded".into(),
    });
    let mut w = TraceWriter::create(out, &header, force)?;
    let mut resolver = Resolver::default();
    let mut last = 0;
    for mut r in sink.records {
        match &mut r {
            Record::Process(p) => {
                p.start_ns -= t0;
                resolver.process(p);
            }
            Record::Call(c) => {
                c.start_ns -= t0;
                c.end_ns = c.end_ns.saturating_sub(t0).max(c.start_ns);
                last = last.max(c.end_ns);
                resolver.call(c);
            }
            Record::Mapped(_) => {}
            Record::Descriptor(d) => {
                d.start_ns -= t0;
                resolver.descriptor(d);
            }
        }
        w.push(&r)?;
    }
    w.finish(0, last)?;
    Ok(sink.stats)
}
