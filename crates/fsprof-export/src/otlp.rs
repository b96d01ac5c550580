//! OTLP/JSON: an `ExportMetricsServiceRequest` in the protobuf JSON mapping
//! (camelCase names, 64-bit integers as strings, enums by name), as an
//! OpenTelemetry collector's OTLP/HTTP receiver or file exporter reads it.

use fsprof_core::layer::Unit;
use fsprof_core::{OpStats, Profile};
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde::Serialize;

use crate::{command_label, host_label};

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

/// What every data point of the request shares.
struct Common<'a> {
    p: &'a Profile,
    host: String,
    command: String,
}

impl Common<'_> {
    fn start(&self) -> Int {
        Int(self.p.meta.run.start_unix_ns)
    }

    /// Saturating: a hand-made profile can hold any start and duration.
    fn end(&self) -> Int {
        Int(self
            .p
            .meta
            .run
            .start_unix_ns
            .saturating_add(self.p.meta.duration_ns))
    }

    fn attrs<'b>(&'b self, layer: &'b str, op: &'b str) -> [Attr<'b>; 4] {
        [
            Attr("host", &self.host),
            Attr("layer", layer),
            Attr("op", op),
            Attr("command", &self.command),
        ]
    }
}

/// One op's latency histogram as an exponential-histogram data point.
struct LatencyPoint<'a> {
    c: &'a Common<'a>,
    layer: &'a str,
    op: &'a OpStats,
}

impl Serialize for LatencyPoint<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (c, op) = (self.c, self.op);
        let h = &op.histogram;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("attributes", &c.attrs(self.layer, &op.name))?;
        m.serialize_entry("startTimeUnixNano", &c.start())?;
        m.serialize_entry("timeUnixNano", &c.end())?;
        // count is the histogram's total so that count = zeroCount + sum of
        // bucketCounts holds even for a profile `fsprof check` would reject.
        m.serialize_entry("count", &Int(h.total()))?;
        m.serialize_entry("sum", &(op.total_ns as f64))?;
        m.serialize_entry("scale", &c.p.resolution().scale())?;
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
    c: &'a Common<'a>,
    layer: &'a str,
    op: &'a OpStats,
}

impl Serialize for ErrorPoint<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("attributes", &self.c.attrs(self.layer, &self.op.name))?;
        m.serialize_entry("startTimeUnixNano", &self.c.start())?;
        m.serialize_entry("timeUnixNano", &self.c.end())?;
        m.serialize_entry("asInt", &Int(self.op.errors))?;
        m.end()
    }
}

/// Every (layer, op) of the profile as data points of one kind, produced
/// while serializing.
struct Points<'a, P> {
    c: &'a Common<'a>,
    /// Only the layers whose values are in this unit; all without.
    unit: Option<Unit>,
    make: fn(&'a Common<'a>, &'a str, &'a OpStats) -> P,
}

impl<'a, P> Points<'a, P> {
    fn layers(&self) -> impl Iterator<Item = &'a fsprof_core::Layer> + use<'a, P> {
        let (unit, c) = (self.unit, self.c);
        c.p.layers
            .iter()
            .filter(move |l| unit.is_none_or(|u| Unit::of(&l.name) == u))
    }
}

impl<P: Serialize> Serialize for Points<'_, P> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut q = s.serialize_seq(Some(self.layers().map(|l| l.ops.len()).sum()))?;
        for l in self.layers() {
            for op in &l.ops {
                q.serialize_element(&(self.make)(self.c, &l.name, op))?;
            }
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
    attributes: [Attr<'a>; 4],
}

#[derive(Serialize)]
struct ScopeMetrics<'a> {
    scope: Scope<'a>,
    metrics: Metrics<'a>,
}

/// Latency and errors, and sizes when a layer holds bytes (block-size).
struct Metrics<'a> {
    latency: LatencyMetric<'a>,
    errors: ErrorMetric<'a>,
    sizes: Option<LatencyMetric<'a>>,
}

impl Serialize for Metrics<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut q = s.serialize_seq(None)?;
        q.serialize_element(&self.latency)?;
        q.serialize_element(&self.errors)?;
        if let Some(sizes) = &self.sizes {
            q.serialize_element(sizes)?;
        }
        q.end()
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

/// One request holding every (layer, op) of the profile as a data point of
/// the `fsprof.op.latency` exponential histogram, plus error counts.
pub fn render(p: &Profile) -> String {
    let c = Common {
        p,
        host: host_label(p),
        command: command_label(p),
    };
    let req = Request {
        resource_metrics: [ResourceMetrics {
            resource: Resource {
                attributes: [
                    Attr("service.name", "fsprof"),
                    Attr("host.name", &c.host),
                    Attr("os.version", &p.meta.run.kernel),
                    Attr("process.command_line", &c.command),
                ],
            },
            scope_metrics: [ScopeMetrics {
                scope: Scope {
                    name: "fsprof",
                    version: &p.meta.fsprof_version,
                },
                metrics: Metrics {
                    latency: LatencyMetric {
                        name: "fsprof.op.latency",
                        description: "Latency of file-system operations, per layer and op (fsprof log2 buckets)",
                        unit: "ns",
                        exponential_histogram: Aggregation {
                            aggregation_temporality: CUMULATIVE,
                            is_monotonic: None,
                            data_points: Points {
                                c: &c,
                                unit: Some(Unit::Ns),
                                make: |c, layer, op| LatencyPoint { c, layer, op },
                            },
                        },
                    },
                    errors: ErrorMetric {
                        name: "fsprof.op.errors",
                        description: "File-system operations that returned an error",
                        unit: "{call}",
                        sum: Aggregation {
                            aggregation_temporality: CUMULATIVE,
                            is_monotonic: Some(true),
                            data_points: Points {
                                c: &c,
                                unit: None,
                                make: |c, layer, op| ErrorPoint { c, layer, op },
                            },
                        },
                    },
                    // A byte-valued layer (block-size): a metric of its own,
                    // in bytes.
                    sizes: p
                        .layers
                        .iter()
                        .any(|l| Unit::of(&l.name) == Unit::Bytes && !l.ops.is_empty())
                        .then_some(LatencyMetric {
                            name: "fsprof.op.size",
                            description: "Sizes of block requests, per device and kind (fsprof log2 buckets)",
                            unit: "By",
                            exponential_histogram: Aggregation {
                                aggregation_temporality: CUMULATIVE,
                                is_monotonic: None,
                                data_points: Points {
                                    c: &c,
                                    unit: Some(Unit::Bytes),
                                    make: |c, layer, op| LatencyPoint { c, layer, op },
                                },
                            },
                        }),
                },
            }],
        }],
    };
    let mut s = serde_json::to_string_pretty(&req).expect("the request always serializes");
    s.push('\n');
    s
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
        let v: Value = serde_json::from_str(&render(&p)).unwrap();
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
