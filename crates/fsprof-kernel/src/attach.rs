//! Building a [`Session`] step by step: check that the kernel can do it,
//! resolve the target, create the maps, then load and attach each layer's
//! programs. Every step that can fail does so before the next one loads
//! anything the user would have to wait to have detached.

use std::path::{Path, PathBuf};

use fsprof_core::ops::syscall;
use fsprof_core::profile::layer;
use fsprof_core::BucketLayout;

use crate::follow::Tree;
use crate::mapfaults;
use crate::progs::{self, Filter, Shared};
use crate::session::{Options, Session, Target, FS_CATEGORIES};
use crate::sys::{self, Attachment, Map, Prog};
use crate::tracefs::{self, Tracepoint};
use crate::Error;

/// Entries of the per-op counter map (ops of the fs, block and FUSE
/// layers; syscalls have an array of their own).
const STATS_ENTRIES: u32 = 8192;
/// Entries of the histogram map: one per (op, bucket) seen.
const HIST_ENTRIES: u32 = 65536;
/// Entries of the block layer's own counter and histogram maps: (device,
/// kind) ops and their (op, bucket) cells in `block` and `block-size`.
const BLOCK_STATS_ENTRIES: u32 = 1024;
const BLOCK_HIST_ENTRIES: u32 = 16384;
/// Calls (or block/FUSE requests) in flight at once.
const START_ENTRIES: u32 = 16384;

/// Creates a map named `f<pid>_<name>` (`name` without its `fsprof_`), so
/// that, like the programs, every map says which fsprof made it.
pub(crate) fn map(
    name: &str,
    ty: u32,
    k: usize,
    v: usize,
    n: u32,
    flags: u32,
) -> Result<Map, Error> {
    let kernel_name = prog_name(name.trim_start_matches("fsprof_"));
    Map::create(&kernel_name, ty, k, v, n, flags).map_err(|err| Error::Map {
        name: name.into(),
        hint: if err.raw_os_error() == Some(libc::EPERM) || err.raw_os_error() == Some(libc::ENOMEM) {
            " (map memory is charged to the memory cgroup and, on old kernels, RLIMIT_MEMLOCK: raise them)"
        } else {
            ""
        },
        err,
    })
}

/// Per-thread start maps keep one entry per thread (reused, see
/// progs::store_thread_start), so they are LRU maps: exited threads age
/// out instead of filling the map. Per-request ones insert and delete.
pub(crate) fn start_map(name: &str, ty: u32) -> Result<Map, Error> {
    map(
        name,
        ty,
        progs::START_KEY_SIZE,
        progs::START_VAL_SIZE,
        START_ENTRIES,
        0,
    )
}

pub(crate) fn update(m: &Map, name: &str, key: &[u8], value: &[u8]) -> Result<(), Error> {
    m.update(key, value, sys::BPF_ANY)
        .map_err(|err| Error::Read {
            name: name.into(),
            err,
        })
}

/// A program loaded and attached to tracepoint `tp`.
pub(crate) fn tracepoint_program(
    tp: &Tracepoint,
    insns: Result<Vec<crate::insn::Insn>, Error>,
) -> Result<(Prog, sys::Attachment), Error> {
    let prog = load(&prog_name(&tp.name), &insns?)?;
    let att = sys::attach_tracepoint(&prog, tp.id).map_err(|err| Error::Attach {
        prog: tp.name.clone(),
        tracepoint: format!("{}:{}", tp.category, tp.name),
        err,
    })?;
    Ok((prog, att))
}

