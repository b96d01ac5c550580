//! The kernel's per-cgroup counters folded into bounded series: at most
//! K labels have series of their own (the most active), everything else
//! is `other`.
//!
//! Each read of the kernel maps gives totals per (cgroup, op); what
//! changed since the previous read is added to the series of the cgroup's
//! label if it holds a slot, else to `other`. Adding differences, not
//! copying totals, is what keeps every series monotonic while cgroups
//! move between a slot and `other`: what a series counted stays counted.
//!
//! Slots. A label with events takes a free slot; when none is free it
//! takes the slot of the least active holder if it is four times as
//! active (activity decays with a one-minute time constant) and that
//! holder has had its slot for a minute: a burst does not churn series,
//! but a busy newcomer is not kept in `other` by idle old cgroups. A
//! label whose cgroups have all been gone for the TTL loses its slot and
//! its series. So at most K + 1 label values are ever exported.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use fsprof_core::buckets::MIN_INDEX;
use fsprof_core::profile::layer_in;
use fsprof_core::Layer;
use fsprof_kernel::cgroups::CgOp;

/// The label of everything without a slot.
pub const OTHER: &str = "other";
/// Activity decays by e every this long.
const TAU: Duration = Duration::from_secs(60);
/// A slot is held at least this long before a busier label may take it.
const MIN_HOLD: Duration = Duration::from_secs(60);
/// How much busier than a holder a label must be to take its slot.
const DISPLACE: f64 = 4.0;

/// What a label's series hold, and how busy it has been.
struct Slot {
    layers: Vec<Layer>,
    activity: f64,
    since: Instant,
    /// Last time one of its cgroups existed.
    last_live: Instant,
}

/// A label without a slot: its activity, for the next free slot.
struct Waiting {
    activity: f64,
    last_live: Instant,
}

/// Kernel totals of one (cgroup, op) at the previous read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Totals {
    count: u64,
    total: u64,
    errors: u64,
    zero: u64,
    slots: Vec<(u32, u64)>,
}

/// What one (cgroup, op) added since the previous read.
struct Delta {
    label: Option<String>,
    key: u64,
    d: Totals,
    max: u64,
    min: u64,
}

pub struct Fold {
    pub top: usize,
    pub ttl: Duration,
    slots: HashMap<String, Slot>,
    other: Vec<Layer>,
    waiting: HashMap<String, Waiting>,
    last: HashMap<(u64, u64), Totals>,
    names: HashMap<u64, (&'static str, String)>,
    last_read: Option<Instant>,
    /// Observations of cgroups no walk could name, filed in `other`.
    pub unresolved_events: u64,
    /// Slots given up to a busier label.
    pub displaced: u64,
}

impl Fold {
    pub fn new(top: usize, ttl: Duration) -> Fold {
        Fold {
            top,
            ttl,
            slots: HashMap::new(),
            other: Vec::new(),
            waiting: HashMap::new(),
            last: HashMap::new(),
            names: HashMap::new(),
            last_read: None,
            unresolved_events: 0,
            displaced: 0,
        }
    }

