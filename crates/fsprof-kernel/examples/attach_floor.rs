//! The floor of following page faults (`fsprof trace` as root, issue 28):
//! what the kernel charges for each piece the capture needs, taken one at a
//! time on one thread, beside what [`FaultSession::attach`] takes in all
//! (its threads, its reads of tracefs and BTF included), in the same run.
//!
//! Each round makes, times and closes: the maps (the followed processes,
//! the faults in progress, the counters), the event ring (`BPF_MAP_CREATE`
//! alone, then with the reader's two mappings) at several sizes, each
//! program with the exact instructions the session loads (plus a two-
//! instruction program: a load's fixed cost), each attach (raw tracepoints,
//! the software event per CPU); then a whole `FaultSession::attach` and its
//! drop. The programs' verifier time is the kernel's own figure
//! (`BPF_LOG_STATS`, a load apart). Medians in µs.
//!
//! usage: chrt -f 50 target/release/examples/attach_floor [ROUNDS]   (root)
//! (`cargo build --release -p fsprof-kernel --example attach_floor`)

use std::collections::BTreeMap;
use std::time::Instant;

use fsprof_kernel::faults::{self, FaultSession};
use fsprof_kernel::follow::TaskLayout;
use fsprof_kernel::insn::Insn;
use fsprof_kernel::ring::Ring;
use fsprof_kernel::sys::{self, Map, Prog};

type Times = BTreeMap<String, Vec<f64>>;

fn timed<T>(t: &mut Times, what: &str, f: impl FnOnce() -> T) -> T {
    let at = Instant::now();
    let out = f();
    let us = at.elapsed().as_secs_f64() * 1e6;
    t.entry(what.to_string()).or_default().push(us);
    out
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}

/// The programs the session loads, with their type and attach point.
fn programs(
    l: &TaskLayout,
    t: i32,
    tc: i32,
    st: i32,
    c: i32,
    ring: i32,
) -> Vec<(&'static str, u32, Vec<Insn>)> {
    let raw = sys::PROG_RAW_TRACEPOINT;
    let minimal = vec![
        Insn {
            code: 0xb7,
            regs: 0,
            off: 0,
            imm: 0,
        },
        Insn {
            code: 0x95,
            regs: 0,
            off: 0,
            imm: 0,
        },
    ];
    vec![
        ("minimal (2 insns)", raw, minimal),
        (
            "sched_process_fork",
            raw,
            fsprof_kernel::follow::fork_prog(l, t, tc),
        ),
        (
            "sched_process_exit",
            raw,
            fsprof_kernel::follow::exit_prog(l, t),
        ),
        ("mm_filemap_map_pages", raw, faults::around_prog(st, c)),
        ("page_fault_user", raw, faults::start_prog(t, st, c)),
        (
            "end",
            sys::PROG_PERF_EVENT,
            faults::end_prog(
                st,
                faults::RingRef {
                    fd: ring,
                    bytes: 256 << 10,
                },
                c,
                faults::Ends::ByCookie,
            ),
        ),
    ]
}

