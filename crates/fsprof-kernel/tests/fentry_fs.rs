//! The fs layer on fentry/fexit against the running kernel.
//!
//! What needs no loading (BTF resolution, program generation, context
//! offsets) is checked everywhere. The real load + attach + `cat` test runs
//! the real path wherever the kernel allows fentry; where it refuses (the
//! development VM: EPERM on load), it says so loudly and checks that the
//! real programs are refused at exactly the step and errno `detect` found,
//! so a broken code path cannot hide behind a refusing kernel.

use std::ffi::OsString;
use std::io::Write;

use fsprof_core::profile::layer;
use fsprof_core::Resolution;
use fsprof_kernel::btf::{Btf, Ret};
use fsprof_kernel::fentry::{self, Unusable};
use fsprof_kernel::progs::{self, Filter, Shared};
use fsprof_kernel::sys::{self, Map};
use fsprof_kernel::{Options, Session, Target};
use fsprof_sys::Child;
use fsprof_testkit::{need_machine, Machine};

/// The running kernel's BTF; the test fails where there is none (such a
/// test is in a `needs_kernel_btf` or `needs_fentry` module).
fn vmlinux() -> &'static Btf {
    let btf = Btf::vmlinux();
    let why = btf.as_ref().err().map_or("", String::as_str);
    need_machine(Machine::KernelBtf, btf.is_ok(), why);
    btf.unwrap()
}

/// Fails unless this kernel loads and attaches fentry programs (such a
/// test is in the `needs_fentry` module).
fn need_fentry(btf: &Btf) {
    let why = match fentry::detect(Ok(btf)) {
        Ok(_) => return,
        Err(e) => e.to_string(),
    };
    need_machine(Machine::Fentry, false, &why);
}

/// The maps a session's fs-layer programs share, made as the session
/// makes them (1024 entries each).
struct Maps {
    stats: Map,
    sys_stats: Map,
    hist: Map,
    start: Map,
}

impl Maps {
    fn new() -> Maps {
        let m = |name, ty, k, v, flags| Map::create(name, ty, k, v, 1024, flags).unwrap();
        let (percpu, no_prealloc) = (sys::MAP_PERCPU_HASH, sys::BPF_F_NO_PREALLOC);
        Maps {
            stats: m("t_stats", percpu, 8, progs::STATS_VAL_SIZE, no_prealloc),
            sys_stats: m(
                "t_sysstats",
                sys::MAP_PERCPU_ARRAY,
                4,
                progs::STATS_VAL_SIZE,
                0,
            ),
            hist: m("t_hist", percpu, progs::HIST_KEY_SIZE, 8, no_prealloc),
            start: m(
                "t_start",
                sys::MAP_LRU_HASH,
                progs::START_KEY_SIZE,
                progs::START_VAL_SIZE,
                0,
            ),
        }
    }

    /// What the programs are built with: these maps, no thresholds or
    /// on/off switch, one bucket per power of two.
    fn shared(&self) -> Shared {
        Shared {
            stats_fd: self.stats.fd(),
            sys_stats_fd: self.sys_stats.fd(),
            hist_fd: self.hist.fd(),
            thresh_fd: -1,
            on_fd: -1,
            resolution: 1,
            by_cgroup: None,
        }
    }
}

/// The real programs for vfs_read, on real maps, loaded and attached the
/// way the session does it.
fn attach_vfs_read(btf: &Btf) -> Result<(), fentry::Refusal> {
    let func = btf.func("vfs_read").unwrap();
    let maps = Maps::new();
    let sh = maps.shared();
    fentry::attach_pair(
        "fsprof_t_read",
        &func,
        &Filter::All,
        &sh,
        maps.start.fd(),
        0,
    )
    .map(|_| ())
}

