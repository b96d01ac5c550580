//! The followed process tree of a capture (`fsprof kernel -- CMD` or
//! `--pid`, and the page faults of `fsprof trace`): a hash map of thread
//! group ids, in which the programs' filter looks up the current task's.
//!
//! - **Keyed by tgid, one entry per process.** Every thread's events carry
//!   its group's tgid, so a thread needs no entry: `sched_process_fork`
//!   fires for new threads too, and the fork program adds the child's
//!   tgid only when it is not the parent's (a new process). Keyed by
//!   thread id, a build's threads would fill the map as its processes do.
//! - **Removed when the last task of the process exits.**
//!   `sched_process_exit` fires once per task, and a group leader can exit
//!   (`pthread_exit`) before its threads, which run on under its tgid; so
//!   the exit program removes the tgid only when the group is dead (the
//!   exiting task took `signal->live` to 0). Without removal, a capture of
//!   more processes in all than the map holds lost every later one, and a
//!   new process that reused a gone one's pid was followed by mistake.
//! - **A failed add is counted, in the kernel.** More processes alive at
//!   once than the map's entries cannot all be followed; each fork whose
//!   child could not be added counts one, which the capture reports (the
//!   child's own children are not followed either, and not counted).
//!
//! The programs are raw tracepoint programs, reading the tasks at their
//! BTF offsets (closing a perf tracepoint event costs every capture 80-90
//! ms, measured). Without BTF the fork is followed through the perf
//! tracepoint's `child_pid` (a thread id for a thread: threads then take
//! entries) and nothing is removed; failed adds are still counted.

use std::path::Path;

use crate::attach::{map, raw_program, tracepoint_program};
use crate::insn::{helper, Alu, Asm, Insn, Jmp, Size, R0, R1, R10, R6, R7, R8, R9};
use crate::progs::{begin_enter, delete, end, ld_field, lookup, probe, update, Filter};
use crate::sys::{self, Attachment, Map, Prog};
use crate::tracefs::Tracepoint;
use crate::Error;

/// Processes a followed tree of `fsprof kernel` may hold alive at once.
pub const ENTRIES: u32 = 65536;
/// ... and the tree whose page faults `fsprof trace` follows. Fewer: the
/// kernel allocates and zeroes a hash map's buckets, one per entry
/// rounded up to a power of two, when the map is made, even without
/// preallocated entries, and that is on the path before the traced
/// command starts: 353 µs for 65,536 entries, 118 µs for 16,384 (medians
/// of 21 creations on this project's 2-CPU test machine). A traced tree
/// records every call of every process: 16,384 processes alive at once
/// is beyond what a trace is for.
pub const TRACE_ENTRIES: u32 = 16384;

/// A map's entries: `max`, or fewer when the test knob
/// `FSPROF_TEST_FOLLOWED_MAX` says so (tests fill the map with a few
/// processes; never more than `max`).
fn entries(max: u32) -> u32 {
    fsprof_sys::test_knob("FSPROF_TEST_FOLLOWED_MAX").map_or(max, |n| n.clamp(1, max))
}

/// Where the programs find a task's ids and whether its group is dead, in
/// the running kernel's `task_struct` and `signal_struct`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskLayout {
    pub tgid: u32,
    pub signal: u32,
    /// `signal_struct.live`: the group's tasks that have not exited.
    pub live: u32,
}

impl TaskLayout {
    /// The running kernel's, from its BTF; `None` without BTF or a member.
    pub fn vmlinux() -> Option<TaskLayout> {
        let btf = crate::btf::Btf::vmlinux().ok()?;
        let member = |s: &str, m: &str, size: u32| match btf.member(s, m) {
            Some((off, sz)) if sz == size => Some(off),
            _ => None,
        };
        Some(TaskLayout {
            tgid: member("task_struct", "tgid", 4)?,
            signal: member("task_struct", "signal", 8)?,
            live: member("signal_struct", "live", 4)?,
        })
    }
}

// Stack slots (offsets from r10), beside the filter's -16..-8.
const KEY: i16 = -24;
const VAL: i16 = -32;

/// Raw `sched_process_fork` (args: parent, child `task_struct *`; the
/// parent is the current task): a followed process's new child process
/// is added; a failed add counts in `counts`.
pub fn fork_prog(l: &TaskLayout, targets: i32, counts: i32) -> Vec<Insn> {
    let (mut a, out) = begin_enter(&Filter::Targets { map_fd: targets });
    a.ldx(Size::W, R9, R0, 0);
    a.ldx(Size::DW, R7, R6, 8);
    probe(&mut a, R8, R7, l.tgid, Size::W);
    // A new thread of this process: its tgid is in already.
    a.call(helper::GET_CURRENT_PID_TGID);
    a.alu_imm(Alu::Rsh, R0, 32);
    a.jmp_reg(Jmp::Eq, R0, R8, out);
    a.mov(R1, R8);
    add(&mut a, targets, counts);
    end(a, out)
}

/// The perf tracepoint `sched:sched_process_fork`, where the kernel has no
/// BTF: the child's `child_pid` (a thread's id, for a new thread) added.
pub fn fork_prog_perf(tp: &Tracepoint, targets: i32, counts: i32) -> Result<Vec<Insn>, Error> {
    let (mut a, out) = begin_enter(&Filter::Targets { map_fd: targets });
    a.ldx(Size::W, R9, R0, 0);
    ld_field(&mut a, R1, R6, tp.field("child_pid")?)?;
    add(&mut a, targets, counts);
    Ok(end(a, out))
}

