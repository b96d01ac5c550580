//! Why a paced replay's commands were late, in ns per cause.
//!
//! A command's issue-time error is split into parts as the replay thread
//! goes through its commands: the lag a command inherits from the previous
//! one (which returned after this one's time) keeps that one's parts,
//! plus the previous command's excess over its traced duration — a
//! *slower* call when small, a *stall* when [`STALL_NS`] or more (a
//! preemption during the call, or a file system slower than when
//! traced) — scaled down by the traced gap that absorbed some of it; what
//! is added on top is the command's own: waiting for another thread, the
//! replayer's own time between the previous call's return and this one's
//! issue beyond the traced program's own time between the same two calls
//! (*behind*: its per-command cost, including this command's
//! preparation), or, when it was ready in time, a late wake-up or a
//! preemption while spinning. So one late wake-up at the start of a
//! burst stays a wake-up for every command queued behind it, and the
//! report can say how much of the error is the replayer's (*behind*) and
//! how much the calls' and the machine's (slower calls, stalls, late
//! wake-ups).
//!
//! *Behind* is the error the replay would still have had if every call
//! had taken its traced time and every wake-up had been on time: the
//! replayer's own time only delays a command where it exceeds the time
//! the traced program itself spent between the two calls (its own code,
//! and the tracing shim's). An earlier version counted the whole of the
//! replayer's time between calls as *behind* whenever a lag was being
//! carried; while a lag is being worked off, a replayer that needs `b`
//! ns between calls traced `g` ns apart (b < g: it catches up by g − b
//! per call) was then blamed for a share tending to b / g of the error —
//! 20–40% on a traced `tar`, whose readdir calls are 150–250 ns apart
//! against the replayer's ~60 ns — though it alone would have kept pace.
//!
//! The replay loop times each call from just before it to just after it
//! ([`crate::exec::Ready`]), so a call's excess over its traced duration
//! is the call's, not the replayer's: an earlier version counted small
//! excesses as *behind*, with the replayer's dispatch inside the timed
//! call, and so blamed the replayer for calls that were only slower.

/// The dominant reason a command was issued late (paced replays).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Late {
    /// Issued on time (or an afap replay).
    #[default]
    No,
    /// Mostly the replayer's own cost: its time between calls (and this
    /// command's preparation) when the commands were due back to back.
    Behind,
    /// Mostly earlier calls of the thread that ran longer than traced,
    /// each by less than [`STALL_NS`].
    Slower,
    /// A command of another thread it must follow completed after the
    /// command's time.
    Constraint,
    /// Ready in time but run late: a late wake-up from its sleep or a
    /// preemption while spinning (scheduling, the machine's load).
    Wakeup,
    /// An earlier command of the thread ran [`STALL_NS`] or more longer than
    /// traced: preempted during it, or the file system was slower.
    Stall,
}

/// A command that ran this much longer than traced stalled its thread.
pub const STALL_NS: u64 = 50_000;

/// Its waits for other threads ended after its time.
pub const WAITED_LATE: u8 = 2;
/// Its preparation ended after its time.
pub const PREP_LATE: u8 = 4;

/// A command's issue-time error by cause, ns; the parts sum to the error.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Parts {
    pub behind: u64,
    pub slower: u64,
    pub stall: u64,
    pub constraint: u64,
    pub wakeup: u64,
}

impl Parts {
    pub fn total(&self) -> u64 {
        self.as_array().iter().sum()
    }

    /// The calls' and the machine's share: slower calls, stalls and late
    /// wake-ups.
    pub fn machine(&self) -> u64 {
        self.slower + self.stall + self.wakeup
    }

    fn as_array(&self) -> [u64; 5] {
        [
            self.behind,
            self.slower,
            self.stall,
            self.constraint,
            self.wakeup,
        ]
    }

    fn from_array(a: [u64; 5]) -> Parts {
        Parts {
            behind: a[0],
            slower: a[1],
            stall: a[2],
            constraint: a[3],
            wakeup: a[4],
        }
    }

    fn add(&mut self, cause: Late, ns: u64) {
        match cause {
            Late::Behind => self.behind += ns,
            Late::Slower => self.slower += ns,
            Late::Stall => self.stall += ns,
            Late::Constraint => self.constraint += ns,
            Late::Wakeup => self.wakeup += ns,
            Late::No => {}
        }
    }

