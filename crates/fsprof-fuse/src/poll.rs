//! Busy polling of `/dev/fuse` after each reply (`--busy-poll`), so that an
//! application on another vCPU pays one cross-vCPU wake-up per request
//! instead of two.
//!
//! Why: a worker that replies and goes straight back to fuser's blocking
//! `read` halts its vCPU; the application's next request must then wake
//! it with an IPI, and where the guest does not poll before halting
//! (`/sys/module/haltpoll/parameters/guest_halt_poll_ns` = 0 here) each
//! such wake-up costs tens of µs. A worker that keeps polling the
//! connection for a few µs after replying finds the next request without
//! sleeping (warm `grep -r` through observe-all, unpinned: 4.03 → 1.68 s
//! on this VM; docs/benchmarks.md, "Busy polling").
//!
//! What it costs and when it is off:
//! - `sched_yield()` between polls, so that on a busy CPU the poll gives
//!   way to whatever else may run there (the application itself, when
//!   both share a CPU);
//! - never when the daemon's CPU affinity allows one CPU only: there the
//!   application needs the CPU the poll would hold. The mask is read again
//!   every [`RECHECK_NS`] per worker (`taskset -a -p` after mounting takes
//!   effect within that), so on one CPU a reply costs a clock read;
//! - not for the next [`RECHECK_NS`] after a poll during which another
//!   task ran on the worker's CPU (its involuntary context switches grew:
//!   a yield that found someone else to run, or a preemption). Where every
//!   CPU has work, no vCPU halts, so waking the daemon is cheap and the
//!   poll would only take CPU time from others (measured: a warm grep at
//!   load 3.5 took 0.87 s polling against 0.49 s without);
//! - at most one worker polls at a time (`--threads N`): the others block
//!   in `read` as before;
//! - the profile says which of the three it is and how many requests a
//!   poll found (see [`BusyPoll::describe`]), the daemon's CPU time per
//!   workload is in the bench.
//!
//! Where the hook is: fuser 0.18's worker loop (`SessionEventLoop`) calls
//! the handler and then its blocking `read` with nothing of ours in
//! between, and a wrapping `Filesystem` would have to forward each of the
//! trait's ~45 methods by hand. So each handler of `PassFs` starts with a
//! guard ([`BusyPoll::after_reply`]) whose drop polls: it runs after the
//! handler has replied and before fuser reads again. A unit test checks
//! that every handler has it.
//!
//! Which descriptor: the session's own (`Session::as_fd`). Clones made for
//! `--threads` share its input queue, so a request any worker would read
//! makes it readable. It stays open while any worker runs: fuser's
//! `BackgroundSession` holds a sender on it until the workers are joined.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use fsprof_sys::clock::mono_ns;
use fsprof_sys::usage::this_thread;

/// How often each worker reads its CPU mask again.
pub const RECHECK_NS: u64 = 10_000_000;

/// The longest poll `--busy-poll` accepts: beyond that it only burns CPU
/// (a request the kernel queues wakes the blocking read anyway).
pub const MAX: Duration = Duration::from_millis(10);

pub struct BusyPoll {
    /// 0: off.
    limit_ns: u64,
    /// The connection's descriptor once mounted, -1 before.
    fd: AtomicI32,
    /// A worker is polling (the others go straight to `read`).
    polling: AtomicBool,
    /// The last mask read allowed one CPU only.
    one_cpu: AtomicBool,
    /// Replies after which a poll found the next request waiting.
    found: AtomicU64,
    /// Replies after which the worker went to the blocking read.
    blocked: AtomicU64,
    /// Polls during which another task ran on the worker's CPU.
    gave_way: AtomicU64,
    /// Stop polling for a while after such a poll (off only in tests that
    /// must not depend on the machine's load).
    give_way: bool,
}

/// Drops after the handler's reply: polls then.
pub struct AfterReply<'a>(&'a BusyPoll);

