//! Profiles: every shape of layer the readers know, and hostile values.

use fsprof_core::format::to_json;
use fsprof_core::layer;
use fsprof_core::{OpStats, Profile};
use fsprof_testkit::samples;

/// Profiles of every shape the readers know: layers of each kind (block
/// sizes in bytes, FUSE), intervals, processes, metadata with notes.
pub fn profiles() -> Vec<Profile> {
    fsprof_testkit::samples::all()
}

pub fn profile_files() -> Vec<Vec<u8>> {
    profiles()
        .iter()
        .chain(&hostile_profiles())
        .map(|p| to_json(p).into_bytes())
        .collect()
}

/// A calibration file with stable and unstable characteristics, one per
/// request size.
pub fn calibration_files() -> Vec<Vec<u8>> {
    use fsprof_analysis::labels::Characteristic;
    use fsprof_analysis::Calibration;
    let ch = |name: &str, label: &str, size: Option<u64>, median: f64, rounds: Vec<f64>| {
        Characteristic {
            name: name.into(),
            label: label.into(),
            size_bytes: size,
            median_ns: median,
            p10_ns: median * 0.8,
            p90_ns: median * 1.3,
            samples: 1000,
            method: "timed in a loop".into(),
            rounds,
        }
    };
    let cal = Calibration::new(vec![
        ch(
            "page_cache_hit",
            "page-cache hit",
            Some(4096),
            900.0,
            vec![880.0, 910.0],
        ),
        ch(
            "device_read",
            "device read",
            Some(4096),
            150_000.0,
            vec![1.0, 9.0],
        ),
        ch("fsync", "fsync", None, 2_000_000.0, vec![1.9e6, 2.1e6]),
    ]);
    vec![cal.to_json().into_bytes()]
}

/// Profiles that load but hold what no capture writes: names of 70,000
/// characters, names with terminal controls and CSV's separators, counts
/// and totals at u64::MAX, buckets at both ends of the range, and an op
/// per bucket.
pub fn hostile_profiles() -> Vec<Profile> {
    use fsprof_core::buckets::MIN_INDEX;
    let long = "x".repeat(70_000);
    let mut names = samples::user_profile();
    for (k, name) in [
        long.as_str(),
        "\x1b]0;pwned\x07\x1b[2J",
        "a,b\"c\nd\re\u{202e}f",
        "\u{9b}31m",
    ]
    .into_iter()
    .enumerate()
    {
        names.layers[0].ops[k].name = name.to_string();
    }
    names.layers[1].ops[0].name = "ü̈́字\u{fffd}".into();
    names.layers[1].name = long.clone();
    names.meta.command = vec![long.clone(), "\x1b[31m".into()];
    names.meta.run.host = "\x1b]0;host\x07".into();
    names.processes[0].exe = long.clone();
    let mut huge = samples::kernel_profile();
    for layer in &mut huge.layers {
        for o in &mut layer.ops {
            (o.pre, o.post, o.errors, o.total_ns) = (u64::MAX, u64::MAX, u64::MAX, u64::MAX);
            (o.min_ns, o.max_ns) = (Some(u64::MAX), Some(0));
            o.histogram.zero = u64::MAX;
            o.histogram.counts.iter_mut().for_each(|c| *c = u64::MAX);
        }
    }
    huge.meta.duration_ns = u64::MAX;
    let mut edges = Profile::new(samples::meta("run"));
    let max = edges.resolution().max_index();
    // Counts alone (testkit's `op` adds each bucket's middle latency,
    // which has no value at the lowest index).
    let at = |name: &str, buckets: &[(i32, u64)]| {
        let mut o = OpStats::new(name);
        for &(i, n) in buckets {
            o.histogram.add_to(Some(i), n);
            (o.pre, o.post) = (o.pre + n, o.post + n);
        }
        o.total_ns = u64::MAX / 2;
        o
    };
    edges.layer_mut(layer::USER).ops = vec![
        at("low", &[(MIN_INDEX, 3)]),
        at("high", &[(max, 2)]),
        at("both", &[(MIN_INDEX, 1), (max, 1)]),
    ];
    edges.layer_mut(layer::BLOCK_SIZE).ops = vec![at("read", &[(max, 1)])];
    let mut many = Profile::new(samples::meta("run"));
    many.layer_mut(layer::USER).ops = (MIN_INDEX..=max)
        .map(|i| at(&format!("op{i}"), &[(i, 1 + i.unsigned_abs() as u64)]))
        .collect();
    vec![names, huge, edges, many]
}
