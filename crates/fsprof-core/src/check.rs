//! FSprof's consistency check (§3.2): every op's entered count, returned
//! count and histogram total must agree, so a lost or double-counted sample
//! cannot go unnoticed.

use std::collections::HashSet;

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
    check_same_requests(&p.layers, &mut rep);
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
    // Readers look layers and ops up by name, so a second one of the same
    // name would be silently ignored by some and added in by others.
    let mut layer_names = HashSet::new();
    for l in layers {
        if !layer_names.insert(&l.name[..]) {
            rep.errors.push(format!(
                "{prefix}{}: the layer appears more than once",
                l.name
            ));
        }
        let mut op_names = HashSet::new();
        for op in &l.ops {
            rep.ops_checked += 1;
            let buckets = op.histogram.total();
            let name = format!("{prefix}{}/{}", l.name, op.name);
            if !op_names.insert(&op.name[..]) {
                rep.errors.push(format!(
                    "{name}: the op appears more than once in its layer"
                ));
            }
            if let (Some(lo), Some(hi)) = (op.min_ns, op.max_ns) {
                if lo > hi {
                    rep.errors.push(format!(
                        "{name}: the shortest call ({lo} ns) is longer than the longest ({hi} ns)"
                    ));
                }
            }
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

/// `block` and `block-size` file every request once each: a request
/// counted in one and not the other was lost or mis-paired.
fn check_same_requests(layers: &[Layer], rep: &mut CheckReport) {
    use crate::profile::layer::{BLOCK, BLOCK_SIZE};
    let find = |n: &str| layers.iter().find(|l| l.name == n);
    let (Some(lat), Some(size)) = (find(BLOCK), find(BLOCK_SIZE)) else {
        return;
    };
    let counts = |l: &Layer, op: &str| l.op(op).map_or((0, 0), |o| (o.pre, o.post));
    let mut names: Vec<&str> = lat
        .ops
        .iter()
        .chain(&size.ops)
        .map(|o| &o.name[..])
        .collect();
    names.sort_unstable();
    names.dedup();
    for name in names {
        let (a, b) = (counts(lat, name), counts(size, name));
        if a != b {
            rep.errors.push(format!(
                "{BLOCK}/{name} and {BLOCK_SIZE}/{name} disagree: {}/{} entered/returned against {}/{} (requests lost or mis-paired)",
                a.0, a.1, b.0, b.1
            ));
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
        crate::profile::merge_layers(&mut sum, layers.iter().cloned());
    }
    // By name: profiles may hold many layers and ops.
    let found: std::collections::HashMap<(&str, &str), (u64, u64)> = sum
        .iter()
        .flat_map(|s| {
            s.ops
                .iter()
                .map(move |o| ((&s.name[..], &o.name[..]), (o.post, o.histogram.total())))
        })
        .collect();
    for l in total {
        for op in &l.ops {
            let got = found
                .get(&(&l.name[..], &op.name[..]))
                .copied()
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
mod shape_tests {
    use super::*;
    use crate::histogram::OpStats;
    use crate::profile::Meta;

    fn op(name: &str, min: u64, max: u64) -> OpStats {
        let mut o = OpStats::new(name);
        o.pre = 2;
        o.post = 2;
        o.histogram.add_to(Some(10), 2);
        o.min_ns = Some(min);
        o.max_ns = Some(max);
        o
    }

    #[test]
    fn duplicate_names_and_min_above_max_are_errors() {
        let mut p = Profile::new(Meta::default());
        p.layer_mut("user").ops = vec![op("read", 900, 1100), op("write", 900, 900)];
        assert!(check_profile(&p).ok(), "{:?}", check_profile(&p).errors);

        p.layer_mut("user").ops.push(op("read", 900, 1100));
        let r = check_profile(&p);
        assert_eq!(
            r.errors,
            ["user/read: the op appears more than once in its layer"]
        );

        p.layer_mut("user").ops.pop();
        p.layer_mut("user").ops[1] = op("write", 1100, 900);
        let r = check_profile(&p);
        assert_eq!(
            r.errors,
            ["user/write: the shortest call (1100 ns) is longer than the longest (900 ns)"]
        );

        p.layer_mut("user").ops[1] = op("write", 900, 900);
        let again = p.layers[0].clone();
        p.layers.push(again);
        let r = check_profile(&p);
        assert!(
            r.errors
                .iter()
                .any(|e| e == "user: the layer appears more than once"),
            "{:?}",
            r.errors
        );
    }
}

#[cfg(test)]
mod block_tests {
    use super::*;
    use crate::histogram::OpStats;
    use crate::profile::Meta;

    fn with_block(lat: (u64, u64), size: Option<(u64, u64)>) -> Profile {
        let mut p = Profile::new(Meta::default());
        for (layer, counts) in [("block", Some(lat)), ("block-size", size)] {
            let Some((pre, post)) = counts else { continue };
            let mut o = OpStats::new("loop0:flush");
            o.pre = pre;
            o.post = post;
            o.histogram.add_to(Some(10), post);
            p.layer_mut(layer).ops.push(o);
        }
        p
    }

    #[test]
    fn block_and_block_size_must_count_the_same_requests() {
        assert!(check_profile(&with_block((131, 129), Some((131, 129)))).ok());
        let r = check_profile(&with_block((131, 131), Some((128, 128))));
        assert!(
            r.errors.len() == 1 && r.errors[0].contains("131/131 entered/returned against 128/128"),
            "{:?}",
            r.errors
        );
        let r = check_profile(&with_block((1, 1), None));
        assert!(r.ok(), "no size layer, nothing to compare: {:?}", r.errors);
        let mut p = with_block((2, 2), Some((2, 2)));
        p.layer_mut("block-size").ops[0].name = "loop0:write".into();
        assert_eq!(
            check_profile(&p).errors.len(),
            2,
            "an op missing from either side"
        );
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
