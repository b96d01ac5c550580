//! `fsprof trace -- CMD`: record every intercepted call of CMD into a trace
//! file, and write the `fsprof run` profile of the same run beside it.
//! `fsprof trace show TRACE`: print a trace as strace-like text, JSON lines
//! or CSV.

use std::ffi::OsString;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::{Args, Subcommand, ValueEnum};
use fsprof_capture::{first_free, name_part, name_stamp, Capture, Output, Plan, Progress};
use fsprof_core::output::OutputFile;
use fsprof_core::Resolution;
use fsprof_report::after_capture;
use fsprof_trace::capture::{DataMode, MappedAttach, TraceOptions, TraceSource};
use fsprof_trace::show::{Format, Printer};
use fsprof_trace::TraceReader;
use fsprof_user::UserOptions;

use super::capture::{failed, save_and_tell};
use crate::args::{ClockArg, SummaryArgs, ToFileArgs};

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct TraceArgs {
    #[command(subcommand)]
    pub sub: Option<TraceSub>,
    /// Where to write the trace [default: fsprof-<command>-<time>.trace]
    #[arg(short, long, value_name = "TRACE")]
    pub output: Option<PathBuf>,
    /// Where to write the profile of the same run [default: the trace's name with .json]
    #[arg(long, value_name = "FILE")]
    pub profile: Option<PathBuf>,
    /// Replace the trace and the profile if they exist
    #[arg(short, long)]
    pub force: bool,
    /// What to keep of the bytes calls moved: written bytes as a digest or
    /// in full; `full` keeps every read's bytes too
    #[arg(long, value_enum, default_value_t = DataArg::Digest)]
    pub data: DataArg,
    /// Clock used to time calls
    #[arg(long, value_enum, default_value_t = ClockArg::Auto)]
    pub clock: ClockArg,
    #[command(flatten)]
    pub summary: SummaryArgs,
    /// The command to trace and its arguments (an option before it is
    /// fsprof's: put `--` first for a command named like one)
    #[arg(required = true, trailing_var_arg = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum DataArg {
    /// No bytes (sizes only)
    None,
    /// An XXH64 digest of each write's bytes; reads' bytes are not kept
    Digest,
    /// The bytes of every write and every read: replay then recreates the
    /// files written and the parts of existing files that were read. The
    /// trace grows by all the command read and wrote (a grep -r: 70x
    /// digest's size), and the command runs slower
    Full,
}

