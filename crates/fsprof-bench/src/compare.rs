//! Comparing two bench results phase by phase: a phase changed when the
//! two 95% confidence intervals of its mean do not overlap (conservative:
//! overlapping intervals can still hide a real change, disjoint ones
//! rarely come from noise). Phases present in only one result are listed.

use std::fmt::Write;

use fsprof_analysis::compare::{Direction, FailOn};
use serde::Serialize;

use crate::result::BenchResult;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PhaseChange {
    pub phase: String,
    pub unit: String,
    pub mean_a: f64,
    pub mean_b: f64,
    /// `(b − a) / a`.
    pub change: f64,
    /// The intervals are disjoint.
    pub changed: bool,
    /// Why not decided: one side has no interval (a single run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BenchComparison {
    pub phases: Vec<PhaseChange>,
    pub only_in_a: Vec<String>,
    pub only_in_b: Vec<String>,
    /// Set when the two results ran different suites or parameters.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub differences: Vec<String>,
}

impl PhaseChange {
    /// Which way it changed, when its intervals are disjoint. A phase's
    /// figure is higher when better (MB/s, ops/s).
    pub fn direction(&self) -> Option<Direction> {
        let d = if self.change < 0.0 {
            Direction::Slower
        } else {
            Direction::Faster
        };
        self.changed.then_some(d)
    }
}

impl BenchComparison {
    /// 1 when some phase changed beyond its intervals in a direction
    /// `fail_on` counts, as `fsprof compare`.
    pub fn exit_code(&self, fail_on: FailOn) -> i32 {
        let fails = self
            .phases
            .iter()
            .filter_map(PhaseChange::direction)
            .any(|d| fail_on.counts(d));
        i32::from(fails)
    }
}

pub fn compare(a: &BenchResult, b: &BenchResult) -> BenchComparison {
    let (na, nb) = (
        a.named_phases(|size| size.to_string()),
        b.named_phases(|size| size.to_string()),
    );
    let mut out = BenchComparison::default();
    if a.params.suite != b.params.suite {
        out.differences.push(format!(
            "suites differ: {} vs {}",
            a.params.suite, b.params.suite
        ));
    }
    for (name, pa) in &na {
        let Some((_, pb)) = nb.iter().find(|(n, _)| n == name) else {
            out.only_in_a.push(name.clone());
            continue;
        };
        let (ma, mb) = (pa.summary.mean, pb.summary.mean);
        let (changed, note) = match (pa.summary.ci95, pb.summary.ci95) {
            (Some(ca), Some(cb)) => (ca.disjoint(&cb), None),
            _ => (
                false,
                Some("a single run has no interval: rerun with --runs 10".into()),
            ),
        };
        out.phases.push(PhaseChange {
            phase: name.clone(),
            unit: pa.unit.clone(),
            mean_a: ma,
            mean_b: mb,
            change: if ma != 0.0 { (mb - ma) / ma } else { 0.0 },
            changed,
            note,
        });
    }
    out.only_in_b = nb
        .iter()
        .filter(|(n, _)| !na.iter().any(|(m, _)| m == n))
        .map(|(n, _)| n.clone())
        .collect();
    out
}

pub fn text(c: &BenchComparison, a: &str, b: &str) -> String {
    let mut s = format!("bench comparison: A = {a}, B = {b} (changed = 95% intervals disjoint)\n");
    for d in &c.differences {
        let _ = writeln!(s, "note: {d}");
    }
    let _ = writeln!(
        s,
        "{:<22} {:>14} {:>14} {:>9}  verdict",
        "phase", "A mean", "B mean", "change"
    );
    for p in &c.phases {
        let verdict = match (&p.note, p.changed) {
            (Some(n), _) => n.clone(),
            (None, true) if p.change > 0.0 => "faster (beyond both CIs)".into(),
            (None, true) => "slower (beyond both CIs)".into(),
            (None, false) => "no significant change (CIs overlap)".into(),
        };
        let _ = writeln!(
            s,
            "{:<22} {:>14} {:>14} {:>+8.1}%  {verdict}",
            p.phase,
            format!("{:.1} {}", p.mean_a, p.unit),
            format!("{:.1} {}", p.mean_b, p.unit),
            p.change * 100.0
        );
    }
    for n in &c.only_in_a {
        let _ = writeln!(s, "{n}: only in A");
    }
    for n in &c.only_in_b {
        let _ = writeln!(s, "{n}: only in B");
    }
    s
}

pub fn csv(c: &BenchComparison) -> String {
    let mut s = String::from("phase,unit,mean_a,mean_b,change,changed\n");
    for p in &c.phases {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{}",
            p.phase, p.unit, p.mean_a, p.mean_b, p.change, p.changed
        );
    }
    s
}
