//! Profiles into the monitoring systems fleets already run: OpenTelemetry
//! exponential histograms (OTLP/JSON), Prometheus exposition text and
//! protobuf (native histograms), and a small HTTP endpoint that serves live
//! metrics while a capture (or `fsprof agent`) runs.
//!
//! Every renderer reads one [`Exposition`]: groups of layers, each group's
//! series carrying the group's labels (`host` and `command` for a profile,
//! `cgroup` for the agent) besides `layer` and `op`. The bucket mapping is
//! exact (docs/profile-format.md): fsprof's bucket `i` at resolution `r` is
//! OTel's bucket `i` at scale `log2 r`, and one native-histogram bucket of
//! schema `log2 r` ([`native_index`]).

pub mod otlp;
pub mod otlp_proto;
pub mod prometheus;
pub mod protobuf;
pub mod serve;

use fsprof_core::layer::Unit;
use fsprof_core::{Layer, OpStats, Profile, Resolution};

/// Owned label pairs, in the order they are written.
pub type LabelSet = Vec<(String, String)>;

/// What an export writes: the op metrics of every group, then the
/// exporter's own scalars.
#[derive(Clone, Debug, Default)]
pub struct Exposition<'a> {
    pub resolution: Resolution,
    pub groups: Vec<Group<'a>>,
    /// Counters and gauges about the exporter itself (the agent's health).
    pub scalars: Vec<Scalar>,
    /// OTLP resource attributes (who sent the points).
    pub resource: LabelSet,
    /// The cumulative points' start and time (OTLP).
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    /// fsprof's version, the OTLP scope's.
    pub version: String,
}

/// Layers whose every op is one series with these labels (plus `layer`
/// and `op`).
#[derive(Clone, Debug)]
pub struct Group<'a> {
    pub labels: LabelSet,
    pub layers: &'a [Layer],
}

/// One counter or gauge family.
#[derive(Clone, Debug, PartialEq)]
pub struct Scalar {
    /// A Prometheus name; a counter's ends in `_total`.
    pub name: String,
    pub help: String,
    pub counter: bool,
    pub points: Vec<(LabelSet, f64)>,
}

/// One op's series: its labels (the group's, then `layer` and `op`).
pub struct Series<'a> {
    pub labels: Vec<(&'a str, &'a str)>,
    pub layer: &'a str,
    pub op: &'a OpStats,
}

impl<'a> Exposition<'a> {
    /// Every op series whose layer holds values in `unit`, group by group.
    pub fn series(&'a self, unit: Unit) -> impl Iterator<Item = Series<'a>> + 'a {
        self.groups.iter().flat_map(move |g| {
            g.layers
                .iter()
                .filter(move |l| Unit::of(&l.name) == unit)
                .flat_map(move |l| {
                    l.ops.iter().map(move |op| {
                        let mut labels: Vec<(&str, &str)> =
                            g.labels.iter().map(|(k, v)| (&k[..], &v[..])).collect();
                        labels.push(("layer", &l.name));
                        labels.push(("op", &op.name));
                        Series {
                            labels,
                            layer: &l.name,
                            op,
                        }
                    })
                })
        })
    }

    /// Whether any group has an op in a layer of `unit`.
    pub fn has(&self, unit: Unit) -> bool {
        self.series(unit).next().is_some()
    }