    /// The largest part's cause (No when there is no error).
    pub fn dominant(&self) -> Late {
        let causes = [
            Late::Behind,
            Late::Slower,
            Late::Stall,
            Late::Constraint,
            Late::Wakeup,
        ];
        let a = self.as_array();
        let (i, &m) = a
            .iter()
            .enumerate()
            .max_by_key(|&(i, v)| (*v, std::cmp::Reverse(i)))
            .expect("five parts");
        if m == 0 {
            Late::No
        } else {
            causes[i]
        }
    }

    /// The parts scaled to sum to `total`, in proportion (the largest takes
    /// the rounding).
    fn scaled_to(self, total: u64) -> Parts {
        let sum = self.total();
        if sum == 0 {
            return Parts {
                behind: total,
                ..Parts::default()
            };
        }
        let mut a = self
            .as_array()
            .map(|v| (v as u128 * total as u128 / sum as u128) as u64);
        let rest = total - a.iter().sum::<u64>();
        let big = (0..5).max_by_key(|&i| a[i]).expect("five parts");
        a[big] += rest;
        Parts::from_array(a)
    }
}

/// A replay thread's lag as it goes through its commands (ns).
#[derive(Default)]
pub struct Lag {
    prev: Option<Prev>,
    parts: Parts,
}

/// The previous command of the thread.
#[derive(Clone, Copy)]
struct Prev {
    /// When it returned.
    end: u64,
    /// How much longer than traced it ran.
    excess: u64,
    /// When it returned in the trace, on the replay's clock: its target
    /// plus its traced duration.
    traced_end: u64,
}

