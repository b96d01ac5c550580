//! OTLP/JSON: an `ExportMetricsServiceRequest` in the protobuf JSON mapping
//! (camelCase names, 64-bit integers as strings, enums by name), as an
//! OpenTelemetry collector's OTLP/HTTP receiver or file exporter reads it.

use fsprof_core::layer::Unit;
use fsprof_core::Profile;
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde::Serialize;

use crate::{Exposition, LabelOptions, Series};

// The request is written straight from the profile through `Serialize`
// impls that borrow it, never built as a `serde_json::Value` tree first:
// with 100k ops the tree took 3.2 GB for a 22 MB profile.

/// A u64 as the protobuf JSON mapping wants it: a decimal string.
struct Int(u64);

impl Serialize for Int {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

/// `{ "key": k, "value": { "stringValue": v } }`
struct Attr<'a>(&'a str, &'a str);

impl Serialize for Attr<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("key", self.0)?;
        m.serialize_entry("value", &StringValue(self.1))?;
        m.end()
    }
}

struct StringValue<'a>(&'a str);

impl Serialize for StringValue<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(1))?;
        m.serialize_entry("stringValue", self.0)?;
        m.end()
    }
}

/// A list of attributes.
struct Attrs<'a>(Vec<(&'a str, &'a str)>);

impl Serialize for Attrs<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut q = s.serialize_seq(Some(self.0.len()))?;
        for &(k, v) in &self.0 {
            q.serialize_element(&Attr(k, v))?;
        }
        q.end()
    }
}

/// One op's histogram as an exponential-histogram data point.
struct LatencyPoint<'a> {
    e: &'a Exposition<'a>,
    s: Series<'a>,
}

impl Serialize for LatencyPoint<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (e, op) = (self.e, self.s.op);
        let h = &op.histogram;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("attributes", &Attrs(self.s.labels.clone()))?;
        m.serialize_entry("startTimeUnixNano", &Int(e.start_unix_ns))?;
        m.serialize_entry("timeUnixNano", &Int(e.end_unix_ns))?;
        // count is the histogram's total so that count = zeroCount + sum of
        // bucketCounts holds even for a profile `fsprof check` would reject.
        m.serialize_entry("count", &Int(h.total()))?;
        m.serialize_entry("sum", &(op.total_ns as f64))?;
        m.serialize_entry("scale", &e.resolution.scale())?;
        m.serialize_entry("zeroCount", &Int(h.zero))?;
        m.serialize_entry("zeroThreshold", &0.0)?;
        m.serialize_entry("positive", &Positive(h))?;
        if let Some(v) = op.min_ns {
            m.serialize_entry("min", &(v as f64))?;
        }
        if let Some(v) = op.max_ns {
            m.serialize_entry("max", &(v as f64))?;
        }
        m.end()
    }
}

struct Positive<'a>(&'a fsprof_core::Histogram);

impl Serialize for Positive<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("offset", &self.0.offset)?;
        m.serialize_entry("bucketCounts", &Ints(&self.0.counts))?;
        m.end()
    }
}

struct Ints<'a>(&'a [u64]);

impl Serialize for Ints<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut q = s.serialize_seq(Some(self.0.len()))?;
        for &c in self.0 {
            q.serialize_element(&Int(c))?;
        }
        q.end()
    }
}

/// One op's error count as a monotonic-sum data point.
struct ErrorPoint<'a> {
    e: &'a Exposition<'a>,
    s: Series<'a>,
}

impl Serialize for ErrorPoint<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("attributes", &Attrs(self.s.labels.clone()))?;
        m.serialize_entry("startTimeUnixNano", &Int(self.e.start_unix_ns))?;
        m.serialize_entry("timeUnixNano", &Int(self.e.end_unix_ns))?;
        m.serialize_entry("asInt", &Int(self.s.op.errors))?;
        m.end()
    }
}

/// A scalar's points: gauge or monotonic sum data points.
struct ScalarPoints<'a> {
    e: &'a Exposition<'a>,
    sc: &'a crate::Scalar,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ScalarPoint<'a> {
    attributes: Attrs<'a>,
    start_time_unix_nano: Int,
    time_unix_nano: Int,
    as_double: f64,
}