    /// A profile's series, labelled `host` and `command` ([`host_label`],
    /// [`command_label`]).
    pub fn of_profile(p: &'a Profile, opts: &LabelOptions) -> Exposition<'a> {
        let host = host_label(p);
        let command = command_label(p, opts);
        let mut resource = vec![
            ("service.name".to_string(), "fsprof".to_string()),
            ("host.name".to_string(), host.clone()),
            ("os.version".to_string(), p.meta.run.kernel.clone()),
        ];
        let key = match opts.argv {
            true => "process.command_line",
            false => "process.executable.name",
        };
        resource.push((key.to_string(), command.clone()));
        Exposition {
            resolution: p.resolution(),
            groups: vec![Group {
                labels: vec![("host".into(), host), ("command".into(), command)],
                layers: &p.layers,
            }],
            scalars: Vec::new(),
            resource,
            start_unix_ns: p.meta.run.start_unix_ns,
            end_unix_ns: p.meta.run.start_unix_ns.saturating_add(p.meta.duration_ns),
            version: p.meta.fsprof_version.clone(),
        }
    }
}

/// How an export labels a profile's series.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LabelOptions {
    /// `command` is the whole command line rather than the program's name.
    /// Off by default: arguments make a series per invocation (and may
    /// carry what should not be in a monitoring system).
    pub argv: bool,
}

/// The profile's command as one label value: the program's name (the base
/// name of `argv[0]`), or with `argv` the whole command line; the tool's
/// name when there is no command.
pub fn command_label(p: &Profile, opts: &LabelOptions) -> String {
    let Some(first) = p.meta.command.first() else {
        return p.meta.tool.to_string();
    };
    match opts.argv {
        true => p.meta.command.join(" "),
        false => first.rsplit('/').next().unwrap_or(first).to_string(),
    }
}

/// Longest `host` label of a merged profile that is written out whole.
pub const MAX_HOST_LABEL: usize = 64;

/// The host label: the profile's host, or for a merged profile the hosts it
/// was merged from (`web1+web2`). Past [`MAX_HOST_LABEL`] bytes it is
/// `first+N more #hash` instead — 500 hosts joined would be kilobytes in
/// every series — where the hash tells two fleets with the same first host
/// apart; the whole list stays in the profile's `merged_from`.
pub fn host_label(p: &Profile) -> String {
    if !p.meta.run.host.is_empty() {
        return p.meta.run.host.clone();
    }
    let mut hosts: Vec<&str> = p
        .meta
        .merged_from
        .iter()
        .map(|s| s.host.as_str())
        .filter(|h| !h.is_empty())
        .collect();
    hosts.sort_unstable();
    hosts.dedup();
    let joined = hosts.join("+");
    if joined.len() <= MAX_HOST_LABEL {
        return joined;
    }
    let hash = xxhash_rust::xxh64::xxh64(joined.as_bytes(), 0);
    let first: String = hosts[0].chars().take(MAX_HOST_LABEL / 2).collect();
    format!("{first}+{} more #{:08x}", hosts.len() - 1, hash as u32)
}

/// log2(1e-9): a nanosecond in binary orders of magnitude of a second.
const LOG2_NS_IN_S: f64 = -29.897_352_853_986_263;

/// How many native-histogram buckets of schema `log2 r` fsprof's
/// nanosecond buckets move when the unit is the second: the nearest whole
/// number to `r · log2(1e-9)` (−30 at r = 1, 2, 4; −239 at 8; −478 at 16).
///
/// A native histogram's boundaries are powers of `2^(1/r)` in its unit,
/// and a nanosecond is not one of them in seconds, so the bucket of
/// fsprof's `(2^(i/r), 2^((i+1)/r)]` ns is placed at the native bucket
/// whose boundaries are nearest: they differ from fsprof's by one constant
/// factor, `2^(shift/r) / 1e-9` (0.931 at r ≤ 4, 1.015 at r = 8 and 16),
/// always less than half a bucket. Every fsprof bucket maps to exactly one
/// native bucket and back, so counts round-trip bucket for bucket
/// (`fsprof pull`); the classic `le` buckets carry the exact bounds.
pub fn native_shift(res: Resolution) -> i32 {
    (f64::from(res.get()) * LOG2_NS_IN_S).round() as i32
}

