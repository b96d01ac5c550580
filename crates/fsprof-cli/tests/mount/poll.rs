//! `fsprof mount --busy-poll`: after each reply a worker polls /dev/fuse
//! for the next request while the daemon may run on two CPUs or more; the
//! profile says whether it polled and counts the requests the polls found.
//! Off, or with the daemon on one CPU (also when pinned after mounting),
//! no request is found by polling. No timing is asserted: a request found
//! by polling is one the kernel had queued when the daemon polled.

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::kit::*;
use fsprof_core::Profile;

/// Back-to-back stats per round: the next one is sent as soon as the last
/// reply is in, so while the worker polls for up to 5 ms after a reply
/// (the tests' `--busy-poll`) some of them come during its poll.
const STATS: u64 = 2000;

/// The CPUs this process may run on; the tests need two.
fn cpus() -> Vec<usize> {
    let set = affinity(0);
    let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
        // SAFETY: a set sched_getaffinity filled; an index below its size.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect();
    assert!(
        cpus.len() >= 2,
        "busy polling needs two CPUs; this test may run on {cpus:?}"
    );
    cpus
}

fn affinity(tid: i32) -> libc::cpu_set_t {
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: a set of the size passed.
    let r = unsafe { libc::sched_getaffinity(tid, std::mem::size_of_val(&set), &mut set) };
    assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
    set
}

fn set_affinity(tid: i32, cpus: &[usize]) -> std::io::Result<()> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: an index below CPU_SETSIZE (it came from CPU_ISSET).
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: a set of the size passed.
    match unsafe { libc::sched_setaffinity(tid, std::mem::size_of_val(&set), &set) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// `taskset -a -p`: every thread of the daemon.
fn pin_daemon(m: &Mount, cpus: &[usize]) {
    for t in fs::read_dir(format!("/proc/{}/task", m.pid)).unwrap() {
        let tid: i32 = t.unwrap().file_name().to_str().unwrap().parse().unwrap();
        if let Err(e) = set_affinity(tid, cpus) {
            // A thread that ended meanwhile.
            assert_eq!(e.raw_os_error(), Some(libc::ESRCH), "thread {tid}: {e}");
        }
    }
}

/// `STATS` stats of `file` from a thread pinned to `cpu`.
fn stats_from(cpu: usize, file: &Path) {
    std::thread::scope(|s| {
        s.spawn(|| {
            set_affinity(0, &[cpu]).unwrap();
            for _ in 0..STATS {
                assert_eq!(fs::metadata(file).unwrap().len(), 1);
            }
        })
        .join()
        .unwrap()
    });
}

/// (busy poll setting, requests found by polling, by blocking reads).
fn polled(p: &Profile) -> (String, u64, u64) {
    let s = &p.meta.settings;
    let n = |k: &str| s[k].parse::<u64>().unwrap();
    (
        s["busy poll"].clone(),
        n("requests found by polling"),
        n("requests found by blocking reads"),
    )
}

fn wait_for_setting(mp: &Path, want: &str) {
    let t = Instant::now();
    loop {
        let got = polled(&stat_json(mp)).0;
        if got == want {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the daemon still says busy poll {got:?}, not {want:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn reset(m: &Mount) {
    fs::write(m.path(fsprof_fuse::CONTROL_FILE), "reset\n").unwrap();
}

fn mount_with_a_file(d: &Dirs, busy_poll: &str) -> Mount {
    fs::write(d.lower.join("f"), "x").unwrap();
    d.mount(&["--busy-poll", busy_poll])
}

/// A mount with `--busy-poll busy_poll` after `STATS` stats through it
/// from the last CPU this process may use (the daemon may use them all).
fn stats_through_a_mount(d: &Dirs, busy_poll: &str) -> Mount {
    let cpus = cpus();
    let m = mount_with_a_file(d, busy_poll);
    stats_from(*cpus.last().unwrap(), &m.path("f"));
    m
}

#[test]
#[ignore = "needs root"]
fn requests_sent_while_the_worker_polls_are_found_by_polling_and_reported() {
    let d = dirs();
    let m = stats_through_a_mount(&d, "5ms");
    let text = fsprof_testkit::succeeds(fsprof().arg("stat").arg(&m.mp)).stdout;
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("busy poll 5 ms"), "{text}");
    assert!(text.contains("requests found by polling"), "{text}");
    assert!(
        text.contains("busy polls given up for other tasks"),
        "{text}"
    );
    let p = m.umount();
    let (setting, found, blocked) = polled(&p);
    assert_eq!(setting, "5 ms");
    assert!(found > 0, "no request found by polling in {STATS} stats");
    assert!(found + blocked >= STATS, "{found} + {blocked}");
    check_ok(&d.out);
}

#[test]
#[ignore = "needs root"]
fn with_busy_poll_off_no_request_is_found_by_polling() {
    let d = dirs();
    let m = stats_through_a_mount(&d, "off");
    let (setting, found, blocked) = polled(&m.umount());
    assert_eq!(setting, "off");
    assert_eq!(found, 0);
    assert!(blocked >= STATS, "{blocked}");
}

/// Pinned after mounting (as the bench does), the daemon stops polling
/// once it reads its mask again, and starts again when unpinned.
#[test]
#[ignore = "needs root"]
fn a_daemon_pinned_to_one_cpu_does_not_poll_until_unpinned() {
    let cpus = cpus();
    let (first, last) = (cpus[0], *cpus.last().unwrap());
    let d = dirs();
    let m = mount_with_a_file(&d, "5ms");
    pin_daemon(&m, &[first]);
    wait_for_setting(&m.mp, "off: one CPU");
    reset(&m);
    stats_from(last, &m.path("f"));
    let (setting, found, blocked) = polled(&stat_json(&m.mp));
    assert_eq!(setting, "off: one CPU");
    assert_eq!(found, 0);
    assert!(blocked >= STATS, "{blocked}");

    pin_daemon(&m, &cpus);
    wait_for_setting(&m.mp, "5 ms");
    reset(&m);
    stats_from(last, &m.path("f"));
    let (setting, found, _) = polled(&m.umount());
    assert_eq!(setting, "5 ms");
    assert!(found > 0, "no request found by polling once unpinned");
}