/// A program loaded and attached to raw tracepoint `name`.
pub(crate) fn raw_program(
    name: &str,
    insns: &[crate::insn::Insn],
) -> Result<(Prog, sys::Attachment), Error> {
    let prog =
        Prog::load(&prog_name(name), sys::PROG_RAW_TRACEPOINT, insns).map_err(|e| Error::Load {
            prog: name.into(),
            errno: e.errno,
            log: e.log.replace('\n', " | "),
        })?;
    let att = sys::attach_raw_tracepoint(&prog, name).map_err(|err| Error::Attach {
        prog: name.into(),
        tracepoint: format!("raw:{name}"),
        err,
    })?;
    Ok((prog, att))
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

/// Fails unless the layers can be profiled here at all: privileges, a
/// layer asked for, tracefs, and the tracepoints `--require-tracepoint`
/// names. Returns the tracefs root.
fn check_ready(o: &Options) -> Result<PathBuf, Error> {
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
    Ok(root)
}

/// The in-kernel filter for a target; `None` for a process tree, which is
/// followed through a targets map. A bad pid or cgroup fails here, before
/// anything is loaded.
fn resolve_target(target: &Target) -> Result<Option<Filter>, Error> {
    Ok(match target {
        Target::Tree(pids) => {
            if let Some(&p) = pids
                .iter()
                .find(|p| !Path::new(&format!("/proc/{p}")).exists())
            {
                return Err(Error::NoSuchPid(p));
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
    })
}

/// The maps every program shares.
struct Maps {
    stats: Map,
    sys_stats: Map,
    hist: Map,
    /// The bucket thresholds, when r > 1.
    thresh: Option<Map>,
    /// The followed process tree, for a `Target::Tree`.
    targets: Option<Tree>,
    /// Recording on (1) or stopped (0): see [`Shared::on_fd`].
    on: Map,
    /// The block layer's counters: see [`Maps::block_shared`].
    blk_stats: Map,
    blk_hist: Map,
    /// The maps of a by-cgroup session ([`crate::bycgroup`]).
    cgroups: Option<crate::cgroups::CgroupMaps>,
}

impl Maps {
    fn create(layout: &BucketLayout, tree: bool, by_cgroup: bool) -> Result<Maps, Error> {
        use crate::bycgroup::{HIST_KEY_SIZE, STATS_KEY_SIZE};
        let (stats_key, hist_key) = match by_cgroup {
            true => (STATS_KEY_SIZE, HIST_KEY_SIZE),
            false => (8, progs::HIST_KEY_SIZE),
        };
        // Per-CPU values are allocated per CPU: preallocating them would
        // take tens of MB on a large machine.
        let lazy = sys::BPF_F_NO_PREALLOC;
        let (pc_hash, stats_len) = (sys::MAP_PERCPU_HASH, progs::STATS_VAL_SIZE);
        let stats = map(
            "fsprof_stats",
            pc_hash,
            stats_key,
            stats_len,
            STATS_ENTRIES,
            lazy,
        )?;
        let hist = map("fsprof_hist", pc_hash, hist_key, 8, HIST_ENTRIES, lazy)?;
        let thresh = if layout.resolution().get() > 1 {
            let v = progs::thresh_value(layout);
            let m = map("fsprof_thresh", sys::MAP_ARRAY, 4, v.len(), 1, 0)?;
            update(&m, "fsprof_thresh", &0u32.to_le_bytes(), &v)?;
            Some(m)
        } else {
            None
        };
        let sys_stats = map(
            "fsprof_sysstats",
            sys::MAP_PERCPU_ARRAY,
            4,
            stats_len,
            progs::MAX_SYSCALLS,
            0,
        )?;
        let targets = match tree {
            true => Some(Tree::create(
                "fsprof_targets",
                "fsprof_tcounts",
                crate::follow::ENTRIES,
            )?),
            false => None,
        };
        let on = map("fsprof_on", sys::MAP_ARRAY, 4, 4, 1, 0)?;
        let (h, n) = (sys::MAP_HASH, BLOCK_STATS_ENTRIES);
        let blk_stats = map("fsprof_bstats", h, stats_key, stats_len, n, 0)?;
        let n = BLOCK_HIST_ENTRIES;
        let blk_hist = map("fsprof_bhist", h, hist_key, 8, n, 0)?;
        update(&on, "fsprof_on", &0u32.to_le_bytes(), &1u32.to_le_bytes())?;
        let cgroups = match by_cgroup {
            true => Some(crate::cgroups::CgroupMaps::create()?),
            false => None,
        };
        Ok(Maps {
            stats,
            sys_stats,
            hist,
            thresh,
            targets,
            on,
            blk_stats,
            blk_hist,
            cgroups,
        })
    }

    /// Block requests complete in interrupt context, where a map that
    /// allocates its elements on insert fails when the allocator's per-CPU
    /// cache is empty (observed: a few zero-byte requests lost per run).
    /// The block layer therefore files into preallocated maps of its own,
    /// shared between CPUs (atomic adds) so their size does not grow with
    /// the CPU count.
    fn block_shared(&self, resolution: u32) -> Shared {
        Shared {
            stats_fd: self.blk_stats.fd(),
            hist_fd: self.blk_hist.fd(),
            ..self.shared(resolution)
        }
    }

    fn shared(&self, resolution: u32) -> Shared {
        Shared {
            stats_fd: self.stats.fd(),
            sys_stats_fd: self.sys_stats.fd(),
            hist_fd: self.hist.fd(),
            thresh_fd: self.thresh.as_ref().map_or(-1, Map::fd),
            on_fd: self.on.fd(),
            resolution,
            by_cgroup: self
                .cgroups
                .as_ref()
                .map(|c| crate::bycgroup::ByCgroup { rq_fd: c.rq.fd() }),
        }
    }
}

/// Loaded programs and their attachments, and what each layer added.
struct Builder<'a> {
    o: &'a Options,
    root: PathBuf,
    sh: Shared,
    block_sh: Shared,
    filter: Filter,
    progs: Vec<Prog>,
    atts: Vec<Attachment>,
    starts: Vec<Map>,
    mask: Option<Map>,
    fs_ops: Vec<String>,
    layers: Vec<&'static str>,
    notes: Vec<String>,
    /// Whether system calls are charged with their threads' block I/O
    /// (both layers on, block paired by request): decided before the
    /// syscall programs are generated, since their exit files it.
    block_wait: bool,
    /// The syscall layer's per-thread start map, once attached.
    sys_start_fd: Option<i32>,
    /// Maps of the attribution ([`crate::charge`]), kept alive here.
    charge_maps: Vec<Map>,
    /// Block completions the kernel did not deliver ([`crate::blockrq`]).
    undelivered: Option<Map>,
    /// `cgroup_mkdir`/`cgroup_rmdir` attached.
    cgroup_names: bool,
}

impl Builder<'_> {
    fn add(
        &mut self,
        tp: &Tracepoint,
        insns: Result<Vec<crate::insn::Insn>, Error>,
    ) -> Result<(), Error> {
        let (prog, att) = tracepoint_program(tp, insns)?;
        self.progs.push(prog);
        self.atts.push(att);
        Ok(())
    }

    /// Whether to attach a layer that is `on`. A layer the user named must
    /// attach (a missing tracepoint is then an error); one of the default
    /// set the kernel lacks is skipped with a note.
    fn wanted(&mut self, on: bool, name: &str, tps: &[(&str, &str)]) -> bool {
        if !on {
            return false;
        }
        if self.o.explicit_layers {
            return true;
        }
        match tps.iter().find(|(c, n)| !tracefs::exists(&self.root, c, n)) {
            None => true,
            Some((c, n)) => {
                self.notes.push(format!(
                    "{name} layer skipped: this kernel has no {c}:{n} tracepoint"
                ));
                false
            }
        }
    }

    /// Follows forks and exits ([`crate::follow`]) before anything else
    /// attaches, so no child is missed.
    fn follow_forks(&mut self, targets: &Tree) -> Result<(), Error> {
        let layout = crate::follow::TaskLayout::vmlinux();
        for (prog, att) in targets.programs(layout, &self.root)? {
            self.progs.push(prog);
            self.atts.push(att);
        }
        Ok(())
    }

    /// Which syscalls are timed: the file-system ones (or all), never
    /// exit and exit_group, which do not return: they have no latency, and
    /// their start entries would pile up in the map.
    fn syscall_mask(&self) -> Result<Map, Error> {
        let mask = map(
            "fsprof_sysmask",
            sys::MAP_ARRAY,
            4,
            1,
            progs::MAX_SYSCALLS,
            0,
        )?;
        for nr in 0..progs::MAX_SYSCALLS {
            let name = syscall::name(nr);
            let never_returns = syscall::NEVER_RETURN.contains(&name.as_str());
            let on =
                !never_returns && (self.o.all_syscalls || syscall::FILE_SYSCALLS.contains(&name));
            if on {
                update(&mask, "fsprof_sysmask", &nr.to_le_bytes(), &[1])?;
            }
        }
        Ok(mask)
    }

    /// Raw tracepoints skip formatting the trace record, which is most of
    /// the per-syscall cost.
    fn attach_raw_syscalls(&mut self, start: &Map, mask: &Map) -> Result<(), Error> {
        if self.o.perf_tracepoints {
            return Err(Error::NoTracepoint {
                name: "raw_syscalls".into(),
                why: "--perf-tracepoints".into(),
            });
        }
        let exit_p = progs::sys_exit(
            &progs::raw_arg1("ret"),
            &self.sh,
            start.fd(),
            self.block_wait,
        )?;
        let enter_p =
            progs::sys_enter(&progs::raw_arg1("id"), &self.filter, start.fd(), mask.fd())?;
        for (name, insns) in [("sys_exit", exit_p), ("sys_enter", enter_p)] {
            let (prog, att) = raw_program(name, &insns)?;
            self.progs.push(prog);
            self.atts.push(att);
        }
        Ok(())
    }

    /// The syscall layer: raw tracepoints, perf tracepoints as the fallback.
    fn attach_syscalls(&mut self) -> Result<(), Error> {
        let enter = Tracepoint::load(&self.root, "raw_syscalls", "sys_enter")?;
        let exit = Tracepoint::load(&self.root, "raw_syscalls", "sys_exit")?;
        let mask = self.syscall_mask()?;
        let start = start_map("fsprof_sys_start", sys::MAP_LRU_HASH)?;
        if let Err(e) = self.attach_raw_syscalls(&start, &mask) {
            if !self.o.perf_tracepoints {
                self.notes.push(format!(
                    "syscall layer on perf tracepoints (raw tracepoints unavailable: {e})"
                ));
            }
            let sh = self.sh;
            let exit_p = progs::sys_exit(exit.field("ret")?, &sh, start.fd(), self.block_wait);
            self.add(&exit, exit_p)?;
            let enter_p = progs::sys_enter(enter.field("id")?, &self.filter, start.fd(), mask.fd());
            self.add(&enter, enter_p)?;
        }
        self.sys_start_fd = Some(start.fd());
        self.starts.push(start);
        self.mask = Some(mask);
        self.layers.push(layer::SYSCALL);
        Ok(())
    }

    /// fentry/fexit on the VFS entry points (and `--fs-functions`) where
    /// the kernel allows it; one function the kernel will not trace (e.g.
    /// notrace) must not cost the rest of the layer.
    fn attach_fentry(&mut self, start: &Map) -> Result<(), Error> {
        let btf = crate::btf::Btf::vmlinux();
        // Functions the user named must exist, whatever the kernel allows.
        if !self.o.fs_functions.is_empty() {
            let b = btf.as_ref().map_err(|e| Error::Fentry(e.clone()))?;
            crate::fentry::targets(b, &self.o.fs_functions).map_err(Error::Fentry)?;
        }
        if let Err(why) = crate::fentry::detect(btf.as_deref().map_err(String::as_str)) {
            if !self.o.fs_functions.is_empty() {
                return Err(Error::Fentry(format!(
                    "--fs-functions needs fentry/fexit, which is unusable here: {why}"
                )));
            }
            self.notes.push(format!(
                "fs layer: fentry/fexit not used ({why}); using the ext4/xfs/btrfs enter/exit tracepoint pairs instead"
            ));
            return Ok(());
        }
        let btf = btf.as_ref().expect("detect succeeded, so BTF parsed");
        let targets = crate::fentry::targets(btf, &self.o.fs_functions).map_err(Error::Fentry)?;
        for func in targets {
            let idx = self.fs_ops.len() as u32;
            let name = prog_name(&func.name);
            match crate::fentry::attach_pair(&name, &func, &self.filter, &self.sh, start.fd(), idx)
            {
                Ok(pair) => {
                    for (p, a) in pair {
                        self.progs.push(p);
                        self.atts.push(a);
                    }
                    self.fs_ops.push(func.name);
                }
                Err(r) if self.o.fs_functions.contains(&func.name) => {
                    return Err(Error::Fentry(r.to_string()))
                }
                Err(r) => self
                    .notes
                    .push(format!("fs layer: {} not timed: {r}", func.name)),
            }
        }
        Ok(())
    }

    /// The fs layer: fentry/fexit where allowed, and the file systems'
    /// enter/exit tracepoint pairs either way (they are file-system
    /// internals that fentry on VFS does not show).
    fn attach_fs(&mut self) -> Result<(), Error> {
        let start = start_map("fsprof_fs_start", sys::MAP_LRU_HASH)?;
        self.attach_fentry(&start)?;
        for cat in FS_CATEGORIES {
            for base in tracefs::enter_exit_pairs(&self.root, cat) {
                if self.fs_ops.contains(&base) {
                    continue; // already timed by fentry under the same name
                }
                let idx = self.fs_ops.len() as u32;
                let enter = Tracepoint::load(&self.root, cat, &format!("{base}_enter"))?;
                let exit = Tracepoint::load(&self.root, cat, &format!("{base}_exit"))?;
                let sh = self.sh;
                self.add(&exit, progs::fs_exit(&exit, &sh, start.fd(), idx))?;
                self.add(&enter, Ok(progs::fs_enter(&self.filter, start.fd(), idx)))?;
                self.fs_ops.push(base);
            }
        }
        if self.fs_ops.is_empty() {
            self.notes.push(
                "fs layer: no ext4/xfs/btrfs enter/exit tracepoint pairs on this kernel".into(),
            );
        }
        if self.o.mapped_faults {
            if let Err(why) = self.attach_mapped_faults(&start) {
                self.notes.push(format!(
                    "fs layer: faults on file mappings (mapped_read, mapped_write) not timed: {why}"
                ));
            }
        }
        self.starts.push(start);
        self.layers.push(layer::FS);
        Ok(())
    }

    /// Faults on file mappings as the fs ops `mapped_read` and
    /// `mapped_write` ([`crate::mapfaults`]); all of its programs or none.
    fn attach_mapped_faults(&mut self, start: &Map) -> Result<(), String> {
        for (c, n) in [("exceptions", "page_fault_user"), mapfaults::MARKS[0]] {
            if !tracefs::exists(&self.root, c, n) {
                return Err(format!("this kernel has no {c}:{n} tracepoint"));
            }
        }
        let (mut progs, mut atts) = (Vec::new(), Vec::new());
        let name = prog_name("mfault_end");
        let end = mapfaults::end_prog(&self.sh, start.fd());
        let prog = Prog::load(&name, sys::PROG_PERF_EVENT, &end)
            .map_err(|e| format!("{name}: {} {}", e.errno, e.log.replace('\n', " | ")))?;
        for cpu in crate::faults::online_cpus() {
            for config in [
                sys::PERF_COUNT_SW_PAGE_FAULTS_MIN,
                sys::PERF_COUNT_SW_PAGE_FAULTS_MAJ,
            ] {
                let att = sys::attach_software_event(&prog, config, cpu)
                    .map_err(|e| format!("page-fault software event: {e}"))?;
                atts.push(att);
            }
        }
        progs.push(prog);
        let idx = self.fs_ops.len() as u32;
        // The marks before the starts; those this kernel lacks left out.
        let starts = ["page_fault_kernel", "page_fault_user"].map(|n| ("exceptions", n));
        for &(c, n) in mapfaults::MARKS.iter().chain(&starts) {
            if !tracefs::exists(&self.root, c, n) {
                continue;
            }
            let insns = match c {
                "exceptions" => mapfaults::start(&self.filter, start.fd(), idx),
                _ => mapfaults::mark(start.fd()),
            };
            let (p, a) = raw_program(n, &insns).map_err(|e| e.to_string())?;
            progs.push(p);
            atts.push(a);
        }
        self.progs.extend(progs);
        self.atts.extend(atts);
        self.fs_ops.extend(mapfaults::OPS.map(String::from));
        Ok(())
    }

    /// A layer of requests timed from one tracepoint to the other,
    /// paired on the request: block (issue → complete), FUSE (send →
    /// end). `progs` makes the end program, then the begin program; the
    /// end is attached first, so no request is begun that cannot end.
    fn attach_requests(
        &mut self,
        layer: &'static str,
        (cat, begin, end): (&str, &str, &str),
        start_name: &str,
        progs: RequestProgs,
    ) -> Result<(), Error> {
        let begin = Tracepoint::load(&self.root, cat, begin)?;
        let end = Tracepoint::load(&self.root, cat, end)?;
        let start = start_map(start_name, sys::MAP_HASH)?;
        let sh = match layer {
            layer::BLOCK => self.block_sh,
            _ => self.sh,
        };
        let [end_p, begin_p] = progs(&begin, &end, &sh, &self.filter, start.fd());
        self.add(&end, end_p)?;
        self.add(&begin, begin_p)?;
        self.starts.push(start);
        self.layers.push(layer);
        Ok(())
    }
}

impl Builder<'_> {
    /// The block layer paired by request identity (raw tracepoints and
    /// BTF, [`crate::blockrq`]); where the kernel cannot, by the tracefs
    /// records' (device, sector) with a note saying so.
    fn attach_block(&mut self) -> Result<(), Error> {
        let tps = ("block", "block_rq_issue", "block_rq_complete");
        let by_request = match self.o.perf_tracepoints {
            true => Err("--perf-tracepoints".to_string()),
            false => self.attach_block_by_request(),
        };
        match by_request {
            Ok(()) => Ok(()),
            // Only a request's own identity says whose it is.
            Err(why) if self.sh.by_cgroup.is_some() => {
                self.notes.push(format!(
                    "block layer skipped: filing requests by cgroup needs them paired by request ({why})"
                ));
                Ok(())
            }
            Err(why) => {
                self.notes.push(format!(
                    "block layer: requests paired on (device, sector) from tracefs records, not by request ({why}); an empty write carrying a preflush is not counted"
                ));
                self.attach_requests(layer::BLOCK, tps, "fsprof_blk_start", block_progs)
            }
        }
    }

    /// The maps and filter of the attribution, when it is on.
    fn charge(
        &mut self,
        l: &crate::blockrq::RqLayout,
    ) -> Result<Option<crate::charge::Charge>, String> {
        let (true, Some(sys_start_fd)) = (self.block_wait, self.sys_start_fd) else {
            return Ok(None);
        };
        use crate::charge::{GLOBAL_VAL_SIZE, THREAD_VAL_SIZE};
        let threads = map(
            "fsprof_bthreads",
            sys::MAP_LRU_HASH,
            8,
            THREAD_VAL_SIZE,
            START_ENTRIES,
            0,
        )
        .map_err(|e| e.to_string())?;
        let global = map("fsprof_attr", sys::MAP_ARRAY, 4, GLOBAL_VAL_SIZE, 1, 0)
            .map_err(|e| e.to_string())?;
        let completing =
            map("fsprof_blk_cpu", sys::MAP_PERCPU_ARRAY, 4, 8, 1, 0).map_err(|e| e.to_string())?;
        let c = crate::charge::Charge {
            threads_fd: threads.fd(),
            global_fd: global.fd(),
            completing_fd: completing.fd(),
            sys_start_fd,
            filter: self.filter.clone(),
            task_pid: l.task_pid,
            task_state: l.task_state,
        };
        self.charge_maps.extend([threads, global, completing]);
        Ok(Some(c))
    }

    fn attach_block_by_request(&mut self) -> Result<(), String> {
        let l = crate::blockrq::RqLayout::vmlinux()?;
        let start = start_map("fsprof_blk_start", sys::MAP_HASH).map_err(|e| e.to_string())?;
        let undelivered = map(
            "fsprof_bundeliv",
            sys::MAP_HASH,
            8,
            8,
            BLOCK_STATS_ENTRIES,
            0,
        )
        .map_err(|e| e.to_string())?;
        let charge = self.charge(&l)?;
        let c = charge.as_ref();
        // Completion and requeue before issue: no request is begun whose
        // end could not be seen.
        let mut programs = vec![
            (
                "block_rq_complete",
                crate::blockrq::complete(&l, &self.block_sh, start.fd(), c),
            ),
            ("block_rq_requeue", crate::blockrq::requeue(start.fd())),
            (
                "block_rq_issue",
                crate::blockrq::issue(&l, &self.block_sh, start.fd(), undelivered.fd()),
            ),
        ];
        if let Some(c) = c {
            programs.push(("sched_switch", crate::charge::sched_switch(c)));
            programs.push(("sched_waking", crate::charge::sched_waking(c)));
        }
        if let Some(by) = &self.block_sh.by_cgroup {
            // Where the kernel has no block_io_start (before 6.5), every
            // request is the issuing task's.
            if tracefs::exists(&self.root, "block", "block_io_start") {
                programs.push(("block_io_start", crate::bycgroup::io_start(by)));
            } else {
                self.notes.push("block layer: this kernel has no block:block_io_start, so requests are filed under the cgroup of the task that issued them, which for queued I/O may be a kernel worker".into());
            }
            programs.push(("block_rq_issue", crate::bycgroup::issue_fallback(by)));
        }
        let mut loaded = Vec::new();
        for (name, insns) in programs {
            let prog =
                Prog::load(&prog_name(name), sys::PROG_RAW_TRACEPOINT, &insns).map_err(|e| {
                    format!(
                        "raw tracepoint {name} refused: {} ({})",
                        e.errno,
                        e.log.replace('\n', " | ")
                    )
                })?;
            let att = sys::attach_raw_tracepoint(&prog, name)
                .map_err(|e| format!("raw tracepoint {name} not attached: {e}"))?;
            loaded.push((prog, att));
        }
        for (p, a) in loaded {
            self.progs.push(p);
            self.atts.push(a);
        }
        self.starts.push(start);
        self.undelivered = Some(undelivered);
        self.layers.push(layer::BLOCK);
        Ok(())
    }
}

