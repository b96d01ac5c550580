//! OTLP/JSON: an `ExportMetricsServiceRequest` in the protobuf JSON mapping
//! (camelCase names, 64-bit integers as strings, enums by name), as an
//! OpenTelemetry collector's OTLP/HTTP receiver or file exporter reads it.

use fsprof_core::layer::Unit;
use fsprof_core::{OpStats, Profile};
use serde_json::{json, Value};

use crate::{command_label, host_label};

fn attr(key: &str, value: &str) -> Value {
    json!({ "key": key, "value": { "stringValue": value } })
}

fn data_point(p: &Profile, host: &str, layer: &str, op: &OpStats, command: &str) -> Value {
    let h = &op.histogram;
    let start = p.meta.start_unix_ns;
    let mut dp = json!({
        "attributes": [
            attr("host", host),
            attr("layer", layer),
            attr("op", &op.name),
            attr("command", command),
        ],
        "startTimeUnixNano": start.to_string(),
        "timeUnixNano": (start + p.meta.duration_ns).to_string(),
        // count is the histogram's total so that count = zeroCount + sum of
        // bucketCounts holds even for a profile `fsprof check` would reject.
        "count": h.total().to_string(),
        "sum": op.total_ns as f64,
        "scale": p.resolution().scale(),
        "zeroCount": h.zero.to_string(),
        "zeroThreshold": 0.0,
        "positive": {
            "offset": h.offset,
            "bucketCounts": h.counts.iter().map(|c| c.to_string()).collect::<Vec<_>>(),
        },
    });
    if let Some(m) = op.min_ns {
        dp["min"] = json!(m as f64);
    }
    if let Some(m) = op.max_ns {
        dp["max"] = json!(m as f64);
    }
    dp
}

/// One request holding every (layer, op) of the profile as a data point of
/// the `fsprof.op.latency` exponential histogram, plus error counts.
pub fn render(p: &Profile) -> String {
    let command = command_label(p);
    let host = host_label(p);
    let mut latency = Vec::new();
    let mut sizes = Vec::new();
    let mut errors = Vec::new();
    for l in &p.layers {
        for op in &l.ops {
            let point = data_point(p, &host, &l.name, op, &command);
            match Unit::of(&l.name) {
                Unit::Ns => latency.push(point),
                Unit::Bytes => sizes.push(point),
            }
            errors.push(json!({
                "attributes": [
                    attr("host", &host),
                    attr("layer", &l.name),
                    attr("op", &op.name),
                    attr("command", &command),
                ],
                "startTimeUnixNano": p.meta.start_unix_ns.to_string(),
                "timeUnixNano": (p.meta.start_unix_ns + p.meta.duration_ns).to_string(),
                "asInt": op.errors.to_string(),
            }));
        }
    }
    let req = json!({
        "resourceMetrics": [{
            "resource": {
                "attributes": [
                    attr("service.name", "fsprof"),
                    attr("host.name", &host),
                    attr("os.version", &p.meta.kernel),
                    attr("process.command_line", &command),
                ]
            },
            "scopeMetrics": [{
                "scope": { "name": "fsprof", "version": p.meta.fsprof_version },
                "metrics": [
                    {
                        "name": "fsprof.op.latency",
                        "description": "Latency of file-system operations, per layer and op (fsprof log2 buckets)",
                        "unit": "ns",
                        "exponentialHistogram": {
                            "aggregationTemporality": "AGGREGATION_TEMPORALITY_CUMULATIVE",
                            "dataPoints": latency,
                        }
                    },
                    {
                        "name": "fsprof.op.errors",
                        "description": "File-system operations that returned an error",
                        "unit": "{call}",
                        "sum": {
                            "aggregationTemporality": "AGGREGATION_TEMPORALITY_CUMULATIVE",
                            "isMonotonic": true,
                            "dataPoints": errors,
                        }
                    }
                ]
            }]
        }]
    });
    let mut req = req;
    if !sizes.is_empty() {
        // A byte-valued layer (block-size): a metric of its own, in bytes.
        if let Some(m) = req["resourceMetrics"][0]["scopeMetrics"][0]["metrics"].as_array_mut() {
            m.push(json!({
                "name": "fsprof.op.size",
                "description": "Sizes of block requests, per device and kind (fsprof log2 buckets)",
                "unit": "By",
                "exponentialHistogram": {
                    "aggregationTemporality": "AGGREGATION_TEMPORALITY_CUMULATIVE",
                    "dataPoints": sizes,
                }
            }));
        }
    }
    let mut s = serde_json::to_string_pretty(&req).expect("JSON values always serialize");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsprof_core::profile::{Clock, Meta};
    use fsprof_core::Resolution;

    #[test]
    fn buckets_map_one_to_one() {
        let mut p = Profile::new(Meta {
            host: "h".into(),
            command: vec!["cat".into(), "x".into()],
            clock: Clock::default(),
            resolution: Resolution::new(4).unwrap(),
            start_unix_ns: 10,
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
