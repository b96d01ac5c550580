//! What the user layer tells about a run besides its counts: calls still
//! in progress at the end, calls that could not be counted, processes that
//! could not be profiled and why, and the time spent on non-files.

use std::collections::{BTreeMap, HashMap};

use fsprof_core::profile::{layer, Layer, Unprofiled};
use fsprof_core::units::format_ns;
use fsprof_sys::process::pid_exists;

use crate::reader::{Counted, ProcessCounters};
use crate::rundir::{LostProcess, LostWhy};

/// Calls entered but not returned: in a process that ended (it died inside
/// them), or in one still running when the run ended (a daemon the command
/// left behind, still inside a call).
pub fn unfinished(procs: &[ProcessCounters]) -> Vec<String> {
    let mut newest: HashMap<i32, u64> = HashMap::new();
    for p in procs {
        let e = newest.entry(p.pid).or_insert(p.seq);
        *e = (*e).max(p.seq);
    }
    // op -> (calls in ended processes, calls in running ones, their pids)
    let mut by_op: BTreeMap<&str, (u64, u64, Vec<i32>)> = BTreeMap::new();
    for p in procs {
        let unfinished = |c: &&Counted| c.is_file() && c.unfinished() > 0;
        let mut ops = p.counted.iter().filter(unfinished).peekable();
        if ops.peek().is_none() {
            continue; // asking the kernel about 2,000 pids costs ms at the end
        }
        let running = newest[&p.pid] == p.seq && pid_exists(p.pid);
        for op in ops {
            let e = by_op.entry(op.name()).or_default();
            if running {
                e.1 += op.unfinished();
                if !e.2.contains(&p.pid) {
                    e.2.push(p.pid);
                }
            } else {
                e.0 += op.unfinished();
            }
        }
    }
    let mut out = Vec::new();
    for (op, (ended, running, pids)) in by_op {
        if ended > 0 {
            out.push(format!(
                "{op}: {ended} call(s) never returned (the process ended inside them); they are counted as entered only"
            ));
        }
        if running > 0 {
            let pids: Vec<String> = pids.iter().map(i32::to_string).collect();
            out.push(format!(
                "{op}: {running} call(s) still in progress when the run ended (pid {} still running); they are counted as entered only",
                pids.join(", ")
            ));
        }
    }
    out
}

/// Calls the shim could not count for want of room for their counters.
pub fn dropped(procs: &[ProcessCounters]) -> Vec<String> {
    let n: u64 = procs.iter().map(|p| p.dropped).sum();
    if n == 0 {
        return Vec::new();
    }
    let err = procs
        .iter()
        .find(|p| p.dropped_err != 0)
        .map(|p| p.dropped_err)
        .unwrap_or(0);
    vec![format!(
        "{n} call(s) were not counted: no room for their counters ({})",
        setup_reason(err)
    )]
}

/// Why a lost process was not profiled, in a few words.
pub fn unprofiled(l: &LostProcess) -> Unprofiled {
    let reason = match l.why {
        LostWhy::Setup(err) => setup_reason(err),
        LostWhy::Uid(uid) => format!(
            "runs as uid {uid}, who cannot write the run directory (the workload dropped its privileges)"
        ),
        LostWhy::Exec(uid) => format!(
            "started as uid {uid} after the workload dropped its privileges; run without the preload shim (the run directory is not that user's)"
        ),
    };
    Unprofiled {
        pid: l.pid,
        ppid: l.ppid,
        exe: l.exe.clone(),
        reason,
    }
}

fn setup_reason(err: i32) -> String {
    match err {
        libc::ENOSPC => "no space for its counters: the run directory's file system (/dev/shm or $TMPDIR) is full".into(),
        libc::ENOMEM => "no room in its address space to map its counters (an address-space limit such as ulimit -v, or no memory)".into(),
        libc::EMFILE | libc::ENFILE => "no file descriptor left to create its counter file (EMFILE: the open-files limit)".into(),
        0 => "unknown cause".into(),
        e => format!(
            "its counter file could not be created: {}",
            std::io::Error::from_raw_os_error(e)
        ),
    }
}

/// One line per process not profiled (the first few), and how many in all.
pub fn lost(unprofiled: &[Unprofiled], count: u64) -> Vec<String> {
    const SHOWN: usize = 10;
    if count == 0 {
        return Vec::new();
    }
    let mut out = vec![format!(
        "{count} process(es) of the run were not profiled; their calls are missing from the profile:"
    )];
    for u in unprofiled.iter().take(SHOWN) {
        out.push(format!("  pid {} ({}): {}", u.pid, u.exe, u.reason));
    }
    let listed = unprofiled.len().min(SHOWN) as u64;
    if count > listed {
        out.push(format!("  ... and {} more", count - listed));
    }
    out
}

/// Where the calls on non-files went.
pub fn nonfile(layers: &[Layer]) -> Vec<String> {
    let Some(l) = layers.iter().find(|l| l.name == layer::USER_NONFILE) else {
        return Vec::new();
    };
    vec![format!(
        "{} call(s), {} in all, were on pipes, sockets, terminals or other non-files; they are kept out of the file-system ops (see them with --layer {})",
        l.total_calls(),
        format_ns(l.total_ns() as f64),
        layer::USER_NONFILE
    )]
}