#[derive(Debug, Subcommand)]
pub enum TraceSub {
    /// Print a trace (text like `strace -f -ttt -T -y`, JSON lines or CSV)
    Show(ShowArgs),
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Trace file
    pub trace: PathBuf,
    #[arg(long, value_enum, default_value_t = ShowFormat::Text)]
    pub format: ShowFormat,
    #[command(flatten)]
    pub to: ToFileArgs,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ShowFormat {
    Text,
    Jsonl,
    Csv,
}

pub fn trace(a: TraceArgs) -> Result<i32> {
    match a.sub {
        Some(TraceSub::Show(s)) => show(s),
        None => record(a),
    }
}

fn record(a: TraceArgs) -> Result<i32> {
    let resolution = Resolution::DEFAULT;
    // The stop signals blocked first: the attach's threads inherit the mask.
    let capture = Capture::new(Plan {
        tool: "trace".into(),
        command: a.command.clone(),
        resolution,
        interval_ns: None,
        duration_ns: None,
        sample_ns: None,
    });
    // Before the outputs are checked (a file made and removed, ~0.1 ms):
    // the held command waits for the attach.
    let attach = MappedAttach::start();
    let cmd = a.command[0].to_string_lossy().into_owned();
    let trace_path = match &a.output {
        Some(p) => p.clone(),
        None => default_name(&cmd)?,
    };
    let profile = Output {
        path: Some(
            a.profile
                .clone()
                .unwrap_or_else(|| trace_path.with_extension("json")),
        ),
        force: a.force,
    };
    let made = profile.prepare()?;
    let mut source = TraceSource::new(TraceOptions {
        user: UserOptions {
            resolution,
            clock: a.clock.into(),
        },
        data: match a.data {
            DataArg::None => DataMode::None,
            DataArg::Digest => DataMode::Digest,
            DataArg::Full => DataMode::Full,
        },
        output: trace_path,
        force: a.force,
        attach: Some(attach),
    })?;
    let mut progress = TraceProgress(fsprof_sys::keeper::OnStart::new(source.control_fd()));
    let outcome = match capture.run(&mut source, &mut progress) {
        Ok(o) => o,
        Err(e) => return failed(e),
    };
    let path = save_and_tell(&outcome, &profile, "trace", Some(&cmd), made)?;
    if let Some(t) = source.outcome() {
        fsprof_sys::diag!(
            "fsprof: trace written to {}: {} call(s) in {} process image(s), {} bytes",
            t.path.display(),
            t.summary.calls,
            t.summary.processes,
            t.file_bytes
        );
    }
    fsprof_sys::diag!("fsprof: profile written to {}", path.display());
    if !a.summary.quiet {
        fsprof_sys::diag_nonl!("{}", after_capture(&outcome.profile, a.summary.top)?);
    }
    let code = outcome.exit_code();
    // fsprof exits next, as `fsprof run` does: the profile is not freed
    // one allocation at a time, and the control file's mapping and last
    // close go with fsprof's memory, which the keeper made at the
    // command's start holds until fsprof has exited (the user source's
    // teardown was 158-265 us of every trace's end).
    std::mem::forget(outcome);
    source.leave_to_exit();
    Ok(code)
}

/// Makes the keeper (fsprof_sys::keeper) once the command runs: fsprof's
/// memory and the control file are then released after fsprof's exit,
/// not before it.
struct TraceProgress(fsprof_sys::keeper::OnStart);

impl Progress for TraceProgress {
    fn started(&mut self, _what: &str) {
        self.0.start();
    }
}

/// `fsprof-<program>-<time>.trace`, or the next free variant.
fn default_name(cmd: &str) -> Result<PathBuf> {
    let prog = name_part(Some(Path::new(cmd)), "cmd");
    let stamp = name_stamp(&fsprof_core::units::rfc3339_utc(
        fsprof_sys::clock::wall_unix_ns(),
    ));
    // A name is taken by anything there, a dangling link too.
    let taken = |p: &Path| p.symlink_metadata().is_ok();
    first_free(&format!("fsprof-{prog}-{stamp}"), "trace", |p| {
        taken(p) || taken(&p.with_extension("json"))
    })
    .ok_or_else(|| anyhow::anyhow!("could not find a free file name for the trace; use -o TRACE"))
}

fn show(a: ShowArgs) -> Result<i32> {
    let mut reader = TraceReader::open(&a.trace)?;
    let format = match a.format {
        ShowFormat::Text => Format::Text,
        ShowFormat::Jsonl => Format::Jsonl,
        ShowFormat::Csv => Format::Csv,
    };
    if let Some(p) = &a.to.output {
        // Refused before the trace is read if it exists (without --force).
        let file = OutputFile::create(p, a.to.force)?;
        let out = print_all(&mut reader, BufWriter::new(file), format)?;
        out.into_inner().map_err(|e| e.into_error())?.commit()?;
        return Ok(0);
    }
    match print_all(&mut reader, BufWriter::new(io::stdout().lock()), format) {
        Err(e)
            if e.downcast_ref::<io::Error>()
                .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe) =>
        {
            Ok(0)
        }
        r => r.map(|_| 0),
    }
}

/// Prints every record of `reader` into `out`; gives `out` back.
fn print_all<W: Write>(reader: &mut TraceReader, out: W, format: Format) -> Result<W> {
    let mut printer = Printer::new(out, format, &reader.header);
    while let Some(r) = reader.next_record()? {
        printer.record(&r)?;
    }
    Ok(printer.finish()?)
}
