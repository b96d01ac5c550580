//! A running kernel profile: maps, loaded programs and their attachments,
//! and the conversion of the in-kernel counters into fsprof layers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fsprof_core::histogram::{Histogram, OpStats};
use fsprof_core::profile::{layer, layer_in, Layer};
use fsprof_core::{BucketLayout, Resolution};

use crate::names;
use crate::progs::{self, Filter, Shared};
use crate::sys::{self, Attachment, Map, Prog};
use crate::tracefs::{self, Tracepoint};
use crate::Error;

/// Layer holding block request sizes: same buckets, but the values are
/// bytes and `total_ns` is the total of bytes.
pub const BLOCK_SIZE_LAYER: &str = "block-size";

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
    layout: BucketLayout,
    stats: Map,
    sys_stats: Map,
    hist: Map,
    targets: Option<Map>,
    starts: Vec<Map>,
    fs_ops: Vec<String>,
    // Attachments before programs and maps: detach first, then free.
    _attachments: Vec<Attachment>,
    _progs: Vec<Prog>,
    _thresh: Option<Map>,
    _mask: Option<Map>,
    /// Which layers were attached.
    pub layers: Vec<&'static str>,
    /// Layers skipped and why.
    pub notes: Vec<String>,
}

fn map(name: &str, ty: u32, k: usize, v: usize, n: u32, flags: u32) -> Result<Map, Error> {
    Map::create(name, ty, k, v, n, flags).map_err(|err| Error::Map {
        name: name.into(),
        hint: if err.raw_os_error() == Some(libc::EPERM) || err.raw_os_error() == Some(libc::ENOMEM) {
            " (map memory is charged to the memory cgroup and, on old kernels, RLIMIT_MEMLOCK: raise them)"
        } else {
            ""
        },
        err,
    })
}

/// Kernel-visible program name: `f<pid in hex>_<tracepoint>` (15 bytes
/// kept), so `bpftool prog` shows whose programs these are and tests can
/// check that a finished fsprof left none behind.
pub fn prog_name(tp: &str) -> String {
    format!("{}{tp}", prog_prefix(std::process::id()))
}

/// The name prefix of the programs of fsprof process `pid`.
pub fn prog_prefix(pid: u32) -> String {
    format!("f{pid:x}_")
}

fn load(name: &str, insns: &[crate::insn::Insn]) -> Result<Prog, Error> {
    Prog::load(name, sys::PROG_TRACEPOINT, insns).map_err(|e| Error::Load {
        prog: name.into(),
        errno: e.errno,
        log: if e.log.is_empty() {
            "no verifier log".into()
        } else {
            e.log.replace('\n', " | ")
        },
    })
}

struct Attacher {
    progs: Vec<Prog>,
    atts: Vec<Attachment>,
}

impl Attacher {
    fn add(
        &mut self,
        tp: &Tracepoint,
        insns: Result<Vec<crate::insn::Insn>, Error>,
    ) -> Result<(), Error> {
        let prog = load(&prog_name(&tp.name), &insns?)?;
        let att = sys::attach_tracepoint(&prog, tp.id).map_err(|err| Error::Attach {
            prog: tp.name.clone(),
            tracepoint: format!("{}:{}", tp.category, tp.name),
            err,
        })?;
        self.progs.push(prog);
        self.atts.push(att);
        Ok(())
    }
}