impl Builder<'_> {
    /// `cgroup_mkdir` and `cgroup_rmdir` for a by-cgroup session, so new
    /// cgroups are named while they exist; without them (no BTF, an old
    /// kernel) the agent names cgroups from /sys/fs/cgroup when it first
    /// sees their ids, which misses those already gone, and a note says so.
    fn attach_cgroup_names(&mut self, c: &crate::cgroups::CgroupMaps) {
        let attached = crate::bycgroup::CgLayout::vmlinux().and_then(|l| {
            let programs = [
                (
                    "cgroup_mkdir",
                    crate::bycgroup::mkdir(&l, c.scratch.fd(), c.new.fd()),
                ),
                ("cgroup_rmdir", crate::bycgroup::rmdir(&l, c.gone.fd())),
            ];
            let mut loaded = Vec::new();
            for (name, insns) in programs {
                let prog = Prog::load(&prog_name(name), sys::PROG_RAW_TRACEPOINT, &insns)
                    .map_err(|e| format!("raw tracepoint {name} refused: {}", e.errno))?;
                let att = sys::attach_raw_tracepoint(&prog, name)
                    .map_err(|e| format!("raw tracepoint {name} not attached: {e}"))?;
                loaded.push((prog, att));
            }
            Ok(loaded)
        });
        match attached {
            Ok(loaded) => {
                for (p, a) in loaded {
                    self.progs.push(p);
                    self.atts.push(a);
                }
                self.cgroup_names = true;
            }
            Err(why) => self.notes.push(format!(
                "cgroups are named from /sys/fs/cgroup when their ids are first seen ({why}): one created and removed between two reads is folded into `other`"
            )),
        }
    }
}

