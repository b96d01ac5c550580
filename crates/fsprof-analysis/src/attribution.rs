//! Layered attribution: how much of an upper layer's latency sits in
//! histogram peaks that a lower layer explains (OSprof's layered profiling,
//! done on the histograms alone).
//!
//! Method. For an upper op (e.g. `syscall/read`) and the lower ops that
//! serve it (e.g. every `block/*:read`), take the upper histogram U and the
//! summed lower histogram L. A call that waited for a lower-layer request
//! takes at least as long as that request, and — when the request is most of
//! its cost — not much longer. So, from the slowest bucket down, each upper
//! call in bucket i is matched with a still unmatched lower observation in
//! bucket i, else i-1, … down to one power of two below (r buckets at
//! resolution r). Matched calls, and their latency mass (bucket midpoints),
//! are "attributed" to the lower layer.
//!
//! Limits. It is a one-to-one matching of counts, not of calls: one block
//! read serving several syscalls (readahead, a large request), several
//! requests per call, asynchronous writeback, and lower-layer activity of
//! other processes (the block layer is system-wide) all blur it; coarse
//! buckets make coincidences likelier. Read it as "this much of the slow
//! mass looks like block time", a pointer for where to look, not an
//! accounting identity.

use fsprof_core::histogram::Histogram;
use fsprof_core::layer;
use fsprof_core::{Profile, Resolution};

/// Upper op → (lower layer, predicate on lower op names).
struct Rule {
    upper_layer: &'static str,
    upper_ops: &'static [&'static str],
    lower_layer: &'static str,
    lower_suffix: &'static [&'static str],
}

const RULES: &[Rule] = &[
    Rule {
        upper_layer: layer::USER,
        upper_ops: &["read", "pread", "readv", "preadv", "fread"],
        lower_layer: layer::SYSCALL,
        lower_suffix: &["read", "pread64", "readv", "preadv", "preadv2"],
    },
    Rule {
        upper_layer: layer::USER,
        upper_ops: &[
            "write", "pwrite", "writev", "pwritev", "fwrite", "fflush", "fclose",
        ],
        lower_layer: layer::SYSCALL,
        lower_suffix: &["write", "pwrite64", "writev", "pwritev", "pwritev2"],
    },
    Rule {
        upper_layer: layer::SYSCALL,
        upper_ops: &["read", "pread64", "readv", "preadv", "preadv2"],
        lower_layer: layer::BLOCK,
        lower_suffix: &[":read"],
    },
    Rule {
        upper_layer: layer::SYSCALL,
        upper_ops: &["write", "pwrite64", "writev", "pwritev", "pwritev2"],
        lower_layer: layer::BLOCK,
        lower_suffix: &[":write"],
    },
    Rule {
        upper_layer: layer::SYSCALL,
        upper_ops: &["fsync", "fdatasync"],
        lower_layer: layer::FS,
        lower_suffix: &["_sync_file", "_file_fsync", "_sync"],
    },
    Rule {
        upper_layer: layer::SYSCALL,
        upper_ops: &["read", "pread64", "readv", "preadv", "preadv2"],
        lower_layer: layer::FUSE,
        lower_suffix: &["read"],
    },
    Rule {
        upper_layer: layer::SYSCALL,
        upper_ops: &["write", "pwrite64", "writev", "pwritev", "pwritev2"],
        lower_layer: layer::FUSE,
        lower_suffix: &["write"],
    },
    Rule {
        upper_layer: layer::SYSCALL,
        upper_ops: &["openat", "open", "newfstatat", "statx", "stat", "lstat"],
        lower_layer: layer::FUSE,
        lower_suffix: &["lookup", "getattr", "open"],
    },
    // fsprof mount's daemon, reading and syncing its LOWER files.
    Rule {
        upper_layer: layer::FUSEFS,
        upper_ops: &["read"],
        lower_layer: layer::BLOCK,
        lower_suffix: &[":read"],
    },
    Rule {
        upper_layer: layer::FUSEFS,
        upper_ops: &["fsync", "fsyncdir"],
        lower_layer: layer::FS,
        lower_suffix: &["_sync_file", "_file_fsync", "_sync"],
    },
];

/// One FUSE op seen from both sides: the kernel's request (`fuse`, send to
/// reply: queueing, the transfer to the daemon and back, and the daemon's
/// work) and the daemon's work on the lower file system (`fusefs`, from
/// `fsprof mount`).
#[derive(Clone, Debug, PartialEq)]
pub struct FuseSplit {
    pub op: String,
    pub kernel_calls: u64,
    pub daemon_calls: u64,
    pub kernel_ns: u64,
    pub daemon_ns: u64,
}

impl FuseSplit {
    /// The daemon's share of the kernel's request time. Exact accounting
    /// only when both sides saw the same requests (`daemon_calls ==
    /// kernel_calls`): a kernel capture of one program sees that
    /// program's requests, the daemon everyone's.
    pub fn daemon_share(&self) -> f64 {
        if self.kernel_ns == 0 {
            0.0
        } else {
            self.daemon_ns as f64 / self.kernel_ns as f64
        }
    }
}

/// Per op in both the `fuse` and the `fusefs` layers, their calls and
/// times side by side (a merged `fsprof kernel` + `fsprof mount` profile),
/// by kernel time, largest first.
pub fn fuse_split(p: &Profile) -> Vec<FuseSplit> {
    let (Some(k), Some(d)) = (p.layer(layer::FUSE), p.layer(layer::FUSEFS)) else {
        return Vec::new();
    };
    let mut out: Vec<FuseSplit> = k
        .ops
        .iter()
        .filter_map(|ko| {
            let dop = d.op(&ko.name)?;
            Some(FuseSplit {
                op: ko.name.clone(),
                kernel_calls: ko.post,
                daemon_calls: dop.post,
                kernel_ns: ko.total_ns,
                daemon_ns: dop.total_ns,
            })
        })
        .collect();
    out.sort_by(|a, b| b.kernel_ns.cmp(&a.kernel_ns).then(a.op.cmp(&b.op)));
    out
}