fn round(t: &mut Times, l: &TaskLayout, cpus: &[i32], verify: &mut Times) {
    let hash = |n| Map::create("ff_t", sys::MAP_HASH, 4, 4, n, sys::BPF_F_NO_PREALLOC).unwrap();
    let targets = timed(t, "map: followed, hash 16,384 no prealloc", || hash(16384));
    drop(timed(t, "map: hash 4,096 no prealloc", || hash(4096)));
    let tcounts = timed(t, "map: followed's counter, array 1", || {
        Map::create("ff_tc", sys::MAP_ARRAY, 4, 8, 1, 0).unwrap()
    });
    let starts = timed(t, "map: faults in progress, LRU 4,096 x 40 B", || {
        Map::create("ff_s", sys::MAP_LRU_HASH, 8, 40, 4096, 0).unwrap()
    });
    drop(timed(t, "map: hash 4,096 x 40 B no prealloc", || {
        Map::create("ff_s2", sys::MAP_HASH, 8, 40, 4096, sys::BPF_F_NO_PREALLOC).unwrap()
    }));
    let counts = timed(t, "map: counters, array 5", || {
        Map::create("ff_c", sys::MAP_ARRAY, 4, 8, 5, 0).unwrap()
    });
    for kib in [2048u32, 1024, 512, 256, 128] {
        let m = timed(t, &format!("ring {kib:>4} KiB: BPF_MAP_CREATE"), || {
            Map::create("ff_r", sys::MAP_RINGBUF, 0, 0, kib << 10, 0).unwrap()
        });
        timed(t, &format!("ring {kib:>4} KiB: close"), || drop(m));
        let r = timed(t, &format!("ring {kib:>4} KiB: created and mapped"), || {
            Ring::create("ff_r", (kib as usize) << 10).unwrap()
        });
        timed(
            t,
            &format!("ring {kib:>4} KiB: unmapped and closed"),
            || drop(r),
        );
    }
    let ring = Ring::create("ff_r", 512 << 10).unwrap();
    let progs = programs(
        l,
        targets.fd(),
        tcounts.fd(),
        starts.fd(),
        counts.fd(),
        ring.fd(),
    );
    let mut loaded = Vec::new();
    for (name, ty, insns) in &progs {
        let p = timed(t, &format!("load: {name} ({} insns)", insns.len()), || {
            Prog::load("ff_p", *ty, insns).unwrap()
        });
        if let Some(us) = Prog::verification_us(*ty, insns) {
            verify
                .entry(format!("verifier: {name}"))
                .or_default()
                .push(us as f64);
        }
        loaded.push((*name, *ty, p));
    }
    let mut atts = Vec::new();
    for (name, ty, p) in &loaded {
        if name.starts_with("minimal") {
            continue;
        }
        if *ty == sys::PROG_RAW_TRACEPOINT {
            atts.push(timed(t, &format!("attach raw: {name}"), || {
                sys::attach_raw_tracepoint(p, name).unwrap()
            }));
            if *name == "page_fault_user" {
                atts.push(timed(
                    t,
                    "attach raw: page_fault_kernel (the same program)",
                    || sys::attach_raw_tracepoint(p, "page_fault_kernel").unwrap(),
                ));
            }
            continue;
        }
        for (config, cookie) in [
            (sys::PERF_COUNT_SW_PAGE_FAULTS_MIN, 0),
            (sys::PERF_COUNT_SW_PAGE_FAULTS_MAJ, 1 << 32),
        ] {
            for &cpu in cpus {
                atts.push(timed(t, "attach perf event + link, one CPU", || {
                    sys::attach_software_event_cookie(p, config, cpu, cookie).unwrap()
                }));
            }
        }
    }
    timed(t, "detach all, close programs and maps", || {
        drop(atts);
        drop(loaded);
        drop((ring, targets, tcounts, starts, counts));
    });
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(21);
    // The fork and exit programs' offsets, once a process (the kernel's
    // BTF mapped and walked to `signal_struct`): fsprof pays it each trace.
    let at = Instant::now();
    let layout = TaskLayout::vmlinux().expect("the kernel's BTF has task_struct");
    let btf_us = at.elapsed().as_secs_f64() * 1e6;
    let cpus: Vec<i32> = (0..sys::possible_cpus().unwrap() as i32).collect();
    let (mut t, mut verify) = (Times::new(), Times::new());
    for _ in 0..rounds {
        round(&mut t, &layout, &cpus, &mut verify);
        // A session attaching within an RCU grace period of the last
        // detach waits for it (bench/trace_mmap.py's --gap).
        std::thread::sleep(std::time::Duration::from_millis(100));
        let s = timed(
            &mut t,
            "~ FaultSession::attach (the whole, fsprof's)",
            || FaultSession::attach().unwrap(),
        );
        timed(&mut t, "~ its drop", || drop(s));
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "# {rounds} rounds, load {}, {} CPUs; medians, us",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        cpus.len()
    );
    println!("{:<58} {btf_us:8.1}", "task layout from BTF (once, cold)");
    for (k, v) in t.iter().chain(verify.iter()) {
        println!("{k:<58} {:8.1}", median(v));
    }
    let sum = |keys: &[&str]| -> f64 {
        t.iter()
            .filter(|(k, _)| keys.iter().any(|p| k.starts_with(p)))
            .map(|(_, v)| median(v))
            .sum()
    };
    let maps = sum(&["map: followed", "map: faults in progress", "map: counters"]);
    let ring = sum(&["ring  512 KiB: created"]);
    let loads = sum(&["load: sched", "load: mm_", "load: page", "load: end"]);
    let n_loads = t
        .keys()
        .filter(|k| k.starts_with("load: ") && !k.contains("minimal"))
        .count();
    let n_raw = t.keys().filter(|k| k.starts_with("attach raw")).count();
    let raw = sum(&["attach raw"]);
    let perf = sum(&["attach perf"]) * 2.0 * cpus.len() as f64;
    println!(
        "# the session's pieces one after the other: maps {maps:.0} + ring 512 KiB {ring:.0} + {n_loads} loads {loads:.0} + {n_raw} raw attaches {raw:.0} + {} perf events {perf:.0} = {:.0} us of kernel work",
        2 * cpus.len(),
        maps + ring + loads + raw + perf
    );
}
