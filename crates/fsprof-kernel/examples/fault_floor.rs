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
//! usage: target/release/examples/fault_floor CMD [ARGS...]   (root)
//! (`cargo build --release -p fsprof-kernel --example fault_floor`);
//! prints the faults reported to standard error; exits with the
//! command's status.

use std::process::{exit, Command};

use fsprof_kernel::faults::FaultSession;

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let Some((cmd, rest)) = args.split_first() else {
        eprintln!("usage: fault_floor CMD [ARGS...]");
        exit(2);
    };
    let mut s = match FaultSession::start(std::process::id() as i32) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("fault_floor: {e}");
            exit(2);
        }
    };
    let status = match Command::new(cmd).args(rest).status() {
        Ok(st) => st,
        Err(e) => {
            eprintln!("fault_floor: {}: {e}", cmd.to_string_lossy());
            exit(127);
        }
    };
    let mut faults = 0u64;
    s.drain(|_| faults += 1);
    eprintln!("fault_floor: {faults} fault(s) reported, {} lost", s.lost());
    exit(status.code().unwrap_or(1));
}