impl Serialize for ScalarPoints<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut q = s.serialize_seq(Some(self.sc.points.len()))?;
        for (labels, v) in &self.sc.points {
            q.serialize_element(&ScalarPoint {
                attributes: Attrs(labels.iter().map(|(k, v)| (&k[..], &v[..])).collect()),
                start_time_unix_nano: Int(self.e.start_unix_ns),
                time_unix_nano: Int(self.e.end_unix_ns),
                as_double: *v,
            })?;
        }
        q.end()
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ScalarSum<'a> {
    aggregation_temporality: &'a str,
    is_monotonic: bool,
    data_points: ScalarPoints<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ScalarGauge<'a> {
    data_points: ScalarPoints<'a>,
}

/// Every series of one unit as data points of one kind, produced while
/// serializing.
struct Points<'a, P> {
    e: &'a Exposition<'a>,
    /// Only the series in this unit; all without.
    unit: Option<Unit>,
    make: fn(&'a Exposition<'a>, Series<'a>) -> P,
}

impl<'a, P> Points<'a, P> {
    fn series(&self) -> impl Iterator<Item = Series<'a>> + use<'a, P> {
        let units = match self.unit {
            Some(u) => vec![u],
            None => vec![Unit::Ns, Unit::Bytes],
        };
        let e = self.e;
        units.into_iter().flat_map(move |u| e.series(u))
    }
}

impl<P: Serialize> Serialize for Points<'_, P> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut q = s.serialize_seq(None)?;
        for series in self.series() {
            q.serialize_element(&(self.make)(self.e, series))?;
        }
        q.end()
    }
}

// The request's envelope: fixed, small, derived.

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Request<'a> {
    resource_metrics: [ResourceMetrics<'a>; 1],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResourceMetrics<'a> {
    resource: Resource<'a>,
    scope_metrics: [ScopeMetrics<'a>; 1],
}

#[derive(Serialize)]
struct Resource<'a> {
    attributes: Attrs<'a>,
}

#[derive(Serialize)]
struct ScopeMetrics<'a> {
    scope: Scope<'a>,
    metrics: Metrics<'a>,
}

/// Latency and errors, sizes when a layer holds bytes (block-size), and
/// the exporter's scalars.
struct Metrics<'a> {
    e: &'a Exposition<'a>,
}

impl Serialize for Metrics<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let e = self.e;
        let mut q = s.serialize_seq(None)?;
        q.serialize_element(&histogram_metric(e, Unit::Ns))?;
        q.serialize_element(&ErrorMetric {
            name: "fsprof.op.errors",
            description: "File-system operations that returned an error",
            unit: "{call}",
            sum: Aggregation {
                aggregation_temporality: CUMULATIVE,
                is_monotonic: Some(true),
                data_points: Points {
                    e,
                    unit: None,
                    make: |e, s| ErrorPoint { e, s },
                },
            },
        })?;
        // A byte-valued layer (block-size): a metric of its own, in bytes.
        if e.has(Unit::Bytes) {
            q.serialize_element(&histogram_metric(e, Unit::Bytes))?;
        }
        for sc in &e.scalars {
            q.serialize_element(&ScalarMetric { e, sc })?;
        }
        q.end()
    }
}

struct ScalarMetric<'a> {
    e: &'a Exposition<'a>,
    sc: &'a crate::Scalar,
}

impl Serialize for ScalarMetric<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (e, sc) = (self.e, self.sc);
        // fsprof_agent_events_lost_total -> fsprof.agent.events.lost
        let name = sc.name.strip_suffix("_total").unwrap_or(&sc.name);
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("name", &name.replace('_', "."))?;
        m.serialize_entry("description", &sc.help)?;
        let data_points = ScalarPoints { e, sc };
        if sc.counter {
            let sum = ScalarSum {
                aggregation_temporality: CUMULATIVE,
                is_monotonic: true,
                data_points,
            };
            m.serialize_entry("sum", &sum)?;
        } else {
            m.serialize_entry("gauge", &ScalarGauge { data_points })?;
        }
        m.end()
    }
}

