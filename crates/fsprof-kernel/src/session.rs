//! A running kernel profile: maps, loaded programs and their attachments,
//! and the conversion of the in-kernel counters into fsprof layers.

use std::collections::BTreeMap;
use std::path::PathBuf;

use fsprof_core::histogram::{Histogram, OpStats};
use fsprof_core::ops::{block, fuse, syscall};
use fsprof_core::profile::{layer, layer_in, Layer};
use fsprof_core::{BucketLayout, Resolution};

use crate::names;
use crate::progs;
use crate::sys::{self, Attachment, Map, Prog};
use crate::Error;

/// File systems whose `X_enter`/`X_exit` tracepoint pairs form the fs layer.
pub const FS_CATEGORIES: [&str; 3] = ["ext4", "xfs", "btrfs"];

/// Which tasks are profiled.
#[derive(Clone, Debug)]
pub enum Target {
    /// These processes and every process they fork from now on.
    Tree(Vec<i32>),
    /// Tasks with this command name.
    Comm(String),
    /// Tasks in this cgroup v2 directory.
    Cgroup(PathBuf),
    /// Every task.
    All,
}

impl Target {
    /// What the target covers, in words (a profile's `meta.target`).
    pub fn describe(&self) -> String {
        match self {
            Target::Tree(pids) => {
                let list: Vec<String> = pids.iter().map(|p| p.to_string()).collect();
                match pids.len() {
                    1 => format!("pid {} and the children it forks", list[0]),
                    _ => format!("pids {} and the children they fork", list.join(", ")),
                }
            }
            Target::Comm(c) => format!("tasks named {c}"),
            Target::Cgroup(p) => format!("tasks in cgroup {}", p.display()),
            Target::All => fsprof_core::profile::SYSTEM_WIDE.to_string(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Options {
    pub syscall: bool,
    pub fs: bool,
    pub block: bool,
    pub fuse: bool,
    pub all_syscalls: bool,
    pub resolution: Resolution,
    pub target: Target,
    /// Tracepoints (`category:name`) that must exist; a test hook for the
    /// "kernel without this tracepoint" error path.
    pub require: Vec<String>,
    /// The layers were named by the user: a missing tracepoint is an error.
    /// Otherwise (the default set) a layer the kernel lacks is skipped with
    /// a note.
    pub explicit_layers: bool,
    /// Use perf tracepoints for the syscall layer even where raw ones work
    /// (tests the fallback).
    pub perf_tracepoints: bool,
    /// Kernel functions (in vmlinux BTF) timed with fentry/fexit in the fs
    /// layer besides the VFS entry points, e.g. ext4_file_read_iter.
    pub fs_functions: Vec<String>,
}

/// Loaded and attached programs. Dropping it detaches everything.
pub struct Session {
    pub(crate) layout: BucketLayout,
    pub(crate) stats: Map,
    pub(crate) sys_stats: Map,
    pub(crate) hist: Map,
    pub(crate) targets: Option<Map>,
    pub(crate) starts: Vec<Map>,
    pub(crate) fs_ops: Vec<String>,
    // Attachments before programs and maps: detach first, then free.
    pub(crate) _attachments: Vec<Attachment>,
    pub(crate) _progs: Vec<Prog>,
    pub(crate) _thresh: Option<Map>,
    pub(crate) _mask: Option<Map>,
    /// Which layers were attached.
    pub layers: Vec<&'static str>,
    /// Layers skipped and why.
    pub notes: Vec<String>,
}

pub use crate::attach::{prog_name, prog_prefix};

impl Session {
    /// Checks, loads and attaches everything `o` asks for (see
    /// [`crate::attach`]); dropping the session detaches it all.
    pub fn start(o: &Options) -> Result<Session, Error> {
        crate::attach::start(o)
    }

    /// Adds a process (by tgid) to the followed tree.
    pub fn add_target(&self, pid: i32) -> Result<(), Error> {
        let Some(t) = &self.targets else {
            return Ok(());
        };
        t.update(
            &(pid as u32).to_le_bytes(),
            &1u32.to_le_bytes(),
            sys::BPF_ANY,
        )
        .map_err(|err| Error::Read {
            name: "fsprof_targets".into(),
            err,
        })
    }

    /// The counters so far as fsprof layers. With `final_read`, calls still
    /// in flight are counted as entered but not returned.
    pub fn snapshot(&self, final_read: bool) -> Result<Snapshot, Error> {
        let rd = |name: &str, m: &Map| {
            m.entries().map_err(|err| Error::Read {
                name: name.into(),
                err,
            })
        };
        let mut per_op: BTreeMap<u64, (Vec<u64>, u64, [u64; 5])> = BTreeMap::new();
        let nslots = self.layout.thresholds().len();
        for (k, vals) in rd("fsprof_hist", &self.hist)? {
            let opkey = u64::from_le_bytes(k[0..8].try_into().unwrap());
            let slot = u64::from_le_bytes(k[8..16].try_into().unwrap()) as usize;
            let n: u64 = vals
                .iter()
                .map(|v| u64::from_le_bytes(v[..8].try_into().unwrap()))
                .sum();
            let e = per_op
                .entry(opkey)
                .or_insert_with(|| (vec![0; nslots], 0, [0; 5]));
            if slot == progs::ZERO_SLOT as usize {
                e.1 += n;
            } else if slot < nslots {
                e.0[slot] += n;
            }
        }
        let mut stats = rd("fsprof_stats", &self.stats)?;
        // Syscall counters: index = syscall number = op key.
        for (k, vals) in rd("fsprof_sysstats", &self.sys_stats)? {
            let mut key = k.clone();
            key.resize(8, 0);
            stats.push((key, vals));
        }
        for (k, vals) in stats {
            if vals.iter().all(|v| v[0..8] == [0; 8]) {
                continue; // an array slot never used
            }
            let opkey = u64::from_le_bytes(k[0..8].try_into().unwrap());
            let e = per_op
                .entry(opkey)
                .or_insert_with(|| (vec![0; nslots], 0, [0; 5]));
            for v in vals {
                let w = |i: usize| u64::from_le_bytes(v[i * 8..i * 8 + 8].try_into().unwrap());
                if w(0) == 0 {
                    continue;
                }
                e.2[0] += w(0);
                e.2[1] += w(1);
                e.2[2] += w(2);
                e.2[3] = e.2[3].max(w(3));
                e.2[4] = e.2[4].max(w(4));
            }
        }
        let mut unfinished: BTreeMap<u64, u64> = BTreeMap::new();
        if final_read {
            for m in &self.starts {
                for (_, vals) in rd("start", m)? {
                    // A zero timestamp marks a consumed per-thread entry.
                    if vals[0][0..8] == [0; 8] {
                        continue;
                    }
                    let opkey = u64::from_le_bytes(vals[0][8..16].try_into().unwrap());
                    *unfinished.entry(opkey).or_default() += 1;
                    if (opkey as u32) >= progs::BLOCK_BASE
                        && (opkey as u32) < progs::BLOCK_SIZE_BASE
                    {
                        let size_key = opkey + (progs::BLOCK_SIZE_BASE - progs::BLOCK_BASE) as u64;
                        *unfinished.entry(size_key).or_default() += 1;
                    }
                }
            }
        }
        let mut snap = Snapshot::default();
        let mut keys: Vec<u64> = per_op.keys().copied().collect();
        keys.extend(unfinished.keys().copied());
        keys.sort_unstable();
        keys.dedup();
        let mut dev_names = BTreeMap::new();
        for key in keys {
            let (slots, zero, st) = per_op
                .get(&key)
                .cloned()
                .unwrap_or_else(|| (vec![0; nslots], 0, [0; 5]));
            let (lname, opname) = self.op_name(key, &mut dev_names);
            let histogram = Histogram::from_slots(zero, &slots);
            let post = histogram.total();
            if st[0] != post {
                snap.lost += st[0].abs_diff(post);
            }
            let op = OpStats {
                name: opname,
                pre: post + unfinished.get(&key).copied().unwrap_or(0),
                post,
                errors: st[2],
                total_ns: st[1],
                min_ns: (st[0] > 0).then_some(!st[4]),
                max_ns: (st[0] > 0).then_some(st[3]),
                histogram,
                ..Default::default()
            };
            layer_in(&mut snap.layers, lname).ops.push(op);
        }
        for l in &mut snap.layers {
            l.normalize();
        }
        Ok(snap)
    }

    fn op_name(&self, key: u64, devs: &mut BTreeMap<u32, String>) -> (&'static str, String) {
        let op = key as u32;
        let dev = (key >> 32) as u32;
        let mut dev_name = || {
            devs.entry(dev)
                .or_insert_with(|| names::block_device(dev))
                .clone()
        };
        if op < progs::FS_BASE {
            (layer::SYSCALL, syscall::name(op))
        } else if op < progs::BLOCK_BASE {
            let i = (op - progs::FS_BASE) as usize;
            (
                layer::FS,
                self.fs_ops
                    .get(i)
                    .cloned()
                    .unwrap_or_else(|| format!("fs_{i}")),
            )
        } else if op < progs::BLOCK_SIZE_BASE {
            let kind = block::KINDS
                .get((op - progs::BLOCK_BASE) as usize)
                .unwrap_or(&block::OTHER);
            (layer::BLOCK, block::op_name(&dev_name(), kind))
        } else if op < progs::FUSE_BASE {
            let kind = block::KINDS
                .get((op - progs::BLOCK_SIZE_BASE) as usize)
                .unwrap_or(&block::OTHER);
            (layer::BLOCK_SIZE, block::op_name(&dev_name(), kind))
        } else {
            (layer::FUSE, fuse::name(op - progs::FUSE_BASE))
        }
    }
}

impl Session {
    /// Detaches everything without making the caller wait for it.
    ///
    /// The kernel detaches tracepoint programs one at a time, each after an
    /// RCU grace period (~40 ms here), so 25 tracepoints take a second. A
    /// forked helper keeps a reference to every fd until this process has
    /// exited, then exits itself: the last close, and the waiting, happen
    /// there. Until then the programs run on but nothing reads their maps.
    /// If the fork fails, this is an ordinary (slow) drop.
    pub fn detach_in_background(self) {
        let mut fds = [0; 2];
        // SAFETY: fds is a valid two-int array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return;
        }
        // SAFETY: the child only calls async-signal-safe functions.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            unsafe {
                libc::setsid();
                for fd in 0..3 {
                    libc::close(fd);
                }
                libc::close(fds[1]);
                // EOF once the parent (every holder of the write end) exited.
                let mut b = 0u8;
                while libc::read(fds[0], &mut b as *mut u8 as *mut libc::c_void, 1) > 0 {}
                libc::_exit(0);
            }
        }
        // SAFETY: our own pipe fds; the write end stays open until we exit.
        unsafe { libc::close(fds[0]) };
        if pid < 0 {
            // SAFETY: as above.
            unsafe { libc::close(fds[1]) };
        }
        drop(self);
    }
}

impl Drop for Session {
    /// Detaching a tracepoint program waits for an RCU grace period (tens of
    /// ms). Closing the events one after another would add that per
    /// tracepoint to every run, so they are closed concurrently.
    fn drop(&mut self) {
        let atts = std::mem::take(&mut self._attachments);
        std::thread::scope(|s| {
            for a in atts {
                s.spawn(move || drop(a));
            }
        });
    }
}

/// Layers read from the kernel maps.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub layers: Vec<Layer>,
    /// Observations whose counters and histogram disagree: a map was full
    /// or an insert raced. Zero in a sound profile.
    pub lost: u64,
}