    /// Adds what changed since the previous read. `resolve` names a
    /// cgroup id (`None`: unknown, filed in `other`), `name` an op key
    /// (layer, op), `live` the labels of the cgroups that exist now.
    pub fn absorb(
        &mut self,
        ops: &[CgOp],
        resolve: &mut dyn FnMut(u64) -> Option<String>,
        name: &mut dyn FnMut(u64) -> (&'static str, String),
        live: &HashSet<&str>,
        now: Instant,
    ) {
        let deltas = self.deltas(ops, resolve);
        self.decay(now);
        for d in &deltas {
            if let Some(l) = &d.label {
                self.add_activity(l, d.d.count as f64, now);
            }
        }
        self.admit(now);
        for d in deltas {
            let (layer, op) = self
                .names
                .entry(d.key)
                .or_insert_with(|| name(d.key))
                .clone();
            let target = match d.label.as_deref().and_then(|l| self.slots.get_mut(l)) {
                Some(slot) => &mut slot.layers,
                None => {
                    if d.label.is_none() {
                        self.unresolved_events += d.d.count;
                    }
                    &mut self.other
                }
            };
            add(target, layer, &op, &d);
        }
        self.retire(live, now);
    }

    /// The differences from the previous read, each with its label.
    fn deltas(
        &mut self,
        ops: &[CgOp],
        resolve: &mut dyn FnMut(u64) -> Option<String>,
    ) -> Vec<Delta> {
        let mut labels: HashMap<u64, Option<String>> = HashMap::new();
        let mut out = Vec::new();
        for op in ops {
            let now = Totals {
                count: op.stats.count,
                total: op.stats.total,
                errors: op.stats.errors,
                zero: op.zero,
                slots: op.slots.clone(),
            };
            let before = self.last.insert((op.cgroup, op.key), now.clone());
            let d = difference(&now, before.as_ref());
            if d.count == 0 && d.zero == 0 && d.slots.is_empty() {
                continue;
            }
            let label = labels
                .entry(op.cgroup)
                .or_insert_with(|| resolve(op.cgroup))
                .clone();
            out.push(Delta {
                label,
                key: op.key,
                d,
                max: op.stats.max,
                min: !op.stats.not_min,
            });
        }
        out
    }

    fn decay(&mut self, now: Instant) {
        let dt = self
            .last_read
            .map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
        self.last_read = Some(now);
        let f = (-dt.as_secs_f64() / TAU.as_secs_f64()).exp();
        self.slots.values_mut().for_each(|s| s.activity *= f);
        self.waiting.values_mut().for_each(|w| w.activity *= f);
    }

    fn add_activity(&mut self, label: &str, n: f64, now: Instant) {
        if let Some(s) = self.slots.get_mut(label) {
            s.activity += n;
            return;
        }
        let w = self.waiting.entry(label.to_string()).or_insert(Waiting {
            activity: 0.0,
            last_live: now,
        });
        w.activity += n;
    }

    /// Gives free slots to the busiest waiting labels, then lets a label
    /// much busier than the least active holder take its slot.
    fn admit(&mut self, now: Instant) {
        let mut queue: Vec<(String, f64)> = self
            .waiting
            .iter()
            .filter(|(_, w)| w.activity > 0.0)
            .map(|(l, w)| (l.clone(), w.activity))
            .collect();
        queue.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        for (label, activity) in queue {
            if self.slots.len() >= self.top {
                let Some(victim) = self.displaceable(activity, now) else {
                    break;
                };
                let s = self.slots.remove(&victim).expect("a holder");
                self.displaced += 1;
                self.waiting.insert(
                    victim,
                    Waiting {
                        activity: s.activity,
                        last_live: s.last_live,
                    },
                );
            }
            let w = self.waiting.remove(&label).expect("queued from waiting");
            self.slots.insert(
                label,
                Slot {
                    layers: Vec::new(),
                    activity: w.activity,
                    since: now,
                    last_live: w.last_live,
                },
            );
        }
    }

    /// The holder a label of `activity` may take the slot of.
    fn displaceable(&self, activity: f64, now: Instant) -> Option<String> {
        let (label, s) = self
            .slots
            .iter()
            .filter(|(_, s)| now.saturating_duration_since(s.since) >= MIN_HOLD)
            .min_by(|a, b| a.1.activity.total_cmp(&b.1.activity))?;
        (activity > DISPLACE * s.activity.max(0.25)).then(|| label.clone())
    }

    /// Drops the slots and waiting labels whose cgroups have been gone
    /// for the TTL.
    fn retire(&mut self, live: &HashSet<&str>, now: Instant) {
        let ttl = self.ttl;
        for (l, s) in self.slots.iter_mut() {
            if live.contains(&l[..]) {
                s.last_live = now;
            }
        }
        for (l, w) in self.waiting.iter_mut() {
            if live.contains(&l[..]) {
                w.last_live = now;
            }
        }
        let old = |t: Instant| now.saturating_duration_since(t) >= ttl;
        self.slots.retain(|_, s| !old(s.last_live));
        self.waiting.retain(|_, w| !old(w.last_live));
    }

    /// Forgets the previous totals of cgroups whose counters the kernel
    /// maps no longer hold.
    pub fn forget(&mut self, ids: &HashSet<u64>) {
        if !ids.is_empty() {
            self.last.retain(|(cg, _), _| !ids.contains(cg));
        }
    }

    /// Forgets everything the kernel counted (a new capture session
    /// starts from zero); the series keep what they have.
    pub fn restart_kernel_counts(&mut self) {
        self.last.clear();
        self.names.clear();
    }

    /// Drops every series (the labels or the buckets changed meaning).
    pub fn clear_series(&mut self) {
        self.slots.clear();
        self.waiting.clear();
        self.other.clear();
    }

    /// Each label with series (sorted), then `other` if it has any: the
    /// exported groups.
    pub fn groups(&self) -> Vec<(&str, &[Layer])> {
        let mut out: Vec<(&str, &[Layer])> = self
            .slots
            .iter()
            .map(|(l, s)| (&l[..], &s.layers[..]))
            .filter(|(_, layers)| !layers.is_empty())
            .collect();
        out.sort_by(|a, b| a.0.cmp(b.0));
        if !self.other.is_empty() {
            out.push((OTHER, &self.other));
        }
        out
    }

    /// Labels holding a slot, and labels waiting for one.
    pub fn sizes(&self) -> (usize, usize) {
        (self.slots.len(), self.waiting.len())
    }

    /// Previous totals held (one per (cgroup, op) in the kernel maps).
    pub fn held(&self) -> usize {
        self.last.len()
    }
}

/// `now - before`, bucket by bucket (both sorted by slot).
fn difference(now: &Totals, before: Option<&Totals>) -> Totals {
    let Some(b) = before else {
        return now.clone();
    };
    let mut slots = Vec::new();
    let mut prev = b.slots.iter().peekable();
    for &(slot, n) in &now.slots {
        while prev.next_if(|p| p.0 < slot).is_some() {}
        let was = prev.next_if(|p| p.0 == slot).map_or(0, |p| p.1);
        if n > was {
            slots.push((slot, n - was));
        }
    }
    Totals {
        count: now.count.saturating_sub(b.count),
        total: now.total.saturating_sub(b.total),
        errors: now.errors.saturating_sub(b.errors),
        zero: now.zero.saturating_sub(b.zero),
        slots,
    }
}

/// Adds a difference to `layer`/`op` of a series.
fn add(layers: &mut Vec<Layer>, layer: &str, op: &str, d: &Delta) {
    let o = layer_in(layers, layer).op_mut(op);
    o.post = o.post.saturating_add(d.d.count);
    o.pre = o.post;
    o.errors = o.errors.saturating_add(d.d.errors);
    o.total_ns = o.total_ns.saturating_add(d.d.total);
    o.histogram.add_to(None, d.d.zero);
    for &(slot, n) in &d.d.slots {
        o.histogram.add_to(Some(slot as i32 + MIN_INDEX), n);
    }
    if d.d.count > 0 {
        o.max_ns = Some(o.max_ns.map_or(d.max, |m| m.max(d.max)));
        o.min_ns = Some(o.min_ns.map_or(d.min, |m| m.min(d.min)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsprof_kernel::progs::StatsValue;

    fn op(cgroup: u64, key: u64, count: u64) -> CgOp {
        CgOp {
            cgroup,
            key,
            stats: StatsValue {
                count,
                total: 100 * count,
                errors: 0,
                max: 100,
                not_min: !100,
            },
            zero: 0,
            slots: vec![(8, count)],
        }
    }

    fn names(key: u64) -> (&'static str, String) {
        ("block", format!("dev{key}:read"))
    }

    /// cgroup id n is labelled `/cg<n>`; 0 is unknown.
    fn resolve(id: u64) -> Option<String> {
        (id != 0).then(|| format!("/cg{id}"))
    }

    fn count(f: &Fold, label: &str) -> u64 {
        f.groups()
            .iter()
            .filter(|(l, _)| *l == label)
            .flat_map(|(_, layers)| layers.iter())
            .map(Layer::total_calls)
            .sum()
    }

    #[test]
    fn differences_go_to_slots_then_other_and_series_never_go_down() {
        let t0 = Instant::now();
        let mut f = Fold::new(2, Duration::from_secs(5));
        let live: HashSet<&str> = ["/cg1", "/cg2", "/cg3"].into();
        let read = |f: &mut Fold, ops: &[CgOp], t| {
            f.absorb(ops, &mut resolve, &mut names, &live, t);
        };
        read(
            &mut f,
            &[op(1, 7, 10), op(2, 7, 3), op(3, 7, 1), op(0, 7, 2)],
            t0,
        );
        // Two slots: the two busiest; the third and the unknown in other.
        assert_eq!(count(&f, "/cg1"), 10);
        assert_eq!(count(&f, "/cg2"), 3);
        assert_eq!(count(&f, OTHER), 3);
        assert_eq!(f.unresolved_events, 2);
        // Totals grow: only the differences are added.
        read(
            &mut f,
            &[op(1, 7, 15), op(2, 7, 3), op(3, 7, 4), op(0, 7, 2)],
            t0,
        );
        assert_eq!(count(&f, "/cg1"), 15);
        assert_eq!(count(&f, OTHER), 6);
        let g = f.groups();
        let h = &g[0].1[0].ops[0].histogram;
        assert_eq!((h.offset, h.counts.as_slice()), (7, &[15][..]));
        assert!(g.len() <= f.top + 1);
    }

    #[test]
    fn a_much_busier_label_takes_an_idle_slot_after_the_hold() {
        let t0 = Instant::now();
        let mut f = Fold::new(1, Duration::from_secs(600));
        let live: HashSet<&str> = ["/cg1", "/cg2"].into();
        f.absorb(&[op(1, 7, 5)], &mut resolve, &mut names, &live, t0);
        // Within the hold, /cg2 waits in other however busy.
        let t1 = t0 + Duration::from_secs(10);
        f.absorb(
            &[op(1, 7, 5), op(2, 7, 500)],
            &mut resolve,
            &mut names,
            &live,
            t1,
        );
        assert_eq!(count(&f, OTHER), 500);
        // After it, /cg1 has been idle: /cg2 takes the slot.
        let t2 = t0 + MIN_HOLD + Duration::from_secs(1);
        f.absorb(
            &[op(1, 7, 5), op(2, 7, 600)],
            &mut resolve,
            &mut names,
            &live,
            t2,
        );
        assert_eq!(count(&f, "/cg2"), 100);
        assert_eq!(count(&f, "/cg1"), 0, "its series went with its slot");
        assert_eq!(f.displaced, 1);
        assert_eq!(f.sizes(), (1, 1));
    }

    #[test]
    fn labels_gone_for_the_ttl_lose_their_series() {
        let t0 = Instant::now();
        let ttl = Duration::from_secs(5);
        let mut f = Fold::new(4, ttl);
        let live: HashSet<&str> = ["/cg1"].into();
        f.absorb(&[op(1, 7, 5)], &mut resolve, &mut names, &live, t0);
        let none = HashSet::new();
        f.absorb(
            &[op(1, 7, 5)],
            &mut resolve,
            &mut names,
            &none,
            t0 + Duration::from_secs(4),
        );
        assert_eq!(count(&f, "/cg1"), 5);
        f.absorb(&[], &mut resolve, &mut names, &none, t0 + ttl);
        assert!(f.groups().is_empty());
        assert_eq!(f.sizes(), (0, 0));
        f.forget(&HashSet::from([1]));
        assert_eq!(f.held(), 0);
    }

    #[test]
    fn bucket_differences_follow_each_slot() {
        let before = Totals {
            slots: vec![(3, 2), (5, 1)],
            ..Default::default()
        };
        let now = Totals {
            count: 6,
            slots: vec![(2, 1), (3, 2), (5, 4), (9, 1)],
            ..Default::default()
        };
        assert_eq!(
            difference(&now, Some(&before)).slots,
            [(2, 1), (5, 3), (9, 1)]
        );
    }
}