/// The (end, begin) programs of a request layer, from the begin and end
/// tracepoints, the shared maps, the filter and the start map's fd.
type RequestProgs = fn(
    &Tracepoint,
    &Tracepoint,
    &Shared,
    &Filter,
    i32,
) -> [Result<Vec<crate::insn::Insn>, Error>; 2];

fn block_progs(
    issue: &Tracepoint,
    done: &Tracepoint,
    sh: &Shared,
    _: &Filter,
    fd: i32,
) -> [Result<Vec<crate::insn::Insn>, Error>; 2] {
    [
        progs::block_complete(done, sh, fd),
        progs::block_issue(issue, fd),
    ]
}

fn fuse_progs(
    send: &Tracepoint,
    end: &Tracepoint,
    sh: &Shared,
    f: &Filter,
    fd: i32,
) -> [Result<Vec<crate::insn::Insn>, Error>; 2] {
    [
        progs::fuse_end(end, sh, fd),
        progs::fuse_send(send, f, sh, fd),
    ]
}

/// [`Session::start`]: see the module doc.
pub(crate) fn start(o: &Options) -> Result<Session, Error> {
    let root = check_ready(o)?;
    let layout = BucketLayout::new(o.resolution);
    let filter = resolve_target(&o.target)?;
    let maps = Maps::create(&layout, filter.is_none(), o.by_cgroup)?;
    let filter = filter.unwrap_or_else(|| Filter::Targets {
        map_fd: maps.targets.as_ref().map_or(-1, Tree::fd),
    });
    let mut b = Builder::new(o, root, &maps, filter);
    b.attach_layers(&maps)?;
    let s = b.into_session(maps, layout);
    if let Target::Tree(pids) = &o.target {
        for &p in pids {
            for d in fsprof_sys::process::descendants(p) {
                s.add_target(d)?;
            }
        }
    }
    Ok(s)
}

