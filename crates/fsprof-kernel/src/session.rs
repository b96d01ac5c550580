//! A running kernel profile: maps, loaded programs and their attachments,
//! and the conversion of the in-kernel counters into fsprof layers.

use std::collections::BTreeMap;
use std::path::PathBuf;

use fsprof_core::histogram::{Histogram, OpStats};
use fsprof_core::ops::{block, fuse, syscall};
use fsprof_core::profile::{layer, layer_in, Layer};
use fsprof_core::{BucketLayout, Resolution};

use crate::names;
use crate::progs::{self, StatsValue};
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
    /// File every observation under its cgroup ([`crate::bycgroup`]):
    /// read with [`Session::read_by_cgroup`], not [`Session::snapshot`].
    pub by_cgroup: bool,
    /// Time faults on file mappings in the fs layer (`mapped_read`,
    /// `mapped_write`, [`crate::mapfaults`]). Off unless asked for: the
    /// page-fault software events run their program for every fault of
    /// every task, up to about 1 µs more per fault (16,384 anonymous
    /// faults of a profiled program took 16 ms more system time than with
    /// the syscall layer alone, at load 10; against the fs layer without
    /// them the difference was within that load's noise).
    pub mapped_faults: bool,
}

/// Loaded and attached programs. Dropping it detaches everything.
pub struct Session {
    pub(crate) layout: BucketLayout,
    pub(crate) stats: Map,
    pub(crate) sys_stats: Map,
    pub(crate) hist: Map,
    pub(crate) targets: Option<crate::follow::Tree>,
    pub(crate) on: Map,
    pub(crate) blk_stats: Map,
    pub(crate) blk_hist: Map,
    pub(crate) starts: Vec<Map>,
    pub(crate) fs_ops: Vec<String>,
    // Attachments before programs and maps: detach first, then free.
    pub(crate) _attachments: Vec<Attachment>,
    pub(crate) _progs: Vec<Prog>,
    pub(crate) _thresh: Option<Map>,
    pub(crate) _mask: Option<Map>,
    pub(crate) _charge_maps: Vec<Map>,
    /// One u64: block requests issued again while fsprof still held them
    /// as issued ([`crate::blockrq`]): completions the kernel never
    /// delivered to fsprof's programs.
    pub(crate) blk_undelivered: Option<Map>,
    /// System calls are charged with their block waits: the `block-wait`
    /// layer is in every snapshot, empty when no call waited (so a report
    /// can say 0% rather than "not recorded").
    pub(crate) block_wait: bool,
    /// Which layers were attached.
    pub layers: Vec<&'static str>,
    /// Layers skipped and why.
    pub notes: Vec<String>,
    /// The maps of a by-cgroup session.
    pub(crate) cgroups: Option<crate::cgroups::CgroupMaps>,
    /// `cgroup_mkdir`/`cgroup_rmdir` are attached.
    pub(crate) cgroup_names: bool,
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
        match &self.targets {
            Some(t) => t.add(pid),
            None => Ok(()),
        }
    }

    /// Stops recording and waits until no program can still be adding to
    /// the counters, so that a final [`Session::snapshot`] reads them in a
    /// consistent state (the block layer is system-wide and never idle).
    pub fn stop_recording(&self) -> Result<(), Error> {
        self.on
            .update(&0u32.to_le_bytes(), &0u32.to_le_bytes(), sys::BPF_ANY)
            .map_err(|err| Error::Read {
                name: "fsprof_on".into(),
                err,
            })?;
        // Tracepoint programs run with preemption disabled, so once every
        // CPU has passed a grace period none is still inside one that saw
        // the flag set: MEMBARRIER_CMD_GLOBAL is synchronize_rcu().
        // SAFETY: membarrier takes no pointers.
        let r = unsafe { libc::syscall(libc::SYS_membarrier, 1, 0, 0) };
        if r != 0 {
            // Not available (nohz_full CPUs refuse it): a program runs for
            // microseconds, so a pause far longer than that will do.
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Ok(())
    }

    /// The counters so far as fsprof layers. With `final_read`, calls still
    /// in flight are counted as entered but not returned.
    pub fn snapshot(&self, final_read: bool) -> Result<Snapshot, Error> {
        let mut per_op = PerOp {
            nslots: self.layout.thresholds().len(),
            ops: BTreeMap::new(),
        };
        self.read_histograms(&mut per_op)?;
        self.read_stats(&mut per_op)?;
        let mut unfinished = match final_read {
            true => self.read_unfinished()?,
            false => BTreeMap::new(),
        };
        let undelivered = self.read_undelivered()?;
        // A request whose completion the kernel did not deliver was issued
        // and never seen to return: entered, not returned, like one still
        // in flight, so `pre - post` shows it beside the warning.
        for (&key, &n) in &undelivered {
            for k in with_size_key(key) {
                *unfinished.entry(k).or_default() += n;
            }
        }
        let mut snap = Snapshot::default();
        let mut keys: Vec<u64> = per_op.ops.keys().copied().collect();
        keys.extend(unfinished.keys().copied());
        keys.sort_unstable();
        keys.dedup();
        let mut dev_names = BTreeMap::new();
        for key in keys {
            let c = std::mem::take(per_op.get(key));
            let (lname, opname) = self.op_name(key, &mut dev_names);
            let histogram = Histogram::from_slots(c.zero, &c.slots);
            let post = histogram.total();
            let st = c.stats;
            snap.lost += st.count.abs_diff(post);
            let op = OpStats {
                name: opname,
                pre: post + unfinished.get(&key).copied().unwrap_or(0),
                post,
                errors: st.errors,
                total_ns: st.total,
                min_ns: (st.count > 0).then_some(!st.not_min),
                max_ns: (st.count > 0).then_some(st.max),
                histogram,
                ..Default::default()
            };
            layer_in(&mut snap.layers, lname).ops.push(op);
        }
        if self.block_wait {
            layer_in(&mut snap.layers, layer::BLOCK_WAIT);
        }
        for l in &mut snap.layers {
            l.normalize();
        }
        snap.missed = self.missed();
        snap.unfollowed = self.targets.as_ref().map_or(0, |t| t.unfollowed());
        for (key, n) in undelivered {
            let (_, op) = self.op_name(key, &mut dev_names);
            snap.undelivered.push((op, n));
        }
        Ok(snap)
    }

    /// Block requests issued again before fsprof saw them complete, per
    /// `block` op key ([`crate::blockrq`]).
    fn read_undelivered(&self) -> Result<BTreeMap<u64, u64>, Error> {
        let mut out = BTreeMap::new();
        if let Some(m) = &self.blk_undelivered {
            for (k, vals) in read_map("fsprof_bundeliv", m)? {
                let n: u64 = vals.iter().map(|v| word(v, 0)).sum();
                *out.entry(word(&k, 0)).or_default() += n;
            }
        }
        Ok(out)
    }

    /// The (op, bucket) counts of `fsprof_hist`, summed over CPUs.
    fn read_histograms(&self, per_op: &mut PerOp) -> Result<(), Error> {
        let mut hist = read_map("fsprof_hist", &self.hist)?;
        hist.extend(read_map("fsprof_bhist", &self.blk_hist)?);
        for (k, vals) in hist {
            let opkey = word(&k, 0);
            let slot = word(&k, 1) as usize;
            let n: u64 = vals.iter().map(|v| word(v, 0)).sum();
            let e = per_op.get(opkey);
            if slot == progs::ZERO_SLOT as usize {
                e.zero += n;
            } else if let Some(s) = e.slots.get_mut(slot) {
                *s += n;
            }
        }
        Ok(())
    }

    /// The per-op [`StatsValue`]s of `fsprof_stats` and (indexed by
    /// syscall number, which is the op key) `fsprof_sysstats`, combined
    /// over CPUs.
    fn read_stats(&self, per_op: &mut PerOp) -> Result<(), Error> {
        let mut stats = read_map("fsprof_stats", &self.stats)?;
        stats.extend(read_map("fsprof_bstats", &self.blk_stats)?);
        for (mut key, vals) in read_map("fsprof_sysstats", &self.sys_stats)? {
            key.resize(8, 0);
            stats.push((key, vals));
        }
        for (k, vals) in stats {
            let per_cpu: Vec<StatsValue> = vals
                .iter()
                .filter_map(|v| StatsValue::from_bytes(v))
                .collect();
            if per_cpu.iter().all(|v| v.count == 0) {
                continue; // an array slot never used
            }
            let e = per_op.get(word(&k, 0));
            for v in per_cpu.iter().filter(|v| v.count > 0) {
                e.stats.count += v.count;
                e.stats.total += v.total;
                e.stats.errors += v.errors;
                e.stats.max = e.stats.max.max(v.max);
                e.stats.not_min = e.stats.not_min.max(v.not_min);
            }
        }
        Ok(())
    }

    /// Calls (and block requests, counted in `block-size` too) begun but
    /// not ended, by op key: the live entries of the start maps.
    fn read_unfinished(&self) -> Result<BTreeMap<u64, u64>, Error> {
        let mut unfinished: BTreeMap<u64, u64> = BTreeMap::new();
        for m in &self.starts {
            for (_, vals) in read_map("start", m)? {
                // A zero timestamp marks a consumed per-thread entry.
                if word(&vals[0], 0) == 0 {
                    continue;
                }
                for k in with_size_key(word(&vals[0], 1)) {
                    *unfinished.entry(k).or_default() += 1;
                }
            }
        }
        Ok(unfinished)
    }

    /// The layer and op name of an op key; block device names are looked
    /// up once per device and kept in `devs`.
    pub fn op_name(&self, key: u64, devs: &mut BTreeMap<u32, String>) -> (&'static str, String) {
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
        } else if op >= progs::BLOCK_WAIT_BASE {
            (
                layer::BLOCK_WAIT,
                syscall::name(op - progs::BLOCK_WAIT_BASE),
            )
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
    /// Whether new and removed cgroups are reported by the kernel
    /// (`cgroup_mkdir`/`cgroup_rmdir` attached in a by-cgroup session).
    pub fn names_cgroups(&self) -> bool {
        self.cgroup_names
    }

    /// Program runs the kernel skipped because the same program was
    /// already running on that CPU, since the session started.
    pub fn missed(&self) -> u64 {
        self._progs
            .iter()
            .map(|p| p.recursion_misses().unwrap_or(0))
            .sum()
    }

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
            // SAFETY: in the forked child of a possibly multi-threaded
            // process: only async-signal-safe calls (setsid, close, read,
            // _exit) on fds it owns, and it never returns.
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

/// Each op's counters gathered from the maps, by op key.
struct PerOp {
    /// Histogram slots per op.
    nslots: usize,
    ops: BTreeMap<u64, OpCounters>,
}

impl PerOp {
    /// The op's counters, created empty if absent.
    fn get(&mut self, key: u64) -> &mut OpCounters {
        let n = self.nslots;
        self.ops.entry(key).or_insert_with(|| OpCounters::new(n))
    }
}

/// One op's counters gathered from the maps.
#[derive(Default)]
struct OpCounters {
    /// Histogram slots (slot j = bucket j - 1).
    slots: Vec<u64>,
    zero: u64,
    stats: StatsValue,
}

impl OpCounters {
    fn new(nslots: usize) -> Self {
        OpCounters {
            slots: vec![0; nslots],
            zero: 0,
            stats: StatsValue::default(),
        }
    }
}

/// The `i`th u64 of a map key or value (native byte order); 0 past the end.
pub(crate) fn word(b: &[u8], i: usize) -> u64 {
    b.get(i * 8..i * 8 + 8)
        .map_or(0, |w| u64::from_ne_bytes(w.try_into().expect("8 bytes")))
}

pub(crate) fn read_map(name: &str, m: &Map) -> Result<Vec<sys::Entry>, Error> {
    m.entries().map_err(|err| Error::Read {
        name: name.into(),
        err,
    })
}

/// Layers read from the kernel maps.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub layers: Vec<Layer>,
    /// Observations whose counters and histogram disagree: a map was full
    /// or an insert raced. Zero in a sound profile.
    pub lost: u64,
    /// Program runs the kernel skipped because the same program was
    /// already running on that CPU: events never seen.
    pub missed: u64,
    /// Block requests issued again before fsprof saw them complete, per
    /// `block` op: the kernel did not run the completion program for them
    /// (see [`crate::blockrq`]). They are in `pre` of their `block` and
    /// `block-size` ops but not in `post` or the histograms.
    pub undelivered: Vec<(String, u64)>,
    /// New processes of a followed tree that were not followed, because
    /// more were alive at once than its map holds ([`crate::follow`]).
    pub unfollowed: u64,
}

/// An op key, and for a `block` op also its `block-size` twin: every
/// request is filed in both layers.
fn with_size_key(opkey: u64) -> impl Iterator<Item = u64> {
    let op = opkey as u32;
    let size = (progs::BLOCK_BASE..progs::BLOCK_SIZE_BASE)
        .contains(&op)
        .then(|| opkey + (progs::BLOCK_SIZE_BASE - progs::BLOCK_BASE) as u64);
    std::iter::once(opkey).chain(size)
}
