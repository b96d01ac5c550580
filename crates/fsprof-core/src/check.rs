//! FSprof's consistency check (§3.2): every op's entered count, returned
//! count and histogram total must agree, so a lost or double-counted sample
//! cannot go unnoticed.

use crate::profile::{Layer, Profile};

#[derive(Debug, Default)]
pub struct CheckReport {
    /// Violations: the profile is not sound.
    pub errors: Vec<String>,
    /// Explained differences, e.g. calls still in progress when a process was
    /// killed.
    pub notes: Vec<String>,
    pub ops_checked: usize,
}

impl CheckReport {
    pub fn ok(&self) -> bool {
        self.errors.is_empty()
    }
}

pub fn check_profile(p: &Profile) -> CheckReport {
    let mut rep = CheckReport::default();
    check_layers(&p.layers, "", &mut rep);
    for pr in &p.processes {
        check_layers(
            &pr.layers,
            &format!("pid {} ", pr.pid),
            &mut CheckReport::default(),
        );
    }
    // Intervals and processes must add up to the totals.
    if !p.intervals.is_empty() {
        compare_sum(
            &p.layers,
            p.intervals.iter().map(|i| &i.layers[..]),
            "intervals",
            &mut rep,
        );
    }
    if !p.processes.is_empty() {
        compare_sum(
            &p.layers,
            p.processes.iter().map(|i| &i.layers[..]),
            "processes",
            &mut rep,
        );
    }
    rep
}

fn check_layers(layers: &[Layer], prefix: &str, rep: &mut CheckReport) {
    for l in layers {
        for op in &l.ops {
            rep.ops_checked += 1;
            let buckets = op.histogram.total();
            let name = format!("{prefix}{}/{}", l.name, op.name);
            if op.post != buckets {
                rep.errors.push(format!(
                    "{name}: {} calls returned but the histogram holds {buckets}",
                    op.post
                ));
            }
            if op.pre < op.post {
                rep.errors.push(format!(
                    "{name}: {} calls returned but only {} entered",
                    op.post, op.pre
                ));
            } else if op.pre > op.post {
                rep.notes.push(format!(
                    "{name}: {} call(s) entered but never returned (still blocked when the process ended)",
                    op.pre - op.post
                ));
            }
            if op.errors > op.post {
                rep.errors.push(format!(
                    "{name}: {} errors but only {} calls",
                    op.errors, op.post
                ));
            }
        }
    }
}

fn compare_sum<'a>(
    total: &[Layer],
    parts: impl Iterator<Item = &'a [Layer]>,
    what: &str,
    rep: &mut CheckReport,
) {
    let mut sum: Vec<Layer> = Vec::new();
    for layers in parts {
        for l in layers {
            crate::profile::layer_in(&mut sum, &l.name).merge(l);
        }
    }
    for l in total {
        for op in &l.ops {
            let got = sum
                .iter()
                .find(|s| s.name == l.name)
                .and_then(|s| s.op(&op.name))
                .map(|o| (o.post, o.histogram.total()))
                .unwrap_or((0, 0));
            if got != (op.post, op.histogram.total()) {
                rep.errors.push(format!(
                    "{}/{}: the {what} add up to {} calls, the totals say {}",
                    l.name, op.name, got.0, op.post
                ));
            }
        }
    }
}
