//! `fsprof compile TRACE -o REPLAY`: a trace made replayable (command
//! stream, resource table, de-duplicated buffers, initial state, ordering
//! constraints); prints the raw and compiled sizes.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use fsprof_core::units::format_bytes;
use fsprof_trace::compile::compile as compile_trace;

#[derive(Debug, Args)]
pub struct CompileArgs {
    /// Trace file (from `fsprof trace` or `fsprof import`)
    pub trace: PathBuf,
    /// Where to write the compiled trace
    #[arg(short, long, value_name = "REPLAY", required = true)]
    pub output: PathBuf,
    /// Replace REPLAY if it exists
    #[arg(short, long)]
    pub force: bool,
}

pub fn compile(a: CompileArgs) -> Result<i32> {
    let s = compile_trace(&a.trace, &a.output, a.force)?;
    let pct = |x: u64, of: u64| {
        if of == 0 {
            0.0
        } else {
            100.0 * x as f64 / of as f64
        }
    };
    fsprof_sys::diag!(
        "fsprof: compiled {} into {}",
        a.trace.display(),
        a.output.display()
    );
    fsprof_sys::diag!(
        "  raw trace {} of records ({} compressed on disk); compiled {} = {:.0}% of raw, {:.0}% of the trace file",
        format_bytes(s.raw_trace_bytes as f64),
        format_bytes(s.trace_file_bytes as f64),
        format_bytes(s.compiled_bytes as f64),
        pct(s.compiled_bytes, s.raw_trace_bytes),
        pct(s.compiled_bytes, s.trace_file_bytes)
    );
    fsprof_sys::diag!(
        "  {} commands on {} replay thread(s), {} resource slot(s), {} ordering constraint(s)",
        s.commands,
        s.threads,
        s.slots,
        s.waits
    );
    fsprof_sys::diag!(
        "  {} buffer(s), {} (de-duplication saved {}); initial state: {} entr(ies)",
        s.buffers,
        format_bytes(s.buffer_bytes as f64),
        format_bytes(s.dedup_saved_bytes as f64),
        s.initial_entries
    );
    for (why, n) in &s.skipped {
        fsprof_sys::diag!("  not replayed: {n} call(s): {why}");
    }
    Ok(0)
}