impl Drop for AfterReply<'_> {
    fn drop(&mut self) {
        let found = self.0.poll();
        let n = if found {
            &self.0.found
        } else {
            &self.0.blocked
        };
        n.fetch_add(1, Relaxed);
    }
}

thread_local! {
    /// Whether this worker may poll (its mask allows ≥2 CPUs, and its last
    /// poll had the CPU to itself) and when to look again.
    static MAY_POLL: std::cell::Cell<(bool, u64)> = const { std::cell::Cell::new((false, 0)) };
}

impl BusyPoll {
    pub fn new(limit: Duration) -> BusyPoll {
        BusyPoll {
            limit_ns: limit.as_nanos().min(u64::MAX as u128) as u64,
            fd: AtomicI32::new(-1),
            polling: AtomicBool::new(false),
            one_cpu: AtomicBool::new(false),
            found: AtomicU64::new(0),
            blocked: AtomicU64::new(0),
            gave_way: AtomicU64::new(0),
            give_way: true,
        }
    }

    /// The descriptor to poll: the FUSE connection's, open for as long as
    /// any worker serves requests.
    pub fn set_fd(&self, fd: RawFd) {
        self.fd.store(fd, Relaxed);
    }

    /// A guard for the top of each handler.
    pub fn after_reply(&self) -> AfterReply<'_> {
        AfterReply(self)
    }

    /// Zeroes the counts (`reset` of the control file).
    pub fn reset(&self) {
        self.found.store(0, Relaxed);
        self.blocked.store(0, Relaxed);
        self.gave_way.store(0, Relaxed);
    }

    /// The profile's settings: `busy poll` ("50 µs", "off: one CPU" or
    /// "off"), the requests a poll found against those found by fuser's
    /// blocking read, and the polls cut short because other tasks wanted
    /// the CPU.
    pub fn describe(&self) -> [(&'static str, String); 4] {
        let setting = if self.limit_ns == 0 {
            "off".to_string()
        } else if self.one_cpu.load(Relaxed) {
            "off: one CPU".to_string()
        } else {
            format_limit(self.limit_ns)
        };
        [
            ("busy poll", setting),
            (
                "requests found by polling",
                self.found.load(Relaxed).to_string(),
            ),
            (
                "requests found by blocking reads",
                self.blocked.load(Relaxed).to_string(),
            ),
            (
                "busy polls given up for other tasks",
                self.gave_way.load(Relaxed).to_string(),
            ),
        ]
    }

    /// Whether a poll found a request waiting within the limit.
    fn poll(&self) -> bool {
        if self.limit_ns == 0 {
            return false;
        }
        let fd = self.fd.load(Relaxed);
        if fd < 0 || !self.may_poll() || self.polling.swap(true, Relaxed) {
            return false;
        }
        let switches = this_thread().involuntary_switches;
        let found = poll_for(fd, self.limit_ns);
        self.polling.store(false, Relaxed);
        if self.give_way && this_thread().involuntary_switches != switches {
            // Not again until the next look at the mask.
            MAY_POLL.set((false, mono_ns().saturating_add(RECHECK_NS)));
            self.gave_way.fetch_add(1, Relaxed);
        }
        found
    }

    /// This worker may run on two CPUs or more and had its CPU to itself
    /// in its last poll (both looked at again every [`RECHECK_NS`]).
    fn may_poll(&self) -> bool {
        let (many, next) = MAY_POLL.get();
        let now = mono_ns();
        if now < next {
            return many;
        }
        let many = cpus_allowed() != Some(1);
        MAY_POLL.set((many, now.saturating_add(RECHECK_NS)));
        self.one_cpu.store(!many, Relaxed);
        many
    }
}