/// Adds the tgid in r1 with the parent's value, in r9 (the fault
/// programs' mark of a process that maps files: the child has the
/// parent's mappings, [`crate::faults`]); counts a failure.
fn add(a: &mut Asm, targets: i32, counts: i32) {
    let done = a.label();
    a.stx(Size::W, R10, KEY, R1);
    a.stx(Size::W, R10, VAL, R9);
    update(a, targets, KEY, VAL, sys::BPF_ANY as i32);
    a.jmp_imm(Jmp::Eq, R0, 0, done);
    a.st_imm(Size::W, R10, KEY, 0);
    lookup(a, counts, KEY);
    a.jmp_imm(Jmp::Eq, R0, 0, done);
    a.mov_imm(R1, 1);
    a.atomic_add64(R0, 0, R1);
    a.bind(done);
}

/// Raw `sched_process_exit` (arg: the exiting task, the current one): a
/// followed process's tgid removed once its last task exits.
pub fn exit_prog(l: &TaskLayout, targets: i32) -> Vec<Insn> {
    let (mut a, out) = begin_enter(&Filter::Targets { map_fd: targets });
    a.ldx(Size::DW, R7, R6, 0);
    probe(&mut a, R7, R7, l.signal, Size::DW);
    a.jmp_imm(Jmp::Eq, R7, 0, out);
    probe(&mut a, R8, R7, l.live, Size::W);
    a.jmp_imm(Jmp::Ne, R8, 0, out);
    a.call(helper::GET_CURRENT_PID_TGID);
    a.alu_imm(Alu::Rsh, R0, 32);
    a.stx(Size::W, R10, KEY, R0);
    delete(&mut a, targets, KEY);
    end(a, out)
}

/// The map of a followed tree, the count of processes it had no room
/// for, and the names they go by in errors.
pub(crate) struct Tree {
    targets: Map,
    counts: Map,
    name: &'static str,
    entries: u32,
}

impl Tree {
    /// `name` (`fsprof_targets`) names the map; `counts` its counter; it
    /// holds [`entries`]`(max)` processes.
    pub(crate) fn create(name: &'static str, counts: &str, max: u32) -> Result<Tree, Error> {
        // Allocated as processes are added: preallocating 65,536 entries
        // was a third of what attaching cost (measured, `fsprof trace --
        // /bin/true`).
        let lazy = sys::BPF_F_NO_PREALLOC;
        let entries = entries(max);
        let targets = map(name, sys::MAP_HASH, 4, 4, entries, lazy)?;
        let counts = map(counts, sys::MAP_ARRAY, 4, 8, 1, 0)?;
        Ok(Tree {
            targets,
            counts,
            name,
            entries,
        })
    }

    pub(crate) fn fd(&self) -> i32 {
        self.targets.fd()
    }

    /// The count of processes it had no room for.
    pub(crate) fn counts_fd(&self) -> i32 {
        self.counts.fd()
    }

    /// Processes it holds alive at once.
    pub(crate) fn entries(&self) -> u32 {
        self.entries
    }

    /// Follows process `pid` (a tgid) and the processes it forks from now on.
    pub(crate) fn add(&self, pid: i32) -> Result<(), Error> {
        self.add_as(pid, 1)
    }

    /// The same, with `value` (the fault programs' bits).
    pub(crate) fn add_as(&self, pid: i32, value: u32) -> Result<(), Error> {
        let v = value.to_le_bytes();
        crate::attach::update(&self.targets, self.name, &pid.to_le_bytes(), &v)
    }

    /// New processes of the tree that were not followed: the map was full.
    pub(crate) fn unfollowed(&self) -> u64 {
        self.counts
            .lookup(&0u32.to_le_bytes())
            .ok()
            .flatten()
            .and_then(|v| Some(u64::from_ne_bytes(v.get(..8)?.try_into().ok()?)))
            .unwrap_or(0)
    }

    /// The fork program, then the exit program (raw, with `layout`), or
    /// the perf tracepoint fork program alone (without).
    pub(crate) fn programs(
        &self,
        layout: Option<TaskLayout>,
        tracefs: &Path,
    ) -> Result<Vec<(Prog, Attachment)>, Error> {
        let (t, c) = (self.targets.fd(), self.counts.fd());
        let Some(l) = layout else {
            let fork = Tracepoint::load(tracefs, "sched", "sched_process_fork")?;
            let insns = fork_prog_perf(&fork, t, c);
            return Ok(vec![tracepoint_program(&fork, insns)?]);
        };
        Ok(vec![
            raw_program("sched_process_fork", &fork_prog(&l, t, c))?,
            raw_program("sched_process_exit", &exit_prog(&l, t))?,
        ])
    }
}

/// The warning for `n` processes not followed by a map of `entries`,
/// whose `what` is missing.
pub fn unfollowed_warning(n: u64, entries: u32, what: &str) -> Option<String> {
    (n > 0).then(|| {
        format!(
            "{n} process(es) of the followed tree were not followed, nor any they started: more were alive at once than fsprof's map of followed processes holds ({entries} entries), so {what}"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_programs_are_made_for_any_layout() {
        let l = TaskLayout {
            tgid: 2500,
            signal: 2900,
            live: 40,
        };
        assert!(fork_prog(&l, 3, 4).len() > 20);
        assert!(exit_prog(&l, 3).len() > 20);
    }

    #[test]
    fn no_warning_without_a_loss() {
        assert_eq!(unfollowed_warning(0, 8, "x"), None);
        let w = unfollowed_warning(3, 8, "their page faults are not in the trace").unwrap();
        assert!(
            w.starts_with("3 process(es) of the followed tree were not followed"),
            "{w}"
        );
        assert!(
            w.ends_with("so their page faults are not in the trace"),
            "{w}"
        );
    }
}
