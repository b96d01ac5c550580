//! `fsprof pull`: what Prometheus stored of fsprof's metrics (from
//! `fsprof agent`, `run --serve-metrics` or `mount --serve-metrics`),
//! read back through its HTTP API into an fsprof profile, so that
//! `report`, `compare`, `--peaks`, `plot` and the HTML report work on a
//! fleet's data: this week against last week, host A against host B.
//!
//! For each metric (`fsprof_op_latency_seconds`, `fsprof_op_size_bytes`,
//! `fsprof_op_errors_total`) one range query fetches the raw samples of
//! the selected series from a little before `--from` to `--to`; each
//! series' gain over the range ([`series`]) is added to the profile op
//! its `layer` and `op` labels name, kept apart by the `--by` labels.
//! Native histograms come back bucket for bucket
//! ([`fsprof_export::fsprof_index`]); where Prometheus stored the classic
//! buckets instead (native histograms not enabled), their exact `le`
//! bounds do the same.
//!
//! Its own crate above fsprof-export rather than inside it: export
//! renders and serves, pull is a client of another system with an HTTP
//! client and time parsing of its own, and it depends on export's
//! mapping, never the other way.

pub mod classic;
pub mod series;
pub mod time;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use fsprof_core::layer::Unit;
use fsprof_core::profile::{layer_in, Meta, RunInfo, Source, Tool};
use fsprof_core::{Histogram, Profile, Resolution};

use series::{Native, Stored};

/// How far before `--from` samples are fetched, to find the one the gain
/// starts from (Prometheus' own lookback).
const LOOKBACK: f64 = 300.0;

#[derive(Debug, thiserror::Error)]
pub enum PullError {
    #[error("{url}: {why}")]
    Http { url: String, why: String },
    #[error("{0}")]
    Answer(String),
    #[error("no fsprof series match {selector} between {from} and {to} at {url}")]
    Nothing {
        url: String,
        selector: String,
        from: String,
        to: String,
    },
    #[error("{0}")]
    Usage(String),
}

/// What to pull.
#[derive(Clone, Debug)]
pub struct Options {
    /// Prometheus' base URL (`http://prometheus:9090`).
    pub url: String,
    /// Unix seconds.
    pub from: f64,
    pub to: f64,
    /// Labels whose values keep series apart: `op{instance=web1}`.
    pub by: Vec<String>,
    /// Label matchers, `{instance=~"web.*",cgroup="nginx.service"}`.
    pub selector: String,
}

/// The series of one metric: native histograms, or classic ones.
enum Fetched {
    Native(Vec<Stored<Native>>, Option<Resolution>),
    Counter(Vec<Stored<f64>>),
}

/// Pulls the range into a profile.
pub fn pull(o: &Options) -> Result<Profile, PullError> {
    if o.to <= o.from {
        return Err(PullError::Usage(format!(
            "--from ({}) must be before --to ({})",
            stamp(o.from),
            stamp(o.to)
        )));
    }
    let http: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(60)))
        .http_status_as_error(false)
        .build()
        .into();
    let mut ops: BTreeMap<(String, String), Acc> = BTreeMap::new();
    let mut instances = BTreeSet::new();
    let mut res: Option<Resolution> = None;
    for (metric, unit) in [
        ("fsprof_op_latency_seconds", Unit::Ns),
        ("fsprof_op_size_bytes", Unit::Bytes),
    ] {
        let (stored, r) = histograms(&http, o, metric, unit)?;
        res = match (res, r) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        for (labels, h, sum) in stored {
            let Some(key) = op_key(&labels, &o.by) else {
                continue;
            };
            instances.extend(labels.get("instance").cloned());
            let acc = ops.entry(key).or_default();
            acc.hists.push((h, r.unwrap_or_default()));
            acc.total += match unit {
                Unit::Ns => (sum * 1e9).round() as u64,
                Unit::Bytes => sum.round() as u64,
            };
        }
    }
    let Fetched::Counter(errors) = fetch(&http, o, "fsprof_op_errors_total", Unit::Ns)? else {
        unreachable!("a counter's answer is a counter")
    };
    for s in errors {
        if let Some(key) = op_key(&s.labels, &o.by) {
            if let Some(acc) = ops.get_mut(&key) {
                acc.errors += series::counter_gain(&s.samples, o.from, o.to).round() as u64;
            }
        }
    }
    if ops.is_empty() {
        return Err(PullError::Nothing {
            url: o.url.clone(),
            selector: o.selector.clone(),
            from: stamp(o.from),
            to: stamp(o.to),
        });
    }
    Ok(assemble(o, ops, instances, res.unwrap_or_default()))
}

/// One profile op being assembled.
#[derive(Default)]
struct Acc {
    hists: Vec<(Histogram, Resolution)>,
    total: u64,
    errors: u64,
}

/// (layer, op) of a series, the op named with its `--by` labels.
fn op_key(labels: &BTreeMap<String, String>, by: &[String]) -> Option<(String, String)> {
    let (layer, op) = (labels.get("layer")?, labels.get("op")?);
    if by.is_empty() {
        return Some((layer.clone(), op.clone()));
    }
    let tags: Vec<String> = by
        .iter()
        .map(|l| format!("{l}={}", labels.get(l).map_or("", String::as_str)))
        .collect();
    Some((layer.clone(), format!("{op}{{{}}}", tags.join(","))))
}

/// Each series' gain over the range: labels, histogram, sum.
type Gains = Vec<(BTreeMap<String, String>, Histogram, f64)>;

