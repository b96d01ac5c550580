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
        check_layers(&pr.layers, &format!("pid {} ", pr.pid), &mut rep);
    }
    // Intervals and processes must add up to the totals.
    let intervals: Vec<&[Layer]> = p.intervals.iter().map(|i| &i.layers[..]).collect();
    let processes: Vec<&[Layer]> = p.processes.iter().map(|i| &i.layers[..]).collect();
    for (what, parts) in [("intervals", intervals), ("processes", processes)] {
        if !parts.is_empty() {
            compare_sum(&p.layers, parts.into_iter(), what, &mut rep);
        }
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
            // Value correlation: every successful data call files a size
            // (right after its latency, so a process killed in between can
            // be one short).
            if let Some(c) = op.correlations.as_ref().filter(|c| !c.size.is_empty()) {
                let sizes = c.size.total();
                if sizes > op.post {
                    rep.errors.push(format!(
                        "{name}: {sizes} request sizes recorded for {} returned calls",
                        op.post
                    ));
                } else if sizes < op.post.saturating_sub(op.errors) {
                    rep.notes.push(format!(
                        "{name}: {} successful call(s) without a recorded request size",
                        op.post - op.errors - sizes
                    ));
                }
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

#[cfg(test)]
mod process_tests {
    use super::*;
    use crate::histogram::OpStats;
    use crate::profile::{Meta, Process};

    fn read(post: u64, in_histogram: u64) -> Layer {
        let mut o = OpStats::new("read");
        o.pre = post;
        o.post = post;
        o.histogram.add_to(Some(10), in_histogram);
        Layer {
            name: "user".into(),
            ops: vec![o],
        }
    }

    /// Two processes that are each inconsistent but whose errors cancel in
    /// the sum: only the per-process check sees them.
    #[test]
    fn an_inconsistent_process_is_reported_even_when_the_sum_agrees() {
        let mut p = Profile::new(Meta::default());
        p.layers = vec![read(8, 8)];
        p.processes = vec![
            Process {
                pid: 10,
                layers: vec![read(5, 4)],
                ..Default::default()
            },
            Process {
                pid: 11,
                layers: vec![read(3, 4)],
                ..Default::default()
            },
        ];
        let r = check_profile(&p);
        assert_eq!(r.errors.len(), 2, "{:?}", r.errors);
        assert!(
            r.errors[0].starts_with("pid 10 user/read: 5 calls returned but the histogram holds 4"),
            "{:?}",
            r.errors
        );
        assert!(
            r.errors[1].starts_with("pid 11 user/read"),
            "{:?}",
            r.errors
        );
        assert_eq!(r.ops_checked, 3);
    }
}

#[cfg(test)]
mod correlation_tests {
    use super::*;
    use crate::histogram::{Correlations, OpStats};
    use crate::profile::Meta;

    fn profile_with(sizes: u64, post: u64, errors: u64) -> Profile {
        let mut p = Profile::new(Meta::default());
        let mut o = OpStats::new("read");
        o.pre = post;
        o.post = post;
        o.errors = errors;
        o.histogram.add_to(Some(10), post);
        let mut c = Correlations::default();
        c.size.add(10, 11, sizes);
        o.correlations = Some(c);
        p.layer_mut("user").ops.push(o);
        p
    }

    #[test]
    fn request_sizes_must_not_outnumber_returned_calls() {
        assert!(check_profile(&profile_with(10, 10, 0)).ok());
        assert!(check_profile(&profile_with(8, 10, 2)).ok());
        let r = check_profile(&profile_with(11, 10, 0));
        assert!(
            r.errors[0].contains("11 request sizes recorded for 10"),
            "{:?}",
            r.errors
        );
        let r = check_profile(&profile_with(8, 10, 0));
        assert!(
            r.ok() && r.notes[0].contains("2 successful call(s)"),
            "{:?}",
            r.notes
        );
    }
}