fn fs_session(target: Target) -> Result<Session, fsprof_kernel::Error> {
    Session::start(&Options {
        syscall: false,
        fs: true,
        block: false,
        fuse: false,
        all_syscalls: false,
        resolution: Resolution::new(1).unwrap(),
        target,
        require: Vec::new(),
        explicit_layers: true,
        perf_tracepoints: false,
        fs_functions: Vec::new(),
        by_cgroup: false,
        mapped_faults: false,
    })
}

/// What reads the running kernel's BTF: only where the kernel has it.
mod needs_kernel_btf {
    use super::*;

    /// Needs no root: BTF is world-readable.
    #[test]
    #[ignore = "needs kernel BTF"]
    fn vfs_targets_resolve_in_the_running_kernels_btf() {
        let btf = vmlinux();
        let targets = fentry::targets(btf, &[]).unwrap();
        eprintln!(
            "fentry targets here: {:?}",
            targets
                .iter()
                .map(|t| (&t.name, t.nargs, t.ret))
                .collect::<Vec<_>>()
        );
        let by_name = |n: &str| {
            targets
                .iter()
                .find(|t| t.name == n)
                .unwrap_or_else(|| panic!("{n} not among {targets:?}"))
        };
        // Prototypes from fs/read_write.c, fs/open.c, fs/sync.c, fs/readdir.c.
        for (name, nargs) in [
            ("vfs_read", 4),
            ("vfs_write", 4),
            ("vfs_open", 2),
            ("vfs_fsync_range", 4),
            ("iterate_dir", 2),
        ] {
            let f = by_name(name);
            assert_eq!(
                (f.nargs, f.slots),
                (nargs, nargs),
                "{name}: no struct by value"
            );
            assert_eq!(btf.func_id(name), Some(f.id), "{name}");
            assert!(matches!(f.ret, Ret::Int(_)), "{name} returns {:?}", f.ret);
        }
        assert_eq!(by_name("vfs_read").ret, Ret::Int(8), "ssize_t");
        assert_eq!(by_name("iterate_dir").ret, Ret::Int(4), "int");
        assert!(
            targets
                .iter()
                .any(|t| fentry::LOOKUP_FUNCTIONS.contains(&t.name.as_str())),
            "no lookup function of {:?} in BTF",
            fentry::LOOKUP_FUNCTIONS
        );
        let sh = Shared {
            stats_fd: 3,
            sys_stats_fd: 4,
            hist_fd: 5,
            thresh_fd: 6,
            on_fd: -1,
            resolution: 4,
            by_cgroup: None,
        };
        for (idx, f) in targets.iter().enumerate() {
            let exit = progs::fexit_exit(f, &sh, 7, idx as u32);
            assert!(
                (60..400).contains(&exit.len()),
                "{}: {}",
                f.name,
                exit.len()
            );
            // ldx dw r9, [r6 + 8*slots]: the return value after the arguments.
            let ret_loads: Vec<i16> = exit
                .iter()
                .filter(|i| i.code == 0x79 && i.regs == (6 << 4) | 9)
                .map(|i| i.off)
                .collect();
            let want = if f.ret == Ret::Void {
                vec![]
            } else {
                vec![8 * f.slots as i16]
            };
            assert_eq!(ret_loads, want, "{}", f.name);
        }
        // A file system's own operations, where they are in vmlinux (ext4
        // built in); a name BTF lacks is a clear error.
        if btf.func_id("ext4_file_read_iter").is_some() {
            let t = fentry::targets(btf, &["ext4_file_read_iter".into()]).unwrap();
            let f = t.last().unwrap();
            assert_eq!((f.name.as_str(), f.nargs), ("ext4_file_read_iter", 2));
        }
        let e = fentry::targets(btf, &["fsprof_no_such_fn".into()]).unwrap_err();
        assert!(e.contains("fsprof_no_such_fn"), "{e}");
    }