impl Lag {
    /// The next command of the thread: due at `target`, issued at `t0`,
    /// returned `latency` later after a traced `dur`; `flags` as the replay
    /// loop noted them. Its error's parts.
    pub fn step(&mut self, target: u64, t0: u64, latency: u64, dur: u64, flags: u8) -> Parts {
        let error = t0.saturating_sub(target);
        let mut parts = Parts::default();
        let mut own = error;
        let mut carrying = false;
        if let Some(prev) = self.prev {
            if prev.end > target {
                carrying = true;
                let mut carried = self.parts;
                carried.add(
                    if prev.excess >= STALL_NS {
                        Late::Stall
                    } else {
                        Late::Slower
                    },
                    prev.excess,
                );
                // The traced program spent `gap` of its own between the
                // two calls; the replayer's time up to that much is within
                // the trace's pace, and only what it spent beyond is its
                // own share of this error (see the module doc).
                let between = t0.saturating_sub(prev.end);
                let gap = target.saturating_sub(prev.traced_end);
                own = between.saturating_sub(gap).min(error);
                parts = carried.scaled_to(error - own);
            }
        }
        let cause = if flags & WAITED_LATE != 0 {
            Late::Constraint
        } else if flags & PREP_LATE != 0 || carrying {
            // Its preparation ran over, or the replayer's own time
            // between a previous call that returned late and this one
            // exceeded the traced program's.
            Late::Behind
        } else {
            Late::Wakeup
        };
        parts.add(cause, own);
        self.prev = Some(Prev {
            end: t0 + latency,
            excess: latency.saturating_sub(dur),
            traced_end: target.saturating_add(dur),
        });
        self.parts = parts;
        parts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_late_wake_up_stays_a_wake_up_for_the_burst_behind_it() {
        let mut lag = Lag::default();
        // On time.
        let p = lag.step(1_000, 1_000, 100, 100, 0);
        assert_eq!(p, Parts::default());
        assert_eq!(p.dominant(), Late::No);
        // Woke 38 ms late for the burst's first call, which also ran 3 µs
        // longer than traced.
        let late = 38_000_000;
        let t = 10_000_000;
        let p = lag.step(t, t + late, 4_000, 1_000, 0);
        assert_eq!(p.wakeup, late);
        assert_eq!(p.dominant(), Late::Wakeup);
        // The next call was due 1.5 µs later: it carries the 38 ms and the
        // 3 µs excess less the 500 ns traced gap.
        let t2 = t + 1_500;
        let p = lag.step(t2, t + late + 4_000, 200, 200, 0);
        assert_eq!(p.total(), late + 2_500);
        assert_eq!(p.dominant(), Late::Wakeup);
        assert!(p.slower > 0 && p.slower < 3_000, "{p:?}");
        // Issued as the previous call returned: none of it is the
        // replayer's own time.
        assert_eq!(p.behind, 0);
        assert_eq!(p.machine() + p.behind, p.total());
    }

    #[test]
    fn small_excesses_are_slower_calls_and_the_time_between_calls_is_behind() {
        // Calls traced 300 ns apart taking 100 ns, replayed back to back:
        // `call` ns each, `between` ns from one's return to the next's
        // issue. The lag per call is call + between - 300.
        let burst = |call: u64, between: u64| {
            let mut lag = Lag::default();
            let mut t0 = 0;
            let mut last = Parts::default();
            for k in 0..100u64 {
                let target = k * 300;
                // Issued after its time when the replayer's own time ran
                // past it: what the replay loop flags as PREP_LATE.
                let flags = if t0 > target { PREP_LATE } else { 0 };
                t0 = t0.max(target);
                last = lag.step(target, t0, call, 100, flags);
                t0 += call + between;
            }
            last
        };
        // Calls 300 ns slower than traced, issued as the previous returns.
        let p = burst(400, 0);
        assert_eq!(p.total(), 99 * 100);
        assert_eq!(p.slower, p.total());
        assert_eq!(p.dominant(), Late::Slower);
        // Calls as fast as traced, 250 ns of the replayer's between them.
        let p = burst(100, 250);
        assert_eq!(p.total(), 99 * 50);
        assert_eq!(p.behind, p.total());
        assert_eq!(p.dominant(), Late::Behind);
        // Both, the replayer's 100 ns within the traced 200 ns gap: the
        // slower calls are the whole of it.
        let p = burst(250, 100);
        assert_eq!(p.total(), 99 * 50);
        assert_eq!(p.slower, p.total(), "{p:?}");
        assert_eq!(p.behind, 0);
        // Both, the replayer's 260 ns over the traced 200 ns gap: each is
        // counted for what it added beyond the trace (150 and 60 ns a call).
        let p = burst(250, 260);
        assert_eq!(p.total(), 99 * 210);
        assert!(p.slower > p.behind && p.behind > 0, "{p:?}");
        let share = p.behind as f64 / p.total() as f64;
        assert!((share - 60.0 / 210.0).abs() < 0.02, "{p:?}");
        // A lag carried from one slow call and worked off by a replayer
        // that needs 60 ns between calls traced 200 ns apart: none of the
        // error is the replayer's (it would have kept pace), however long
        // the recovery.
        let mut lag = Lag::default();
        lag.step(0, 0, 20_100, 100, 0);
        let mut t0 = 20_100 + 60;
        for k in 1..100u64 {
            let p = lag.step(k * 300, t0, 100, 100, 0);
            assert_eq!(p.behind, 0, "{k}: {p:?}");
            assert_eq!(p.total(), t0 - k * 300);
            t0 += 160;
        }
        // A call that runs 60 µs longer than traced stalls the next.
        let mut lag = Lag::default();
        lag.step(0, 0, 60_100, 100, 0);
        let p = lag.step(1_000, 60_100, 100, 100, 0);
        assert_eq!(p.stall, 59_100);
        assert_eq!(p.dominant(), Late::Stall);
    }

    #[test]
    fn own_delays_go_to_their_cause() {
        // Free in time, but another thread's command completed late.
        let mut lag = Lag::default();
        let p = lag.step(1_000, 61_000, 100, 100, WAITED_LATE);
        assert_eq!(p.constraint, 60_000);
        assert_eq!(p.dominant(), Late::Constraint);
        // Free in time; its own preparation ran over.
        let mut lag = Lag::default();
        let p = lag.step(1_000, 21_000, 100, 100, PREP_LATE);
        assert_eq!(p.dominant(), Late::Behind);
        // A long traced gap absorbs an earlier lag completely.
        let mut lag = Lag::default();
        lag.step(0, 50_000, 100, 100, 0);
        let p = lag.step(1_000_000, 1_000_000, 100, 100, 0);
        assert_eq!(p.total(), 0);
    }
}
