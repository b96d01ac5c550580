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
    if !p.meta.host.is_empty() {
        return p.meta.host.clone();
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
