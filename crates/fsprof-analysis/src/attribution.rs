//! Layered attribution (OSprof's layered profiling, done per call): how
//! many of a system call's calls waited for block I/O, and for how long.
//!
//! The charging happens in the kernel while the calls run (fsprof-kernel's
//! `charge` module): a block request belongs to the profiled thread that
//! queued it, and the time the thread has requests in flight is charged to
//! the system call it is in when they complete. Each call that was charged
//! is filed in the `block-wait` layer, under the syscall's name, with the
//! time it waited. This module only sets that layer against `syscall`:
//! per op, the calls that waited (`calls%`) and the share of the op's time
//! spent waiting (`time%`).
//!
//! Earlier versions matched histograms bucket by bucket (a syscall peak
//! "explained" by a block peak of similar latency); that counted other
//! processes' I/O, asynchronous writeback and stacked devices (a loop
//! device and the disk under it) as waits of the profiled calls, so it is
//! gone: pairs of layers that cannot be charged per call get no
//! attribution, and the report says how to record one that can.

use fsprof_core::layer;
use fsprof_core::ops::syscall;
use fsprof_core::Profile;

/// One system call op: its calls, and those that slept uninterruptibly
/// while block I/O completed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockWait {
    /// Syscall name (`read`, `pread64`, `fsync`).
    pub op: String,
    pub calls: u64,
    pub waited_calls: u64,
    /// The op's total latency, ns.
    pub time_ns: u64,
    /// Time its calls were charged with, ns (never more than their latency).
    pub wait_ns: u64,
}

