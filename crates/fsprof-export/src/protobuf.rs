//! Prometheus' protobuf exposition (`io.prometheus.client.MetricFamily`,
//! length-delimited), the only exposition that carries **native
//! histograms**: fsprof's buckets go over one for one at schema `log2 r`,
//! one span of consecutive buckets, placed by [`crate::native_index`]
//! (latencies in seconds, sizes in bytes), with the classic `le` buckets
//! alongside for scrapers that do not ingest native histograms.
//!
//! Encoded by hand: the handful of fields below is all the schema needs, and
//! a protobuf code generator would be a build dependency for ~80 lines.

use fsprof_core::layer::Unit;
use fsprof_core::Profile;

use crate::prometheus::{ERRORS, ERRORS_HELP, LATENCY, LATENCY_HELP, SIZE, SIZE_HELP};
use crate::{base_unit, native_index, Exposition, LabelOptions, Series};

pub const CONTENT_TYPE: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

/// `MetricType` values of metrics.proto.
const COUNTER: u64 = 0;
const GAUGE: u64 = 1;
const HISTOGRAM: u64 = 4;

/// A protobuf message being written (fields in any order, as the wire
/// format allows).
#[derive(Default)]
pub struct Msg(pub Vec<u8>);

impl Msg {
    pub fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    fn key(&mut self, field: u32, wire: u8) {
        self.varint(u64::from(field) << 3 | u64::from(wire));
    }
    pub fn uint(&mut self, field: u32, v: u64) {
        self.key(field, 0);
        self.varint(v);
    }
    pub fn sint(&mut self, field: u32, v: i64) {
        self.key(field, 0);
        self.varint(((v << 1) ^ (v >> 63)) as u64);
    }
    pub fn double(&mut self, field: u32, v: f64) {
        self.key(field, 1);
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub fn fixed64(&mut self, field: u32, v: u64) {
        self.key(field, 1);
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub fn bytes(&mut self, field: u32, b: &[u8]) {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    pub fn msg(&mut self, field: u32, m: Msg) {
        self.bytes(field, &m.0);
    }
}

fn label_pairs<'a>(m: &mut Msg, pairs: impl IntoIterator<Item = (&'a str, &'a str)>) {
    for (k, v) in pairs {
        let mut pair = Msg::default();
        pair.bytes(1, k.as_bytes());
        pair.bytes(2, v.as_bytes());
        m.msg(1, pair);
    }
}

fn histogram(s: &Series, e: &Exposition) -> Msg {
    let (op, res, unit) = (s.op, e.resolution, Unit::of(s.layer));
    let h = &op.histogram;
    let mut m = Msg::default();
    m.uint(1, h.total());
    m.double(2, base_unit(op.total_ns as f64, unit));
    let mut cum = h.zero;
    if h.zero > 0 {
        let mut b = Msg::default();
        b.uint(1, cum);
        b.double(2, 0.0);
        m.msg(3, b);
    }
    for (k, c) in h.counts.iter().enumerate() {
        cum = cum.saturating_add(*c);
        let mut b = Msg::default();
        b.uint(1, cum);
        b.double(2, base_unit(res.upper_bound(h.offset + k as i32), unit));
        m.msg(3, b);
    }
    m.sint(5, i64::from(res.scale()));
    // Only 0 ns calls are in fsprof's zero bucket.
    m.double(6, 0.0);
    m.uint(7, h.zero);
    if !h.counts.is_empty() {
        let mut span = Msg::default();
        span.sint(1, i64::from(native_index(h.offset, res, unit)));
        span.uint(2, h.counts.len() as u64);
        m.msg(12, span);
        let mut prev = 0i64;
        for &c in &h.counts {
            m.sint(13, c as i64 - prev);
            prev = c as i64;
        }
    }
    m
}

fn family(out: &mut Vec<u8>, name: &str, help: &str, kind: u64, metrics: Vec<Msg>) {
    let mut f = Msg::default();
    f.bytes(1, name.as_bytes());
    f.bytes(2, help.as_bytes());
    f.uint(3, kind);
    for m in metrics {
        f.msg(4, m);
    }
    let mut framed = Msg::default();
    framed.varint(f.0.len() as u64);
    out.extend_from_slice(&framed.0);
    out.extend_from_slice(&f.0);
}

/// A histogram family of the series in `unit`.
fn histograms(e: &Exposition, unit: Unit) -> Vec<Msg> {
    e.series(unit)
        .map(|s| {
            let mut m = Msg::default();
            label_pairs(&mut m, s.labels.iter().copied());
            m.msg(7, histogram(&s, e));
            m
        })
        .collect()
}

/// A counter's (field 3) or gauge's (field 2) value.
fn scalar(labels: &[(String, String)], counter: bool, v: f64) -> Msg {
    let mut m = Msg::default();
    label_pairs(&mut m, labels.iter().map(|(k, v)| (&k[..], &v[..])));
    let mut c = Msg::default();
    c.double(1, v);
    m.msg(if counter { 3 } else { 2 }, c);
    m
}

/// The same families as the text exposition ([`crate::prometheus::text`]),
/// as delimited MetricFamily messages.
pub fn encode(e: &Exposition) -> Vec<u8> {
    let mut out = Vec::new();
    family(
        &mut out,
        LATENCY,
        LATENCY_HELP,
        HISTOGRAM,
        histograms(e, Unit::Ns),
    );
    let sizes = histograms(e, Unit::Bytes);
    if !sizes.is_empty() {
        family(&mut out, SIZE, SIZE_HELP, HISTOGRAM, sizes);
    }
    let errors = e
        .series(Unit::Ns)
        .chain(e.series(Unit::Bytes))
        .map(|s| {
            let mut m = Msg::default();
            label_pairs(&mut m, s.labels.iter().copied());
            let mut c = Msg::default();
            c.double(1, s.op.errors as f64);
            m.msg(3, c);
            m
        })
        .collect();
    family(&mut out, ERRORS, ERRORS_HELP, COUNTER, errors);
    for sc in &e.scalars {
        let kind = if sc.counter { COUNTER } else { GAUGE };
        let points = sc.points.iter().map(|(l, v)| scalar(l, sc.counter, *v));
        family(&mut out, &sc.name, &sc.help, kind, points.collect());
    }
    out
}

/// A profile's series as delimited MetricFamily messages.
pub fn render(p: &Profile, opts: &LabelOptions) -> Vec<u8> {
    encode(&Exposition::of_profile(p, opts))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_zigzag_match_the_protobuf_encoding() {
        let mut m = Msg::default();
        m.uint(1, 300);
        assert_eq!(m.0, [0x08, 0xac, 0x02]);
        let mut m = Msg::default();
        m.sint(13, -2);
        assert_eq!(m.0, [0x68, 0x03]);
        let mut m = Msg::default();
        m.sint(1, 7);
        assert_eq!(m.0, [0x08, 0x0e]);
    }
}