/// The native-histogram bucket index (Prometheus numbers a bucket by its
/// upper bound, so fsprof's `i` is `i + 1` in the same unit) of fsprof's
/// bucket `i` for a layer of `unit`: latencies are exported in seconds
/// ([`native_shift`]), sizes in bytes.
pub fn native_index(i: i32, res: Resolution, unit: Unit) -> i32 {
    match unit {
        Unit::Ns => i + 1 + native_shift(res),
        Unit::Bytes => i + 1,
    }
}

/// The inverse of [`native_index`]: fsprof's bucket of native bucket `j`.
pub fn fsprof_index(j: i32, res: Resolution, unit: Unit) -> i32 {
    match unit {
        Unit::Ns => j - 1 - native_shift(res),
        Unit::Bytes => j - 1,
    }
}

/// A value of a layer in `unit` as exported: seconds for latencies (given
/// in ns; divided, not multiplied by 1e-9, so the result is the f64
/// nearest the exact quotient: 900 ns is 0.0000009, not 9.000000000000001e-7),
/// bytes as they are.
pub fn base_unit(v: f64, unit: Unit) -> f64 {
    match unit {
        Unit::Ns => v / 1e9,
        Unit::Bytes => v,
    }
}

/// A one-op profile the exporters' tests share: `user/read`, 6 calls (one of
/// 0 ns, two in bucket `offset`, three in `offset + 2`), 900 ns in all.
#[cfg(test)]
pub(crate) fn test_profile(meta: fsprof_core::Meta, offset: i32) -> fsprof_core::Profile {
    let mut p = fsprof_core::Profile::new(meta);
    let mut op = fsprof_core::OpStats::new("read");
    op.pre = 6;
    op.post = 6;
    op.total_ns = 900;
    op.histogram = fsprof_core::Histogram {
        zero: 1,
        offset,
        counts: vec![2, 0, 3],
    };
    let mut l = fsprof_core::Layer::new("user");
    l.ops.push(op);
    p.layers.push(l);
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsprof_core::profile::{Meta, Source};

    #[test]
    fn the_native_shift_is_the_nearest_and_under_half_a_bucket() {
        for r in Resolution::ALLOWED {
            let res = Resolution::new(r).unwrap();
            let s = native_shift(res);
            let factor = (f64::from(s) / f64::from(r)).exp2() / 1e-9;
            assert!(
                factor.log2().abs() <= 0.5 / f64::from(r),
                "r={r}: factor {factor}"
            );
            for i in [-1, 0, 7, 63 * r as i32] {
                for u in [Unit::Ns, Unit::Bytes] {
                    assert_eq!(fsprof_index(native_index(i, res, u), res, u), i);
                }
            }
        }
        assert_eq!(native_shift(Resolution::new(1).unwrap()), -30);
        assert_eq!(native_shift(Resolution::new(16).unwrap()), -478);
    }

    #[test]
    fn the_command_label_is_the_program_unless_argv_is_asked_for() {
        let mut p = Profile::new(Meta::default());
        p.meta.command = vec!["/usr/bin/grep".into(), "-r".into(), "secret".into()];
        assert_eq!(command_label(&p, &LabelOptions::default()), "grep");
        assert_eq!(
            command_label(&p, &LabelOptions { argv: true }),
            "/usr/bin/grep -r secret"
        );
        p.meta.command.clear();
        assert_eq!(command_label(&p, &LabelOptions::default()), "");
    }

    #[test]
    fn a_merged_fleet_has_a_bounded_host_label() {
        let merged = |n: usize| {
            let mut p = Profile::new(Meta::default());
            p.meta.merged_from = (0..n)
                .map(|k| Source {
                    host: format!("web{k:03}"),
                    ..Default::default()
                })
                .collect();
            p
        };
        assert_eq!(host_label(&merged(3)), "web000+web001+web002");
        let big = host_label(&merged(500));
        assert!(big.len() <= MAX_HOST_LABEL, "{big}");
        assert!(big.starts_with("web000+499 more #"), "{big}");
        assert_ne!(big, host_label(&merged(499)));
        assert_eq!(merged(500).meta.merged_from.len(), 500);
    }
}