impl BlockWait {
    pub fn calls_share(&self) -> f64 {
        ratio(self.waited_calls, self.calls)
    }
    pub fn time_share(&self) -> f64 {
        ratio(self.wait_ns, self.time_ns)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// What a profile allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attribution {
    /// The profile has neither a block layer nor per-call data: nothing to say.
    None,
    /// It has the syscall and block layers but no per-call charging (an
    /// older fsprof, `--perf-tracepoints`, a kernel without BTF) or the
    /// block layer without the syscalls (a merged `fsprof mount` profile):
    /// why not, and how to record one.
    NotRecorded(String),
    /// Per syscall op, largest wait first: every op that waited, and every
    /// read, write and sync op even when none of its calls did (0%).
    Measured(Vec<BlockWait>),
}

/// Ops shown even when none of their calls waited: the ones that move or
/// sync file data.
fn data_or_sync(op: &str) -> bool {
    syscall::data(op).is_some()
        || matches!(
            op,
            "fsync" | "fdatasync" | "sync_file_range" | "syncfs" | "sync" | "msync"
        )
}

/// The attribution of `p` (see [`Attribution`]).
pub fn attribute(p: &Profile) -> Attribution {
    // The block-wait layer is written, empty or not, whenever the calls
    // were charged; the block layer itself is absent when no device did
    // anything.
    let (sys, blocks) = (p.layer(layer::SYSCALL), p.layer(layer::BLOCK));
    let waits = match (sys, p.layer(layer::BLOCK_WAIT), blocks) {
        (Some(_), Some(w), _) => w,
        (Some(_), None, Some(_)) => {
            return Attribution::NotRecorded(
                "this profile has no per-call block attribution (recorded by an older fsprof, with --perf-tracepoints, or on a kernel without BTF)".into(),
            )
        }
        (None, _, Some(_)) => {
            return Attribution::NotRecorded(
                "the block layer alone cannot be set against anything per call; record `fsprof kernel --layer syscall,block` (for an fsprof mount daemon: `--pid` of the daemon) to see which calls waited for it".into(),
            )
        }
        _ => return Attribution::None,
    };
    let sys = sys.expect("matched above");
    let mut rows: Vec<BlockWait> = sys
        .ops
        .iter()
        .filter(|o| data_or_sync(&o.name) || waits.op(&o.name).is_some())
        .map(|o| {
            let w = waits.op(&o.name);
            BlockWait {
                op: o.name.clone(),
                calls: o.post,
                waited_calls: w.map_or(0, |w| w.post),
                time_ns: o.total_ns,
                wait_ns: w.map_or(0, |w| w.total_ns.min(o.total_ns)),
            }
        })
        .collect();
    rows.sort_by(|a, b| b.wait_ns.cmp(&a.wait_ns).then(b.time_ns.cmp(&a.time_ns)));
    Attribution::Measured(rows)
}

/// One FUSE op seen from both sides: the kernel's request (`fuse`, send to
/// reply: queueing, the transfer to the daemon and back, and the daemon's
/// work) and the daemon's work on the lower file system (`fusefs`, from
/// `fsprof mount`).
#[derive(Clone, Debug, PartialEq)]
pub struct FuseSplit {
    pub op: String,
    pub kernel_calls: u64,
    pub daemon_calls: u64,
    pub kernel_ns: u64,
    pub daemon_ns: u64,
}

impl FuseSplit {
    /// The daemon's share of the kernel's request time. Exact accounting
    /// only when both sides saw the same requests (`daemon_calls ==
    /// kernel_calls`): a kernel capture of one program sees that
    /// program's requests, the daemon everyone's.
    pub fn daemon_share(&self) -> f64 {
        if self.kernel_ns == 0 {
            0.0
        } else {
            self.daemon_ns as f64 / self.kernel_ns as f64
        }
    }
}

/// Per op in both the `fuse` and the `fusefs` layers, their calls and
/// times side by side (a merged `fsprof kernel` + `fsprof mount` profile),
/// by kernel time, largest first.
pub fn fuse_split(p: &Profile) -> Vec<FuseSplit> {
    let (Some(k), Some(d)) = (p.layer(layer::FUSE), p.layer(layer::FUSEFS)) else {
        return Vec::new();
    };
    let mut out: Vec<FuseSplit> = k
        .ops
        .iter()
        .filter_map(|ko| {
            let dop = d.op(&ko.name)?;
            Some(FuseSplit {
                op: ko.name.clone(),
                kernel_calls: ko.post,
                daemon_calls: dop.post,
                kernel_ns: ko.total_ns,
                daemon_ns: dop.total_ns,
            })
        })
        .collect();
    out.sort_by(|a, b| b.kernel_ns.cmp(&a.kernel_ns).then(a.op.cmp(&b.op)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsprof_testkit::profiles::{op_total as op, profile_layers as profile};

    #[test]
    fn waits_are_set_against_their_syscall_and_idle_data_ops_show_zero() {
        let p = profile(&[
            (
                "syscall",
                vec![
                    op("read", 1000, 10_000_000),
                    op("write", 50, 1_000_000),
                    op("openat", 10, 50_000),
                    op("execve", 1, 900_000),
                ],
            ),
            ("block", vec![op("loop0:read", 5, 1)]),
            (
                "block-wait",
                vec![op("read", 10, 7_500_000), op("execve", 1, 300_000)],
            ),
        ]);
        let Attribution::Measured(rows) = attribute(&p) else {
            panic!("{:?}", attribute(&p))
        };
        let names: Vec<&str> = rows.iter().map(|r| r.op.as_str()).collect();
        assert_eq!(
            names,
            ["read", "execve", "write"],
            "openat neither waited nor moves data"
        );
        assert!((rows[0].calls_share() - 0.01).abs() < 1e-12);
        assert!((rows[0].time_share() - 0.75).abs() < 1e-12);
        assert_eq!((rows[2].waited_calls, rows[2].wait_ns), (0, 0));
    }

    #[test]
    fn a_charged_profile_without_block_requests_shows_zero() {
        let p = profile(&[
            ("syscall", vec![op("read", 10, 1000)]),
            ("block-wait", vec![]),
        ]);
        let Attribution::Measured(rows) = attribute(&p) else {
            panic!("{:?}", attribute(&p))
        };
        assert_eq!((rows.len(), rows[0].waited_calls), (1, 0));
    }

    #[test]
    fn profiles_without_per_call_data_say_so() {
        let sys = ("syscall", vec![op("read", 1, 1)]);
        let blk = ("block", vec![op("vda:read", 1, 1)]);
        assert_eq!(
            attribute(&profile(std::slice::from_ref(&sys))),
            Attribution::None
        );
        for layers in [vec![sys.clone(), blk.clone()], vec![blk.clone()]] {
            assert!(matches!(
                attribute(&profile(&layers)),
                Attribution::NotRecorded(_)
            ));
        }
    }
}