    /// What `detect` finds is what the real vfs_read programs meet: both load
    /// and attach, or both are refused at the same step with the same errno,
    /// and then a session says so in one line and falls back to tracepoint
    /// pairs. Applies to every kernel with BTF, whichever it does.
    #[test]
    #[ignore = "needs root, kernel BTF"]
    fn fentry_detection_is_what_the_real_programs_meet() {
        fsprof_testkit::need_root("eBPF");
        let btf = vmlinux();
        let detected = fentry::detect(Ok(btf));
        let real = attach_vfs_read(btf);
        match (detected, real) {
            (Ok(_), Ok(())) => {}
            (Err(Unusable::Refused(d)), Err(r)) => {
                assert_eq!(
                    (r.step, r.errno.raw_os_error()),
                    (d.step, d.errno.raw_os_error()),
                    "the real programs fail differently from the detected refusal: {r}"
                );
                let s = fs_session(Target::All).unwrap();
                let lines: Vec<_> = s.notes.iter().filter(|n| n.contains("fentry")).collect();
                assert_eq!(lines.len(), 1, "{:?}", s.notes);
                let errno = fentry::errno_name(&d.errno).unwrap_or("os error");
                assert!(
                    lines[0].contains(errno) && lines[0].contains("tracepoint pairs instead"),
                    "{}",
                    lines[0]
                );
            }
            (d, r) => panic!(
                "detection and the real vfs_read programs disagree: detect {:?}, real {:?}",
                d.map(|f| f.name).map_err(|e| e.to_string()),
                r.map_err(|e| e.to_string())
            ),
        }
    }
}

/// The fs layer timing a real `cat` with fentry/fexit: only on a kernel
/// that allows fentry (this one cannot apply where it is refused; the
/// refusal itself is checked above).
mod needs_fentry {
    use super::*;

    #[test]
    #[ignore = "needs root, a kernel that allows fentry"]
    fn fentry_times_vfs_read_of_cat() {
        fsprof_testkit::need_root("eBPF");
        let btf = vmlinux();
        need_fentry(btf);
        // The kernel allows fentry: time a real `cat` of a 1 MiB file.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("data");
        std::fs::File::create(&file)
            .unwrap()
            .write_all(&vec![7u8; 1 << 20])
            .unwrap();
        let argv: Vec<OsString> = vec![
            "sh".into(),
            "-c".into(),
            format!("cat '{}' >/dev/null", file.display()).into(),
        ];
        let mut child = Child::spawn_held(&argv, &[]).unwrap();
        child.wait_parked();
        let s = fs_session(Target::Tree(vec![child.pid()])).unwrap();
        assert!(
            !s.notes.iter().any(|n| n.contains("fentry")),
            "{:?}",
            s.notes
        );
        child.release().unwrap();
        let t0 = std::time::Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait() {
                break st;
            }
            assert!(t0.elapsed().as_secs() < 30, "cat did not finish");
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        assert_eq!(status.shell_code(), 0, "cat failed");
        let snap = s.snapshot(true).unwrap();
        let fs = snap
            .layers
            .iter()
            .find(|l| l.name == layer::FS)
            .expect("fs layer");
        let read = fs
            .ops
            .iter()
            .find(|o| o.name == "vfs_read")
            .unwrap_or_else(|| panic!("no vfs_read op in {:?}", fs.ops));
        // cat reads 1 MiB in chunks of at most 128 KiB, then once more for EOF;
        // the loader's reads of the ELF files count too, so this is a lower bound.
        assert!(read.post >= 9, "vfs_read post = {}", read.post);
        assert_eq!(read.histogram.total(), read.post);
        assert_eq!(read.errors, 0);
        assert!(read.min_ns.unwrap() > 0 && read.total_ns >= read.max_ns.unwrap());
        assert_eq!(snap.lost, 0);
        // openat reaches vfs_open; walking the path's components tries the
        // dcache first (lookup_fast) whenever the kernel has it as a function.
        let mut expect = vec!["vfs_open"];
        if btf.func_id("lookup_fast").is_some() {
            expect.push("lookup_fast");
        }
        for op in expect {
            assert!(
                fs.ops.iter().any(|o| o.name == op && o.post > 0),
                "no {op} in {:?}",
                fs.ops.iter().map(|o| &o.name).collect::<Vec<_>>()
            );
        }
    }
}

