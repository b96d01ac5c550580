//! Prometheus' protobuf exposition (`io.prometheus.client.MetricFamily`,
//! length-delimited), the only exposition that carries **native
//! histograms**: fsprof's buckets go over unchanged as schema `log2 r`, one
//! span starting at Prometheus index `offset + 1` (Prometheus numbers a
//! bucket by its upper bound), with the classic `le` buckets alongside for
//! scrapers that do not ingest native histograms.
//!
//! Encoded by hand: the handful of fields below is all the schema needs, and
//! a protobuf code generator would be a build dependency for ~80 lines.

use fsprof_core::{OpStats, Profile, Resolution};

use crate::{command_label, host_label, series, Labels};

pub const CONTENT_TYPE: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

/// `MetricType` values of metrics.proto.
const COUNTER: u64 = 0;
const HISTOGRAM: u64 = 4;

#[derive(Default)]
struct Msg(Vec<u8>);

impl Msg {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    fn key(&mut self, field: u32, wire: u8) {
        self.varint(u64::from(field) << 3 | u64::from(wire));
    }
    fn uint(&mut self, field: u32, v: u64) {
        self.key(field, 0);
        self.varint(v);
    }
    fn sint(&mut self, field: u32, v: i64) {
        self.key(field, 0);
        self.varint(((v << 1) ^ (v >> 63)) as u64);
    }
    fn double(&mut self, field: u32, v: f64) {
        self.key(field, 1);
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    fn msg(&mut self, field: u32, m: Msg) {
        self.bytes(field, &m.0);
    }
}

fn label_pairs(m: &mut Msg, l: &Labels) {
    for (k, v) in [
        ("host", l.host),
        ("layer", l.layer),
        ("op", l.op),
        ("command", l.command),
    ] {
        let mut pair = Msg::default();
        pair.bytes(1, k.as_bytes());
        pair.bytes(2, v.as_bytes());
        m.msg(1, pair);
    }
}

fn histogram(op: &OpStats, res: Resolution) -> Msg {
    let h = &op.histogram;
    let mut m = Msg::default();
    m.uint(1, h.total());
    m.double(2, op.total_ns as f64);
    let mut cum = h.zero;
    if h.zero > 0 {
        let mut b = Msg::default();
        b.uint(1, cum);
        b.double(2, 0.0);
        m.msg(3, b);
    }
    for (k, c) in h.counts.iter().enumerate() {
        cum += c;
        let mut b = Msg::default();
        b.uint(1, cum);
        b.double(2, res.upper_bound(h.offset + k as i32));
        m.msg(3, b);
    }
    m.sint(5, i64::from(res.scale()));
    // Only 0 ns calls are in fsprof's zero bucket.
    m.double(6, 0.0);
    m.uint(7, h.zero);
    if !h.counts.is_empty() {
        let mut span = Msg::default();
        span.sint(1, i64::from(h.offset) + 1);
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

/// The same series as the text exposition, as delimited MetricFamily messages.
pub fn render(p: &Profile) -> Vec<u8> {
    let (command, host) = (command_label(p), host_label(p));
    let res = p.resolution();
    let mut hists = Vec::new();
    let mut sizes = Vec::new();
    let mut errors = Vec::new();
    for (l, op) in series(p, &host, &command) {
        let mut m = Msg::default();
        label_pairs(&mut m, &l);
        m.msg(7, histogram(op, res));
        match fsprof_core::layer::Unit::of(l.layer) {
            fsprof_core::layer::Unit::Ns => hists.push(m),
            fsprof_core::layer::Unit::Bytes => sizes.push(m),
        }
        let mut m = Msg::default();
        label_pairs(&mut m, &l);
        let mut c = Msg::default();
        c.double(1, op.errors as f64);
        m.msg(3, c);
        errors.push(m);
    }
    let mut out = Vec::new();
    family(
        &mut out,
        "fsprof_op_latency_nanoseconds",
        "Latency of file-system operations (fsprof log2 buckets, upper bounds 2^(i/r) ns).",
        HISTOGRAM,
        hists,
    );
    if !sizes.is_empty() {
        family(
            &mut out,
            "fsprof_op_size_bytes",
            "Sizes of block requests (byte-valued layers; fsprof log2 buckets, upper bounds 2^(i/r) bytes).",
            HISTOGRAM,
            sizes,
        );
    }
    family(
        &mut out,
        "fsprof_op_errors_total",
        "File-system operations that returned an error.",
        COUNTER,
        errors,
    );
    out
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