fn histograms(
    http: &ureq::Agent,
    o: &Options,
    metric: &str,
    unit: Unit,
) -> Result<(Gains, Option<Resolution>), PullError> {
    match fetch(http, o, metric, unit)? {
        Fetched::Native(stored, r) if !stored.is_empty() => {
            let out = stored
                .into_iter()
                .map(|s| {
                    let g = series::native_gain(&s.samples, o.from, o.to);
                    (s.labels, series::histogram(&g), g.sum)
                })
                .collect();
            Ok((out, r))
        }
        // Stored as classic buckets: the `_bucket`, `_count`, `_sum` series.
        _ => classic::gains(http, o, metric, unit),
    }
}

/// `metric{selector}` over the range: raw samples of every series.
fn fetch(http: &ureq::Agent, o: &Options, metric: &str, unit: Unit) -> Result<Fetched, PullError> {
    let result = range_query(http, o, metric)?;
    let mut natives = Vec::new();
    let mut counters = Vec::new();
    let mut res = None;
    for r in result {
        let labels: BTreeMap<String, String> = r["metric"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| *k != "__name__")
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                    .collect()
            })
            .unwrap_or_default();
        if let Some(hs) = r["histograms"].as_array() {
            let mut s = Stored {
                labels,
                samples: Vec::new(),
            };
            for pair in hs {
                let t = pair[0].as_f64().unwrap_or(0.0);
                let (n, r) = series::parse_native(&pair[1], unit).ok_or_else(|| {
                    PullError::Answer(format!(
                        "{metric}: a native histogram whose buckets are not fsprof's (schema 0 to 4): {}",
                        pair[1]
                    ))
                })?;
                res = res.or(r);
                s.samples.push((t, n));
            }
            natives.push(s);
        } else if let Some(vs) = r["values"].as_array() {
            let samples = vs
                .iter()
                .filter_map(|p| Some((p[0].as_f64()?, p[1].as_str()?.parse().ok()?)))
                .collect();
            counters.push(Stored { labels, samples });
        }
    }
    Ok(match natives.is_empty() {
        false => Fetched::Native(natives, res),
        true => Fetched::Counter(counters),
    })
}

/// The `result` of `/api/v1/query` for `metric{selector}[range]` at `to`.
fn range_query(
    http: &ureq::Agent,
    o: &Options,
    metric: &str,
) -> Result<Vec<serde_json::Value>, PullError> {
    let range = (o.to - o.from + LOOKBACK).ceil() as u64;
    let q = format!("{metric}{}[{range}s]", o.selector);
    let url = format!("{}/api/v1/query", o.url.trim_end_matches('/'));
    let err = |why: String| PullError::Http {
        url: url.clone(),
        why,
    };
    let mut resp = http
        .get(&url)
        .query("query", &q)
        .query("time", format!("{:.3}", o.to))
        .call()
        .map_err(|e| err(e.to_string()))?;
    let status = resp.status().as_u16();
    let body = resp
        .body_mut()
        .read_to_string()
        .map_err(|e| err(e.to_string()))?;
    let v: serde_json::Value = serde_json::from_str(&body).map_err(|_| {
        err(format!(
            "answered {status} with no JSON: is this Prometheus?"
        ))
    })?;
    if v["status"] != "success" {
        return Err(PullError::Answer(format!(
            "Prometheus refused {q}: {} ({})",
            v["error"].as_str().unwrap_or("no reason given"),
            v["errorType"].as_str().unwrap_or("error")
        )));
    }
    Ok(v["data"]["result"].as_array().cloned().unwrap_or_default())
}

fn assemble(
    o: &Options,
    ops: BTreeMap<(String, String), Acc>,
    instances: BTreeSet<String>,
    res: Resolution,
) -> Profile {
    let mut meta = Meta {
        fsprof_version: env!("CARGO_PKG_VERSION").to_string(),
        tool: Tool::Pull,
        target: Some(format!(
            "{}{} from Prometheus at {}",
            "fsprof metrics", o.selector, o.url
        )),
        run: RunInfo::new(String::new(), String::new(), (o.from * 1e9) as u64),
        duration_ns: ((o.to - o.from) * 1e9) as u64,
        resolution: res,
        ..Default::default()
    };
    meta.settings.insert("prometheus".into(), o.url.clone());
    meta.settings.insert("selector".into(), o.selector.clone());
    meta.settings.insert("from".into(), stamp(o.from));
    meta.settings.insert("to".into(), stamp(o.to));
    if !o.by.is_empty() {
        meta.settings.insert("by".into(), o.by.join(","));
    }
    meta.notes.push("pulled from Prometheus: each op's counts are what its series gained between the last sample at or before `from` and the last at or before `to` (a series with no sample before `from` counts from zero); latencies' min and max are not stored there".into());
    meta.merged_from = instances
        .into_iter()
        .map(|host| Source {
            tool: Tool::Agent,
            host,
            ..Default::default()
        })
        .collect();
    let mut p = Profile::new(meta);
    for ((layer, op), acc) in ops {
        let mut h = Histogram::default();
        for (x, r) in &acc.hists {
            h.merge(&x.downscale(*r, res));
        }
        let s = layer_in(&mut p.layers, &layer).op_mut(&op);
        s.post = h.total();
        s.pre = s.post;
        s.total_ns = acc.total;
        s.errors = acc.errors;
        s.histogram = h;
    }
    for l in &mut p.layers {
        l.normalize();
    }
    p
}

/// A moment as RFC 3339 UTC.
fn stamp(t: f64) -> String {
    fsprof_core::units::rfc3339_utc((t * 1e9) as u64)
}