/// The fentry/fexit program bodies cannot load here as tracing programs,
/// but their context has the shape of a raw tracepoint's (a u64 array of
/// arguments): sys_exit(regs, ret) is a function of one argument whose
/// return value sits at 8 * 1. So the generated code is verified and run
/// in the real kernel on raw syscall tracepoints: per-thread pairing, the
/// return-value read, the errno flag and the shared buckets.
#[test]
#[ignore = "needs root"]
#[allow(clippy::too_many_lines)] // one kernel scenario, read top to bottom
fn fentry_program_bodies_pair_time_and_flag_errors_in_the_kernel() {
    fsprof_testkit::need_root("eBPF");
    let func = fsprof_kernel::btf::Func {
        name: "sys_exit_as_fexit".into(),
        id: 0,
        nargs: 1,
        slots: 1,
        ret: Ret::Int(8),
    };
    let maps = Maps::new();
    let targets = Map::create("t_targets", sys::MAP_HASH, 4, 4, 1024, 0).unwrap();
    targets
        .update(&std::process::id().to_le_bytes(), &1u32.to_le_bytes(), 0)
        .unwrap();
    let sh = maps.shared();
    let idx = 3;
    let filter = Filter::Targets {
        map_fd: targets.fd(),
    };
    let exit = progs::fexit_exit(&func, &sh, maps.start.fd(), idx);
    let enter = progs::fentry_enter(&filter, maps.start.fd(), idx);
    let load = |name, insns: &[fsprof_kernel::insn::Insn]| {
        sys::Prog::load(name, sys::PROG_RAW_TRACEPOINT, insns)
            .unwrap_or_else(|e| panic!("{name} refused ({}): {}", e.errno, e.log))
    };
    let exit_p = load("t_fexit_body", &exit);
    let enter_p = load("t_fentry_body", &enter);
    let (n_ok, n_err) = (1000u64, 100u64);
    {
        let _x = sys::attach_raw_tracepoint(&exit_p, "sys_exit").unwrap();
        let _e = sys::attach_raw_tracepoint(&enter_p, "sys_enter").unwrap();
        for _ in 0..n_ok {
            // SAFETY: no arguments, cannot fail.
            unsafe { libc::getppid() };
        }
        for _ in 0..n_err {
            // SAFETY: closing an invalid fd only returns EBADF.
            assert_eq!(unsafe { libc::close(-1) }, -1);
        }
    }
    let key = (progs::FS_BASE + idx) as u64;
    let (mut count, mut errors, mut total) = (0u64, 0u64, 0u64);
    for (k, vals) in maps.stats.entries().unwrap() {
        assert_eq!(u64::from_le_bytes(k[..8].try_into().unwrap()), key);
        for v in vals {
            let w = |i: usize| u64::from_le_bytes(v[i * 8..i * 8 + 8].try_into().unwrap());
            count += w(0);
            total += w(1);
            errors += w(2);
        }
    }
    let mut in_hist = 0u64;
    for (k, vals) in maps.hist.entries().unwrap() {
        assert_eq!(u64::from_le_bytes(k[..8].try_into().unwrap()), key);
        in_hist += vals
            .iter()
            .map(|v| u64::from_le_bytes(v[..8].try_into().unwrap()))
            .sum::<u64>();
    }
    eprintln!("timed {count} calls, {errors} errors, {total} ns");
    // A few syscalls of the attach and detach themselves are timed too.
    let slack = 20;
    assert!(
        (n_ok + n_err..=n_ok + n_err + slack).contains(&count),
        "count {count}"
    );
    assert!((n_err..=n_err + slack).contains(&errors), "errors {errors}");
    assert_eq!(in_hist, count, "every timed call is in one bucket");
    assert!(total > 0);
}