/// The name, description and unit of the histogram metric of `unit`
/// (JSON and protobuf alike).
pub(crate) fn histogram_names(unit: Unit) -> (&'static str, &'static str, &'static str) {
    match unit {
        Unit::Ns => (
            "fsprof.op.latency",
            "Latency of file-system operations, per layer and op (fsprof log2 buckets)",
            "ns",
        ),
        Unit::Bytes => (
            "fsprof.op.size",
            "Sizes of block requests, per device and kind (fsprof log2 buckets)",
            "By",
        ),
    }
}

fn histogram_metric<'a>(e: &'a Exposition<'a>, unit: Unit) -> LatencyMetric<'a> {
    let (name, description, u) = histogram_names(unit);
    LatencyMetric {
        name,
        description,
        unit: u,
        exponential_histogram: Aggregation {
            aggregation_temporality: CUMULATIVE,
            is_monotonic: None,
            data_points: Points {
                e,
                unit: Some(unit),
                make: |e, s| LatencyPoint { e, s },
            },
        },
    }
}

#[derive(Serialize)]
struct Scope<'a> {
    name: &'a str,
    version: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LatencyMetric<'a> {
    name: &'a str,
    description: &'a str,
    unit: &'a str,
    exponential_histogram: Aggregation<'a, LatencyPoint<'a>>,
}

#[derive(Serialize)]
struct ErrorMetric<'a> {
    name: &'a str,
    description: &'a str,
    unit: &'a str,
    sum: Aggregation<'a, ErrorPoint<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Aggregation<'a, P> {
    aggregation_temporality: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    is_monotonic: Option<bool>,
    data_points: Points<'a, P>,
}

const CUMULATIVE: &str = "AGGREGATION_TEMPORALITY_CUMULATIVE";

/// One `ExportMetricsServiceRequest` holding every series of `e` as a data
/// point of the `fsprof.op.latency` (or `fsprof.op.size`) exponential
/// histogram, the error counts, and the scalars.
pub fn json(e: &Exposition) -> String {
    let req = Request {
        resource_metrics: [ResourceMetrics {
            resource: Resource {
                attributes: Attrs(e.resource.iter().map(|(k, v)| (&k[..], &v[..])).collect()),
            },
            scope_metrics: [ScopeMetrics {
                scope: Scope {
                    name: "fsprof",
                    version: &e.version,
                },
                metrics: Metrics { e },
            }],
        }],
    };
    let mut s = serde_json::to_string_pretty(&req).expect("the request always serializes");
    s.push('\n');
    s
}

/// A profile as one OTLP/JSON request.
pub fn render(p: &Profile, opts: &LabelOptions) -> String {
    json(&Exposition::of_profile(p, opts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsprof_core::profile::{Clock, Meta, RunInfo};
    use fsprof_core::Resolution;
    use serde_json::{json, Value};

    #[test]
    fn buckets_map_one_to_one() {
        let mut p = Profile::new(Meta {
            run: RunInfo {
                host: "h".into(),
                start_unix_ns: 10,
                ..Default::default()
            },
            command: vec!["cat".into(), "x".into()],
            clock: Clock::default(),
            resolution: Resolution::new(4).unwrap(),
            duration_ns: 5,
            ..Default::default()
        });
        p.layers = crate::test_profile(Meta::default(), 25).layers;
        let v: Value = serde_json::from_str(&render(&p, &LabelOptions::default())).unwrap();
        let dp = &v["resourceMetrics"][0]["scopeMetrics"][0]["metrics"][0]["exponentialHistogram"]
            ["dataPoints"][0];
        assert_eq!(dp["scale"], 2);
        assert_eq!(dp["positive"]["offset"], 25);
        assert_eq!(dp["positive"]["bucketCounts"], json!(["2", "0", "3"]));
        assert_eq!(dp["zeroCount"], "1");
        assert_eq!(dp["count"], "6");
        assert_eq!(dp["timeUnixNano"], "15");
        assert!(dp.get("min").is_none());
    }
}
