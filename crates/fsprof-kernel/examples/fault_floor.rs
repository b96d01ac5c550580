//! The floor of `fsprof trace` following a command's page faults (issue
//! 28): a minimal tracer with the same programs and maps
//! ([`FaultSession::start`] on this process, whose children the fork
//! program follows), the command started once they are attached (std's
//! spawn: `vfork` and `exec`), its faults drained when it has exited, the
//! programs detached, and nothing else: no shim, no trace file, no
//! profile, a small binary. `bench/trace_mmap.py --floor PATH` times it
//! beside the bare command and `fsprof trace` in the same rounds: what
//! following faults costs before anything fsprof adds.
//!
//! Every fault of the command is reported (it is followed as marked, not
//! only once its shim maps a file): a few more events than `fsprof trace`
//! sends for the same program.
//!
//! `--overlap` first is the floor of `fsprof trace`'s own order (the fault
//! programs attached when a process first maps a file, crates/fsprof-trace
//! faultword.rs): the maps and the fork followers made before the command
//! starts, the fault programs loaded and attached on a thread while it
//! starts, and the command not held for them. A lower bound, not a
//! capture: without a shim nothing waits at the first `mmap`, so faults
//! before the attach are missed where `fsprof trace` waits for it.
//!
//! usage: target/release/examples/fault_floor [--overlap] CMD [ARGS...]   (root)
//! (`cargo build --release -p fsprof-kernel --example fault_floor`);
//! prints the faults reported to standard error; exits with the
//! command's status.
//!
//! `FSPROF_FLOOR_SPLIT` splits the floor (`bench/fault_floor_split.py`):
//! `none` starts the command with nothing attached (the launcher alone),
//! `idle` attaches every program but follows nothing (the attach and the
//! programs' early exit on every fault), `full` is the floor itself and
//! `stats` the floor with the kernel's run-time statistics of BPF
//! programs on (each program's runs and their summed time). With any of
//! them one line on standard error gives each stage's µs: `split
//! attach=.. command=.. drain=.. [detach=..] faults=.. [prog=NAME:RUNS:NS
//! ...]`. The floor detaches its programs as it exits (the kernel closes
//! its descriptors), and so do `none`, `idle` and `full`; `stats` detaches
//! them before it exits, timed (`detach`): detached that way, the process
//! took ~4 ms longer to end on the project's 2-CPU test machine, so its
//! wall time is not the floor's.

use std::process::{exit, Command};
use std::time::Instant;

use fsprof_kernel::faults::FaultSession;

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let Some((cmd, rest)) = args.split_first() else {
        eprintln!("usage: fault_floor CMD [ARGS...]");
        exit(2);
    };
    if cmd == "--overlap" {
        let Some((cmd, rest)) = rest.split_first() else {
            eprintln!("usage: fault_floor --overlap CMD [ARGS...]");
            exit(2);
        };
        let mut s = session(FaultSession::prepare());
        if let Err(e) = s.follow_every_fault(std::process::id() as i32) {
            eprintln!("fault_floor: {e}");
            exit(2);
        }
        let load = session_part(s.fault_load());
        let attach = std::thread::spawn(move || load.load()?.attach());
        let status = spawn(cmd, rest);
        let attached = attach.join().expect("the attach does not panic");
        let attached = session_part(attached);
        let mut faults = 0u64;
        s.drain(|_| faults += 1);
        eprintln!("fault_floor: {faults} fault(s) reported, {} lost", s.lost());
        drop(attached);
        exit(status);
    }
    let split = std::env::var("FSPROF_FLOOR_SPLIT").ok();
    let Some(split) = split else {
        let mut s = session(FaultSession::start(std::process::id() as i32));
        let status = spawn(cmd, rest);
        let mut faults = 0u64;
        s.drain(|_| faults += 1);
        eprintln!("fault_floor: {faults} fault(s) reported, {} lost", s.lost());
        exit(status);
    };
    let stats = (split == "stats").then(|| {
        fsprof_kernel::sys::enable_stats().unwrap_or_else(|e| {
            eprintln!("fault_floor: BPF_ENABLE_STATS: {e}");
            exit(2)
        })
    });
    let t0 = Instant::now();
    let mut s = match split.as_str() {
        "none" => None,
        "idle" => Some(session(FaultSession::attach())),
        "full" | "stats" => Some(session(FaultSession::start(std::process::id() as i32))),
        other => {
            eprintln!("fault_floor: FSPROF_FLOOR_SPLIT={other}: none, idle, full or stats");
            exit(2);
        }
    };
    let t1 = Instant::now();
    let status = spawn(cmd, rest);
    let t2 = Instant::now();
    let mut faults = 0u64;
    if let Some(s) = &mut s {
        s.drain(|_| faults += 1);
    }
    let t3 = Instant::now();
    let us = |a: Instant, b: Instant| b.duration_since(a).as_secs_f64() * 1e6;
    let mut line = format!(
        "split attach={:.1} command={:.1} drain={:.1}",
        us(t0, t1),
        us(t1, t2),
        us(t2, t3)
    );
    if stats.is_some() {
        for r in s.iter().flat_map(|s| s.run_stats()) {
            line += &format!(" prog={}:{}:{}", r.name, r.runs, r.run_ns);
        }
        drop(s.take());
        line += &format!(" detach={:.1}", us(t3, Instant::now()));
    }
    eprintln!("{line} faults={faults}");
    exit(status);
}

fn session(s: Result<FaultSession, fsprof_kernel::Error>) -> FaultSession {
    session_part(s)
}

fn session_part<T>(s: Result<T, fsprof_kernel::Error>) -> T {
    s.unwrap_or_else(|e| {
        eprintln!("fault_floor: {e}");
        exit(2)
    })
}

/// Runs the command to its end: its exit status.
fn spawn(cmd: &std::ffi::OsStr, rest: &[std::ffi::OsString]) -> i32 {
    match Command::new(cmd).args(rest).status() {
        Ok(st) => st.code().unwrap_or(1),
        Err(e) => {
            eprintln!("fault_floor: {}: {e}", cmd.to_string_lossy());
            exit(127);
        }
    }
}