impl<'a> Builder<'a> {
    fn new(o: &'a Options, root: PathBuf, maps: &Maps, filter: Filter) -> Builder<'a> {
        Builder {
            o,
            root,
            sh: maps.shared(o.resolution.get()),
            block_sh: maps.block_shared(o.resolution.get()),
            filter,
            progs: Vec::new(),
            atts: Vec::new(),
            starts: Vec::new(),
            mask: None,
            fs_ops: Vec::new(),
            layers: Vec::new(),
            notes: Vec::new(),
            block_wait: false,
            sys_start_fd: None,
            charge_maps: Vec::new(),
            undelivered: None,
            cgroup_names: false,
        }
    }

    /// Attaches every layer asked for that the kernel has: syscalls, fs,
    /// block, FUSE, and the cgroup names of a by-cgroup session.
    fn attach_layers(&mut self, maps: &Maps) -> Result<(), Error> {
        let o = self.o;
        let block = self.wanted(
            o.block,
            "block",
            &[("block", "block_rq_issue"), ("block", "block_rq_complete")],
        );
        self.block_wait = !o.by_cgroup
            && o.syscall
            && block
            && !o.perf_tracepoints
            && crate::blockrq::RqLayout::vmlinux().is_ok();
        let fuse = self.wanted(
            o.fuse,
            "fuse",
            &[("fuse", "fuse_request_send"), ("fuse", "fuse_request_end")],
        );
        if let Some(t) = &maps.targets {
            self.follow_forks(t)?;
        }
        if o.syscall {
            self.attach_syscalls()?;
        }
        if o.fs {
            self.attach_fs()?;
        }
        if block {
            self.attach_block()?;
        }
        if fuse {
            let tps = ("fuse", "fuse_request_send", "fuse_request_end");
            self.attach_requests(layer::FUSE, tps, "fsprof_fuse_start", fuse_progs)?;
        }
        if let Some(c) = &maps.cgroups {
            self.attach_cgroup_names(c);
        }
        Ok(())
    }

    /// The session that owns the maps, programs and attachments.
    fn into_session(self, maps: Maps, layout: BucketLayout) -> Session {
        Session {
            layout,
            stats: maps.stats,
            sys_stats: maps.sys_stats,
            hist: maps.hist,
            targets: maps.targets,
            on: maps.on,
            blk_stats: maps.blk_stats,
            blk_hist: maps.blk_hist,
            starts: self.starts,
            fs_ops: self.fs_ops,
            _attachments: self.atts,
            _progs: self.progs,
            _thresh: maps.thresh,
            _mask: self.mask,
            block_wait: !self.charge_maps.is_empty() && self.layers.contains(&layer::BLOCK),
            _charge_maps: self.charge_maps,
            blk_undelivered: self.undelivered,
            layers: self.layers,
            notes: self.notes,
            cgroups: maps.cgroups,
            cgroup_names: self.cgroup_names,
        }
    }
}