/// One upper op set against one lower layer.
#[derive(Clone, Debug, PartialEq)]
pub struct Attribution {
    pub upper: String,
    pub lower: String,
    pub calls: u64,
    pub matched_calls: u64,
    /// Estimated latency mass (bucket midpoints), ns.
    pub mass_ns: f64,
    pub matched_mass_ns: f64,
}

fn midpoint(res: Resolution, i: i32) -> f64 {
    (res.lower_bound(i) * res.upper_bound(i)).sqrt()
}

/// Greedy top-down matching described in the module docs.
pub fn match_histograms(
    upper: &Histogram,
    lower: &Histogram,
    res: Resolution,
) -> (u64, f64, u64, f64) {
    let span = res.get() as i32;
    let mut avail: std::collections::BTreeMap<i32, u64> = lower.buckets().collect();
    let (mut calls, mut mass, mut mcalls, mut mmass) = (0, 0.0, 0, 0.0);
    let mut ups: Vec<(i32, u64)> = upper.buckets().collect();
    ups.reverse();
    for (i, n) in ups {
        calls += n;
        mass += n as f64 * midpoint(res, i);
        let mut need = n;
        for j in (i - span..=i).rev() {
            if need == 0 {
                break;
            }
            if let Some(a) = avail.get_mut(&j) {
                let take = need.min(*a);
                *a -= take;
                need -= take;
                mcalls += take;
                mmass += take as f64 * midpoint(res, i);
            }
        }
    }
    calls += upper.zero;
    (calls, mass, mcalls, mmass)
}

/// Every rule whose two layers are in the profile and have calls.
pub fn attribute(p: &Profile) -> Vec<Attribution> {
    let res = p.resolution();
    let mut out = Vec::new();
    for rule in RULES {
        let (Some(up), Some(low)) = (p.layer(rule.upper_layer), p.layer(rule.lower_layer)) else {
            continue;
        };
        let mut lower = Histogram::default();
        let mut lower_names = Vec::new();
        for op in &low.ops {
            if rule.lower_suffix.iter().any(|s| op.name.ends_with(s)) && !op.histogram.is_empty() {
                lower.merge(&op.histogram);
                lower_names.push(op.name.clone());
            }
        }
        if lower.is_empty() {
            continue;
        }
        for name in rule.upper_ops {
            let Some(op) = up.op(name) else { continue };
            if op.histogram.is_empty() {
                continue;
            }
            let (calls, mass, mcalls, mmass) = match_histograms(&op.histogram, &lower, res);
            out.push(Attribution {
                upper: format!("{}/{}", rule.upper_layer, name),
                lower: format!("{}/{{{}}}", rule.lower_layer, lower_names.join(",")),
                calls,
                matched_calls: mcalls,
                mass_ns: mass,
                matched_mass_ns: mmass,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsprof_core::histogram::OpStats;
    use fsprof_core::profile::{layer_in, Meta};
    use fsprof_core::BucketLayout;

    fn hist(values: &[(u64, u64)]) -> Histogram {
        let layout = BucketLayout::new(Resolution::new(1).unwrap());
        let mut h = Histogram::default();
        for &(ns, n) in values {
            h.add_to(layout.index(ns), n);
        }
        h
    }

    #[test]
    fn a_slow_peak_matching_block_reads_is_attributed() {
        // 1000 page-cache hits around 300 ns, 50 misses around 100 µs;
        // 50 block reads around 90 µs.
        let up = hist(&[(300, 1000), (100_000, 50)]);
        let low = hist(&[(90_000, 50)]);
        let res = Resolution::new(1).unwrap();
        let (calls, mass, mc, mm) = match_histograms(&up, &low, res);
        assert_eq!((calls, mc), (1050, 50));
        // All the slow mass, none of the cache hits.
        let layout = BucketLayout::new(res);
        let slow = 50.0 * midpoint(res, layout.index(100_000).unwrap());
        let fast = 1000.0 * midpoint(res, layout.index(300).unwrap());
        assert!(
            (mm - slow).abs() < 1e-6 && (mass - slow - fast).abs() < 1e-6,
            "{mm} of {mass}"
        );
    }

    #[test]
    fn lower_latencies_above_the_upper_ones_explain_nothing() {
        let up = hist(&[(1_000, 10)]);
        let low = hist(&[(1_000_000, 10)]);
        let (_, _, mc, _) = match_histograms(&up, &low, Resolution::new(1).unwrap());
        assert_eq!(mc, 0);
    }

    #[test]
    fn profile_rules_pick_layers_and_devices() {
        let meta = Meta {
            resolution: Resolution::new(1).unwrap(),
            ..Default::default()
        };
        let mut p = Profile::new(meta);
        let mut read = OpStats::new("read");
        read.histogram = hist(&[(300, 100), (200_000, 20)]);
        read.post = 120;
        read.pre = 120;
        layer_in(&mut p.layers, "syscall").ops.push(read);
        for dev in ["sda", "loop0"] {
            let mut b = OpStats::new(format!("{dev}:read"));
            b.histogram = hist(&[(150_000, 5)]);
            layer_in(&mut p.layers, "block").ops.push(b);
        }
        let rows = attribute(&p);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].upper, "syscall/read");
        assert_eq!(rows[0].matched_calls, 10);
    }
}
