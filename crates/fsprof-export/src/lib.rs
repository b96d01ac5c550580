//! Profiles into the monitoring systems fleets already run: OpenTelemetry
//! exponential histograms (OTLP/JSON), Prometheus exposition text, and a
//! small loopback HTTP endpoint that serves live metrics while a capture
//! runs. The bucket mapping is exact (docs/profile-format.md): fsprof's
//! bucket `i` at resolution `r` is OTel's bucket `i` at scale `log2 r`.

pub mod otlp;
pub mod prometheus;
pub mod protobuf;
pub mod serve;

/// The labels every exported series carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Labels<'a> {
    pub host: &'a str,
    pub layer: &'a str,
    pub op: &'a str,
    pub command: &'a str,
}

/// Every op of the profile with its labels, layer by layer: the series an
/// export writes. `host` and `command` are [`host_label`] and
/// [`command_label`].
pub fn series<'a>(
    p: &'a fsprof_core::Profile,
    host: &'a str,
    command: &'a str,
) -> impl Iterator<Item = (Labels<'a>, &'a fsprof_core::OpStats)> {
    p.layers.iter().flat_map(move |layer| {
        layer.ops.iter().map(move |op| {
            let l = Labels {
                host,
                layer: &layer.name,
                op: &op.name,
                command,
            };
            (l, op)
        })
    })
}

/// The profile's command line as one label value.
pub fn command_label(p: &fsprof_core::Profile) -> String {
    if p.meta.command.is_empty() {
        p.meta.tool.to_string()
    } else {
        p.meta.command.join(" ")
    }
}

/// The host label: the profile's host, or for a merged profile the hosts it
/// was merged from (`web1+web2`), so fleet aggregates say what they cover.
pub fn host_label(p: &fsprof_core::Profile) -> String {
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
    hosts.join("+")
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
