//! OTLP/protobuf: the same `ExportMetricsServiceRequest` as
//! [`crate::otlp::json`], in the binary encoding an OTLP/HTTP receiver
//! takes with `Content-Type: application/x-protobuf` (smaller and cheaper
//! to parse than JSON, so the agent pushes it by default).
//!
//! Encoded by hand with [`crate::protobuf::Msg`], field numbers from
//! opentelemetry-proto's `metrics.proto`, `common.proto` and
//! `resource.proto` (v1); the tests decode it with the official parser.

use fsprof_core::layer::Unit;

use crate::protobuf::Msg;
use crate::{Exposition, Series};

pub const CONTENT_TYPE: &str = "application/x-protobuf";

/// `AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE`.
const CUMULATIVE: u64 = 2;

fn key_value(k: &str, v: &str) -> Msg {
    let mut any = Msg::default();
    any.bytes(1, v.as_bytes());
    let mut kv = Msg::default();
    kv.bytes(1, k.as_bytes());
    kv.msg(2, any);
    kv
}

fn attributes<'a>(m: &mut Msg, field: u32, pairs: impl IntoIterator<Item = (&'a str, &'a str)>) {
    for (k, v) in pairs {
        m.msg(field, key_value(k, v));
    }
}

fn exp_point(e: &Exposition, s: &Series) -> Msg {
    let (op, h) = (s.op, &s.op.histogram);
    let mut p = Msg::default();
    attributes(&mut p, 1, s.labels.iter().copied());
    p.fixed64(2, e.start_unix_ns);
    p.fixed64(3, e.end_unix_ns);
    p.fixed64(4, h.total());
    p.double(5, op.total_ns as f64);
    p.sint(6, i64::from(e.resolution.scale()));
    p.fixed64(7, h.zero);
    let mut positive = Msg::default();
    positive.sint(1, i64::from(h.offset));
    let mut packed = Msg::default();
    for &c in &h.counts {
        packed.varint(c);
    }
    positive.bytes(2, &packed.0);
    p.msg(8, positive);
    if let Some(v) = op.min_ns {
        p.double(12, v as f64);
    }
    if let Some(v) = op.max_ns {
        p.double(13, v as f64);
    }
    p.double(14, 0.0);
    p
}

fn metric(name: &str, description: &str, unit: &str) -> Msg {
    let mut m = Msg::default();
    m.bytes(1, name.as_bytes());
    m.bytes(2, description.as_bytes());
    m.bytes(3, unit.as_bytes());
    m
}

fn histogram_metric(e: &Exposition, unit: Unit) -> Msg {
    let (name, description, u) = crate::otlp::histogram_names(unit);
    let mut h = Msg::default();
    for s in e.series(unit) {
        h.msg(1, exp_point(e, &s));
    }
    h.uint(2, CUMULATIVE);
    let mut m = metric(name, description, u);
    m.msg(10, h);
    m
}

/// A monotonic sum (`counter`) or gauge of `(labels, value)` points.
fn number_metric<'a>(
    e: &Exposition,
    m: &mut Msg,
    counter: bool,
    points: impl Iterator<Item = (Vec<(&'a str, &'a str)>, Option<u64>, f64)>,
) {
    let mut agg = Msg::default();
    for (labels, int, v) in points {
        let mut p = Msg::default();
        attributes(&mut p, 7, labels);
        p.fixed64(2, e.start_unix_ns);
        p.fixed64(3, e.end_unix_ns);
        match int {
            Some(i) => p.fixed64(6, i),
            None => p.double(4, v),
        }
        agg.msg(1, p);
    }
    if counter {
        agg.uint(2, CUMULATIVE);
        agg.uint(3, 1);
        m.msg(7, agg);
    } else {
        m.msg(5, agg);
    }
}

/// One request holding every series of `e` (see [`crate::otlp::json`]).
pub fn encode(e: &Exposition) -> Vec<u8> {
    let mut scope = Msg::default();
    let mut id = Msg::default();
    id.bytes(1, b"fsprof");
    id.bytes(2, e.version.as_bytes());
    scope.msg(1, id);
    scope.msg(2, histogram_metric(e, Unit::Ns));
    let mut errors = metric(
        "fsprof.op.errors",
        "File-system operations that returned an error",
        "{call}",
    );
    let all = e.series(Unit::Ns).chain(e.series(Unit::Bytes));
    number_metric(
        e,
        &mut errors,
        true,
        all.map(|s| (s.labels, Some(s.op.errors), 0.0)),
    );
    scope.msg(2, errors);
    if e.has(Unit::Bytes) {
        scope.msg(2, histogram_metric(e, Unit::Bytes));
    }
    for sc in &e.scalars {
        let name = sc.name.strip_suffix("_total").unwrap_or(&sc.name);
        let mut m = metric(&name.replace('_', "."), &sc.help, "");
        let points = sc.points.iter().map(|(l, v)| {
            let labels = l.iter().map(|(k, v)| (&k[..], &v[..])).collect();
            (labels, None, *v)
        });
        number_metric(e, &mut m, sc.counter, points);
        scope.msg(2, m);
    }
    let mut resource = Msg::default();
    attributes(
        &mut resource,
        1,
        e.resource.iter().map(|(k, v)| (&k[..], &v[..])),
    );
    let mut rm = Msg::default();
    rm.msg(1, resource);
    rm.msg(2, scope);
    let mut req = Msg::default();
    req.msg(1, rm);
    req.0
}