/// Polls `fd` for input, yielding the CPU between polls, for up to
/// `limit_ns`; false also when the connection is gone (POLLERR).
fn poll_for(fd: RawFd, limit_ns: u64) -> bool {
    let start = mono_ns();
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // Polls once more after the limit when the worker was preempted
        // past it: a request that came meanwhile is still found.
        // SAFETY: one pollfd; a zero timeout never blocks.
        let n = unsafe { libc::poll(&mut p, 1, 0) };
        if n != 0 {
            return n > 0 && p.revents & libc::POLLIN != 0;
        }
        if mono_ns().saturating_sub(start) >= limit_ns {
            return false;
        }
        // SAFETY: no arguments; it only gives way to other runnable tasks.
        unsafe { libc::sched_yield() };
    }
}

/// How many CPUs the calling thread may run on (None if unknown).
fn cpus_allowed() -> Option<u32> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: a set of the size passed, for this thread.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    // SAFETY: a set sched_getaffinity filled.
    (r == 0).then(|| unsafe { libc::CPU_COUNT(&set) } as u32)
}

fn format_limit(ns: u64) -> String {
    match ns {
        n if n % 1_000_000 == 0 => format!("{} ms", n / 1_000_000),
        n if n % 1_000 == 0 => format!("{} µs", n / 1_000),
        n => format!("{n} ns"),
    }
}