impl Session {
    pub fn start(o: &Options) -> Result<Session, Error> {
        crate::privs::check(crate::privs::effective_caps())
            .map_err(|missing| Error::Privileges { missing })?;
        if !(o.syscall || o.fs || o.block || o.fuse) {
            return Err(Error::NoLayers);
        }
        let root = tracefs::root()?;
        for req in &o.require {
            let (cat, name) = req.split_once(':').unwrap_or(("", req));
            Tracepoint::load(&root, cat, name)?;
        }
        let layout = BucketLayout::new(o.resolution);
        let r = o.resolution.get();

        // Resolve the target first: a bad pid or cgroup must fail before
        // anything is loaded.
        let filter_spec = match &o.target {
            Target::Tree(pids) => {
                for &p in pids {
                    if !Path::new(&format!("/proc/{p}")).exists() {
                        return Err(Error::NoSuchPid(p));
                    }
                }
                None
            }
            Target::Comm(c) => {
                if c.len() > 15 {
                    return Err(Error::CommTooLong(c.clone()));
                }
                let mut b = [0u8; 16];
                b[..c.len()].copy_from_slice(c.as_bytes());
                Some(Filter::Comm(b))
            }
            Target::Cgroup(p) => {
                use std::os::unix::fs::MetadataExt;
                let md = std::fs::metadata(p).map_err(|err| Error::Cgroup {
                    path: p.display().to_string(),
                    err,
                })?;
                // A cgroup v2 id is the inode number of its directory.
                Some(Filter::Cgroup(md.ino()))
            }
            Target::All => Some(Filter::All),
        };

        let stats = map(
            "fsprof_stats",
            sys::MAP_PERCPU_HASH,
            8,
            progs::STATS_VAL_SIZE,
            8192,
            // Per-CPU values are allocated per CPU: preallocating 8192 of
            // them would take tens of MB on a large machine.
            sys::BPF_F_NO_PREALLOC,
        )?;
        let hist = map(
            "fsprof_hist",
            sys::MAP_PERCPU_HASH,
            progs::HIST_KEY_SIZE,
            8,
            65536,
            sys::BPF_F_NO_PREALLOC,
        )?;
        let thresh = if r > 1 {
            let v = progs::thresh_value(&layout);
            let m = map("fsprof_thresh", sys::MAP_ARRAY, 4, v.len(), 1, 0)?;
            m.update(&0u32.to_le_bytes(), &v, sys::BPF_ANY)
                .map_err(|err| Error::Read {
                    name: "fsprof_thresh".into(),
                    err,
                })?;
            Some(m)
        } else {
            None
        };
        let sys_stats = map(
            "fsprof_sysstats",
            sys::MAP_PERCPU_ARRAY,
            4,
            progs::STATS_VAL_SIZE,
            progs::MAX_SYSCALLS,
            0,
        )?;
        let sh = Shared {
            stats_fd: stats.fd(),
            sys_stats_fd: sys_stats.fd(),
            hist_fd: hist.fd(),
            thresh_fd: thresh.as_ref().map_or(-1, Map::fd),
            resolution: r,
        };
        let targets = match filter_spec {
            None => Some(map(
                "fsprof_targets",
                sys::MAP_HASH,
                4,
                4,
                65536,
                sys::BPF_F_NO_PREALLOC,
            )?),
            Some(_) => None,
        };
        let filter = filter_spec.unwrap_or_else(|| Filter::Targets {
            map_fd: targets.as_ref().unwrap().fd(),
        });

        let mut at = Attacher {
            progs: Vec::new(),
            atts: Vec::new(),
        };
        let mut starts = Vec::new();
        let mut layers = Vec::new();
        let mut mask_map = None;
        let mut fs_ops = Vec::new();
        let mut notes = Vec::new();
        let mut wanted = |on: bool, name: &str, tps: &[(&str, &str)]| {
            if !on {
                return false;
            }
            if o.explicit_layers {
                return true;
            }
            match tps.iter().find(|(c, n)| !tracefs::exists(&root, c, n)) {
                None => true,
                Some((c, n)) => {
                    notes.push(format!(
                        "{name} layer skipped: this kernel has no {c}:{n} tracepoint"
                    ));
                    false
                }
            }
        };
        let want_block = wanted(
            o.block,
            "block",
            &[("block", "block_rq_issue"), ("block", "block_rq_complete")],
        );
        let want_fuse = wanted(
            o.fuse,
            "fuse",
            &[("fuse", "fuse_request_send"), ("fuse", "fuse_request_end")],
        );
        // Per-thread start maps keep one entry per thread (reused, see
        // progs::store_thread_start), so they are LRU maps: exited threads
        // age out instead of filling the map. Per-request ones insert and
        // delete.
        let start_map = |name: &str, n: u32, ty: u32| {
            map(name, ty, progs::START_KEY_SIZE, progs::START_VAL_SIZE, n, 0)
        };

        if let Some(t) = &targets {
            // Follow forks before anything else so no child is missed.
            let fork = Tracepoint::load(&root, "sched", "sched_process_fork")?;
            at.add(&fork, progs::fork_follow(&fork, t.fd()))?;
        }

        if o.syscall {
            let enter = Tracepoint::load(&root, "raw_syscalls", "sys_enter")?;
            let exit = Tracepoint::load(&root, "raw_syscalls", "sys_exit")?;
            let mask = map(
                "fsprof_sysmask",
                sys::MAP_ARRAY,
                4,
                1,
                progs::MAX_SYSCALLS,
                0,
            )?;
            for nr in 0..progs::MAX_SYSCALLS {
                let name = names::syscall_name(nr);
                // exit and exit_group never return: they have no latency,
                // and their start entries would pile up in the map.
                let never_returns = name == "exit" || name == "exit_group";
                let on = !never_returns
                    && (o.all_syscalls || names::FILE_SYSCALLS.contains(&name.as_str()));
                if on {
                    mask.update(&nr.to_le_bytes(), &[1], sys::BPF_ANY)
                        .map_err(|err| Error::Read {
                            name: "fsprof_sysmask".into(),
                            err,
                        })?;
                }
            }
            let start = start_map("fsprof_sys_start", 16384, sys::MAP_LRU_HASH)?;
            // Raw tracepoints skip formatting the trace record, which is most
            // of the per-syscall cost; perf tracepoints are the fallback.
            let raw = (|| -> Result<(), Error> {
                if o.perf_tracepoints {
                    return Err(Error::NoTracepoint {
                        name: "raw_syscalls".into(),
                        why: "--perf-tracepoints".into(),
                    });
                }
                let exit_p = progs::sys_exit(&progs::raw_arg1("ret"), &sh, start.fd())?;
                let enter_p =
                    progs::sys_enter(&progs::raw_arg1("id"), &filter, start.fd(), mask.fd())?;
                for (name, insns) in [("sys_exit", exit_p), ("sys_enter", enter_p)] {
                    let prog = Prog::load(&prog_name(name), sys::PROG_RAW_TRACEPOINT, &insns)
                        .map_err(|e| Error::Load {
                            prog: name.into(),
                            errno: e.errno,
                            log: e.log,
                        })?;
                    let att =
                        sys::attach_raw_tracepoint(&prog, name).map_err(|err| Error::Attach {
                            prog: name.into(),
                            tracepoint: format!("raw:{name}"),
                            err,
                        })?;
                    at.progs.push(prog);
                    at.atts.push(att);
                }
                Ok(())
            })();
            if let Err(e) = raw {
                if !o.perf_tracepoints {
                    notes.push(format!(
                        "syscall layer on perf tracepoints (raw tracepoints unavailable: {e})"
                    ));
                }
                at.add(&exit, progs::sys_exit(exit.field("ret")?, &sh, start.fd()))?;
                at.add(
                    &enter,
                    progs::sys_enter(enter.field("id")?, &filter, start.fd(), mask.fd()),
                )?;
            }
            starts.push(start);
            mask_map = Some(mask);
            layers.push(layer::SYSCALL);
        }
        if o.fs {
            let start = start_map("fsprof_fs_start", 16384, sys::MAP_LRU_HASH)?;
            // fentry/fexit where the kernel allows it; the tracepoint pairs
            // below are file-system internals fentry on VFS does not show,
            // so they are recorded either way.
            let btf = crate::btf::Btf::vmlinux();
            // Functions the user named must exist, whatever the kernel allows.
            if !o.fs_functions.is_empty() {
                let b = btf.as_ref().map_err(|e| Error::Fentry(e.clone()))?;
                crate::fentry::targets(b, &o.fs_functions).map_err(Error::Fentry)?;
            }
            match crate::fentry::detect(btf.as_ref().map_err(String::as_str)) {
                Ok(_) => {
                    let btf = btf.as_ref().expect("detect succeeded, so BTF parsed");
                    let targets =
                        crate::fentry::targets(btf, &o.fs_functions).map_err(Error::Fentry)?;
                    for func in targets {
                        let idx = fs_ops.len() as u32;
                        let name = prog_name(&func.name);
                        match crate::fentry::attach_pair(
                            &name,
                            &func,
                            &filter,
                            &sh,
                            start.fd(),
                            idx,
                        ) {
                            Ok(pair) => {
                                for (p, a) in pair {
                                    at.progs.push(p);
                                    at.atts.push(a);
                                }
                                fs_ops.push(func.name);
                            }
                            Err(r) if o.fs_functions.contains(&func.name) => {
                                return Err(Error::Fentry(r.to_string()))
                            }
                            // One function the kernel will not trace (e.g.
                            // notrace) must not cost the rest of the layer.
                            Err(r) => notes.push(format!("fs layer: {} not timed: {r}", func.name)),
                        }
                    }
                }
                Err(why) => {
                    if !o.fs_functions.is_empty() {
                        return Err(Error::Fentry(format!(
                            "--fs-functions needs fentry/fexit, which is unusable here: {why}"
                        )));
                    }
                    notes.push(format!(
                        "fs layer: fentry/fexit not used ({why}); using the ext4/xfs/btrfs enter/exit tracepoint pairs instead"
                    ));
                }
            }
            for cat in FS_CATEGORIES {
                for base in tracefs::enter_exit_pairs(&root, cat) {
                    if fs_ops.contains(&base) {
                        continue; // already timed by fentry under the same name
                    }
                    let idx = fs_ops.len() as u32;
                    let enter = Tracepoint::load(&root, cat, &format!("{base}_enter"))?;
                    let exit = Tracepoint::load(&root, cat, &format!("{base}_exit"))?;
                    at.add(&exit, progs::fs_exit(&exit, &sh, start.fd(), idx))?;
                    at.add(&enter, Ok(progs::fs_enter(&filter, start.fd(), idx)))?;
                    fs_ops.push(base);
                }
            }
            if fs_ops.is_empty() {
                notes.push(
                    "fs layer: no ext4/xfs/btrfs enter/exit tracepoint pairs on this kernel".into(),
                );
            }
            starts.push(start);
            layers.push(layer::FS);
        }
        if want_block {
            let issue = Tracepoint::load(&root, "block", "block_rq_issue")?;
            let done = Tracepoint::load(&root, "block", "block_rq_complete")?;
            let start = start_map("fsprof_blk_start", 16384, sys::MAP_HASH)?;
            at.add(&done, progs::block_complete(&done, &sh, start.fd()))?;
            at.add(&issue, progs::block_issue(&issue, start.fd()))?;
            starts.push(start);
            layers.push(layer::BLOCK);
        }
        if want_fuse {
            let send = Tracepoint::load(&root, "fuse", "fuse_request_send")?;
            let end = Tracepoint::load(&root, "fuse", "fuse_request_end")?;
            let start = start_map("fsprof_fuse_start", 16384, sys::MAP_HASH)?;
            at.add(&end, progs::fuse_end(&end, &sh, start.fd()))?;
            at.add(&send, progs::fuse_send(&send, &filter, start.fd()))?;
            starts.push(start);
            layers.push(layer::FUSE);
        }

        let s = Session {
            layout,
            stats,
            sys_stats,
            hist,
            targets,
            starts,
            fs_ops,
            _attachments: at.atts,
            _progs: at.progs,
            _thresh: thresh,
            _mask: mask_map,
            layers,
            notes,
        };
        if let Target::Tree(pids) = &o.target {
            for &p in pids {
                for d in descendants(p) {
                    s.add_target(d)?;
                }
            }
        }
        Ok(s)
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
            (layer::SYSCALL, names::syscall_name(op))
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
            let kind = progs::BLOCK_KINDS
                .get((op - progs::BLOCK_BASE) as usize)
                .unwrap_or(&"other");
            (layer::BLOCK, format!("{}:{kind}", dev_name()))
        } else if op < progs::FUSE_BASE {
            let kind = progs::BLOCK_KINDS
                .get((op - progs::BLOCK_SIZE_BASE) as usize)
                .unwrap_or(&"other");
            (BLOCK_SIZE_LAYER, format!("{}:{kind}", dev_name()))
        } else {
            (layer::FUSE, names::fuse_opcode(op - progs::FUSE_BASE))
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

/// `pid` and all its current descendants (from /proc/<pid>/task/*/children).
pub fn descendants(pid: i32) -> Vec<i32> {
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() && out.len() < 100_000 {
        let p = out[i];
        if let Ok(rd) = std::fs::read_dir(format!("/proc/{p}/task")) {
            for t in rd.flatten() {
                if let Ok(s) = std::fs::read_to_string(t.path().join("children")) {
                    out.extend(s.split_whitespace().filter_map(|c| c.parse::<i32>().ok()));
                }
            }
        }
        i += 1;
    }
    out
}