/// `--busy-poll`: `off` or `0` (any unit) disables; else a duration up to
/// [`MAX`] in the units of every other option.
pub fn parse(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let number = t.trim_end_matches(|c: char| c.is_alphabetic() || c == 'µ');
    if t == "off" || number.parse::<f64>().is_ok_and(|v| v == 0.0) {
        return Ok(Duration::ZERO);
    }
    let ns = fsprof_core::units::parse_duration_ns(t)?;
    let d = Duration::from_nanos(ns);
    if d > MAX {
        return Err(format!(
            "busy polling longer than {} only burns CPU (a waiting read wakes anyway); use at most {}",
            format_limit(MAX.as_nanos() as u64),
            format_limit(MAX.as_nanos() as u64)
        ));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    fn pipe() -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: a two-element array for pipe2 to fill.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: two new descriptors nothing else owns.
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    }

    fn counts(p: &BusyPoll) -> (String, u64, u64) {
        let [(_, s), (_, f), (_, b), _] = p.describe();
        (s, f.parse().unwrap(), b.parse().unwrap())
    }

    fn reply(p: &BusyPoll) {
        let _g = p.after_reply();
    }

    /// Polls that never give way: what they find must not depend on what
    /// else the machine runs.
    fn steady(limit: Duration) -> BusyPoll {
        BusyPoll {
            give_way: false,
            ..BusyPoll::new(limit)
        }
    }

    /// Runs `f` on a thread allowed the CPUs at positions `which` of those
    /// this process may use, so the verdict on the mask is that thread's
    /// own.
    fn on_cpus<T: Send>(which: &[usize], f: impl FnOnce() -> T + Send) -> T {
        std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: an all-zero cpu_set_t is a valid empty set.
                let mut all: libc::cpu_set_t = unsafe { std::mem::zeroed() };
                let size = std::mem::size_of_val(&all);
                // SAFETY: sets of the size passed, for this thread.
                unsafe {
                    assert_eq!(libc::sched_getaffinity(0, size, &mut all), 0);
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    let allowed: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
                        .filter(|&c| libc::CPU_ISSET(c, &all))
                        .collect();
                    for &k in which {
                        let c = *allowed.get(k).expect("this test needs two CPUs");
                        libc::CPU_SET(c, &mut set);
                    }
                    assert_eq!(libc::sched_setaffinity(0, size, &set), 0);
                }
                f()
            })
            .join()
            .unwrap()
        })
    }

    #[test]
    fn a_waiting_request_is_found_by_the_poll() {
        let (r, w) = pipe();
        let p = steady(Duration::from_micros(50));
        p.set_fd(r.as_raw_fd());
        on_cpus(&[0, 1], || {
            reply(&p);
            assert_eq!(counts(&p), ("50 µs".into(), 0, 1), "nothing to read");
            assert_eq!(nix_write(&w), 1);
            reply(&p);
            reply(&p);
        });
        assert_eq!(counts(&p), ("50 µs".into(), 2, 1));
        p.reset();
        assert_eq!(counts(&p), ("50 µs".into(), 0, 0));
    }

    #[test]
    fn off_or_on_one_cpu_it_never_polls() {
        let (r, w) = pipe();
        assert_eq!(nix_write(&w), 1);
        let off = BusyPoll::new(Duration::ZERO);
        off.set_fd(r.as_raw_fd());
        let one = BusyPoll::new(Duration::from_micros(50));
        one.set_fd(r.as_raw_fd());
        on_cpus(&[0], || {
            reply(&off);
            reply(&one);
        });
        assert_eq!(counts(&off), ("off".into(), 0, 1));
        assert_eq!(counts(&one), ("off: one CPU".into(), 0, 1));
        // Before the mount there is nothing to poll.
        let unmounted = BusyPoll::new(Duration::from_micros(50));
        on_cpus(&[0, 1], || reply(&unmounted));
        assert_eq!(counts(&unmounted).1, 0);
    }

    #[test]
    fn one_worker_polls_at_a_time() {
        let (r, w) = pipe();
        assert_eq!(nix_write(&w), 1);
        let p = steady(Duration::from_micros(50));
        p.set_fd(r.as_raw_fd());
        p.polling.store(true, Relaxed);
        on_cpus(&[0, 1], || reply(&p));
        assert_eq!(counts(&p).1, 0, "another worker was polling");
        p.polling.store(false, Relaxed);
        on_cpus(&[0, 1], || reply(&p));
        assert_eq!(counts(&p).1, 1);
    }

    /// With a busy thread pinned to each of its two CPUs, a worker's poll
    /// gives way and it stops polling; once it has its CPU again it polls
    /// after the next look.
    #[test]
    fn a_poll_that_other_tasks_interrupt_stops_polling_for_a_while() {
        let (r, w) = pipe();
        let p = BusyPoll::new(Duration::from_millis(5));
        p.set_fd(r.as_raw_fd());
        let given_up = |p: &BusyPoll| p.describe()[3].1.parse::<u64>().unwrap();
        let stop = AtomicBool::new(false);
        /// Ends the busy threads however the test ends.
        struct Stop<'a>(&'a AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Relaxed);
            }
        }
        std::thread::scope(|s| {
            for k in 0..2 {
                let stop = &stop;
                s.spawn(move || on_cpus(&[k], || while !stop.load(Relaxed) {}));
            }
            let _stop = Stop(&stop);
            on_cpus(&[0, 1], || {
                reply(&p);
                assert_eq!(given_up(&p), 1, "the first poll shared its CPU");
                assert_eq!(nix_write(&w), 1);
                reply(&p);
                assert_eq!(counts(&p), ("5 ms".into(), 0, 2), "the second did not poll");
                stop.store(true, Relaxed);
                std::thread::sleep(Duration::from_nanos(RECHECK_NS));
                reply(&p);
                assert_eq!(counts(&p).1, 1, "polling again after the next look");
            });
        });
    }

    #[test]
    fn the_option_takes_off_zero_and_durations_up_to_the_most() {
        assert_eq!(parse("off"), Ok(Duration::ZERO));
        assert_eq!(parse("0"), Ok(Duration::ZERO));
        assert_eq!(parse("0us"), Ok(Duration::ZERO));
        assert_eq!(parse("50us"), Ok(Duration::from_micros(50)));
        assert_eq!(parse("50µs"), Ok(Duration::from_micros(50)));
        assert_eq!(parse("10ms"), Ok(MAX));
        assert!(parse("11ms").unwrap_err().contains("at most 10 ms"));
        assert!(parse("fast").is_err());
        assert!(parse("-1us").is_err());
        assert_eq!(format_limit(1500), "1500 ns");
    }

    fn nix_write(w: &OwnedFd) -> isize {
        // SAFETY: one byte from a live buffer to our pipe.
        unsafe { libc::write(w.as_raw_fd(), b"x".as_ptr().cast(), 1) }
    }
}
