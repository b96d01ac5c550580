//! The agent's settings: defaults, then the configuration file
//! (`--config`, TOML, read again on SIGHUP), then the command line's
//! flags, each overriding the one before.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::labels::{Labeler, Mode};

/// A layer the agent can capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layer {
    Block,
    Fs,
    Fuse,
    Syscall,
}

/// How pushes to an OpenTelemetry collector are encoded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OtlpFormat {
    #[default]
    Protobuf,
    Json,
}

/// Every setting, each optional: what a configuration file holds and what
/// the command line's flags give.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Overrides {
    pub layers: Option<Vec<Layer>>,
    pub syscalls: Option<bool>,
    pub all_syscalls: Option<bool>,
    pub resolution: Option<u32>,
    pub top: Option<usize>,
    pub cgroup_ttl: Option<String>,
    pub cgroup_depth: Option<usize>,
    pub cgroup_labels: Option<Mode>,
    pub cgroup_root: Option<PathBuf>,
    pub serve_metrics: Option<String>,
    pub metrics_allow_remote: Option<bool>,
    pub otlp: Option<String>,
    pub otlp_interval: Option<String>,
    pub otlp_format: Option<OtlpFormat>,
    pub otlp_buffer: Option<usize>,
    pub collect_interval: Option<String>,
}

/// Where to push OTLP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Otlp {
    /// `http://HOST:PORT/v1/metrics`
    pub endpoint: String,
    pub interval: Duration,
    pub format: OtlpFormat,
    /// Pushes kept for retry while the collector is away.
    pub buffer: usize,
}

/// The settings in force.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// Sorted, no repeats.
    pub layers: Vec<Layer>,
    pub all_syscalls: bool,
    pub resolution: fsprof_core::Resolution,
    pub top: usize,
    pub ttl: Duration,
    pub labeler: Labeler,
    /// `None`: found (/sys/fs/cgroup, else /sys/fs/cgroup/unified).
    pub cgroup_root: Option<PathBuf>,
    pub serve_metrics: Option<String>,
    pub metrics_allow_remote: bool,
    pub otlp: Option<Otlp>,
    /// How often the kernel maps are read when nothing asks (scrapes read
    /// them too, at most once a second).
    pub collect_interval: Duration,
}

/// Labels with series of their own, by default.
pub const DEFAULT_TOP: usize = 50;

impl Settings {
    /// `file` then `flags` over the defaults.
    pub fn resolve(file: &Overrides, flags: &Overrides) -> Result<Settings, String> {
        let o = file.clone().then(flags.clone());
        let mut layers = o
            .layers
            .clone()
            .unwrap_or_else(|| vec![Layer::Block, Layer::Fs, Layer::Fuse]);
        if o.syscalls.unwrap_or(false) || o.all_syscalls.unwrap_or(false) {
            layers.push(Layer::Syscall);
        }
        layers.sort_unstable();
        layers.dedup();
        if layers.is_empty() {
            return Err("no layer selected: give layers one of block, fs, fuse, syscall".into());
        }
        let resolution =
            fsprof_core::Resolution::new(o.resolution.unwrap_or(1)).map_err(|e| e.to_string())?;
        let top = o.top.unwrap_or(DEFAULT_TOP);
        if top == 0 {
            return Err("top must be at least 1 (the labels with series of their own)".into());
        }
        let otlp = match &o.otlp {
            None => None,
            Some(url) => Some(Otlp {
                endpoint: otlp_endpoint(url)?,
                interval: duration("otlp-interval", o.otlp_interval.as_deref(), "60s")?,
                format: o.otlp_format.unwrap_or_default(),
                buffer: o.otlp_buffer.unwrap_or(16).max(1),
            }),
        };
        Ok(Settings {
            layers,
            all_syscalls: o.all_syscalls.unwrap_or(false),
            resolution,
            top,
            ttl: duration("cgroup-ttl", o.cgroup_ttl.as_deref(), "5m")?,
            labeler: Labeler {
                mode: o.cgroup_labels.unwrap_or_default(),
                depth: o.cgroup_depth.unwrap_or(0),
            },
            cgroup_root: o.cgroup_root.clone(),
            serve_metrics: o.serve_metrics.clone(),
            metrics_allow_remote: o.metrics_allow_remote.unwrap_or(false),
            otlp,
            collect_interval: duration("collect-interval", o.collect_interval.as_deref(), "10s")?,
        })
    }

    /// What the capture session needs to be started again for.
    pub fn capture_differs(&self, other: &Settings) -> bool {
        (&self.layers, self.all_syscalls, self.resolution)
            != (&other.layers, other.all_syscalls, other.resolution)
    }
}

impl Overrides {
    /// Reads a configuration file; the error names the file and the
    /// problem (an unknown key, a bad value, with its line).
    pub fn read(path: &Path) -> Result<Overrides, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| {
            let msg = e.to_string().replace('\n', " ");
            format!(
                "{}: {}",
                path.display(),
                msg.split_whitespace().collect::<Vec<_>>().join(" ")
            )
        })
    }

    /// `self` with every setting `over` has replaced by it.
    fn then(self, over: Overrides) -> Overrides {
        macro_rules! pick {
            ($($f:ident),*) => { Overrides { $($f: over.$f.or(self.$f),)* } };
        }
        pick!(
            layers,
            syscalls,
            all_syscalls,
            resolution,
            top,
            cgroup_ttl,
            cgroup_depth,
            cgroup_labels,
            cgroup_root,
            serve_metrics,
            metrics_allow_remote,
            otlp,
            otlp_interval,
            otlp_format,
            otlp_buffer,
            collect_interval
        )
    }
}

fn duration(what: &str, v: Option<&str>, default: &str) -> Result<Duration, String> {
    let s = v.unwrap_or(default);
    let d = humantime::parse_duration(s)
        .map_err(|e| format!("{what} {s:?}: {e} (e.g. 30s, 5m, 1h)"))?;
    if d.is_zero() {
        return Err(format!("{what} must be longer than 0"));
    }
    Ok(d)
}

/// `http://HOST:PORT` or a full URL → the metrics endpoint: OTLP/HTTP's
/// path `/v1/metrics` when none is given.
fn otlp_endpoint(url: &str) -> Result<String, String> {
    let Some(rest) = url.strip_prefix("http://") else {
        return Err(format!(
            "otlp {url:?}: give an http:// URL of an OpenTelemetry collector (e.g. http://127.0.0.1:4318); https is not supported, use a local collector"
        ));
    };
    if rest.is_empty() || rest.starts_with('/') {
        return Err(format!("otlp {url:?}: no host"));
    }
    Ok(match rest.split_once('/') {
        Some((_, path)) if !path.is_empty() => url.to_string(),
        _ => format!("http://{}/v1/metrics", rest.trim_end_matches('/')),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_override_the_file_which_overrides_the_defaults() {
        let file: Overrides = toml::from_str(
            "layers = [\"block\"]\ntop = 10\ncgroup-ttl = \"30s\"\notlp = \"http://127.0.0.1:4318\"\n",
        )
        .unwrap();
        let flags = Overrides {
            top: Some(3),
            syscalls: Some(true),
            ..Default::default()
        };
        let s = Settings::resolve(&file, &flags).unwrap();
        assert_eq!(s.layers, [Layer::Block, Layer::Syscall]);
        assert_eq!(s.top, 3);
        assert_eq!(s.ttl, Duration::from_secs(30));
        let otlp = s.otlp.unwrap();
        assert_eq!(otlp.endpoint, "http://127.0.0.1:4318/v1/metrics");
        assert_eq!(otlp.interval, Duration::from_secs(60));
        let d = Settings::resolve(&Overrides::default(), &Overrides::default()).unwrap();
        assert_eq!(d.layers, [Layer::Block, Layer::Fs, Layer::Fuse]);
        assert_eq!(d.top, DEFAULT_TOP);
        assert!(d.capture_differs(&Settings {
            resolution: fsprof_core::Resolution::new(4).unwrap(),
            ..d.clone()
        }));
    }

    #[test]
    fn bad_settings_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("agent.toml");
        std::fs::write(&p, "tpo = 3\n").unwrap();
        let e = Overrides::read(&p).unwrap_err();
        assert!(
            e.contains("agent.toml") && e.contains("unknown field `tpo`"),
            "{e}"
        );
        let bad = |o: Overrides| Settings::resolve(&o, &Overrides::default()).unwrap_err();
        assert!(bad(Overrides {
            cgroup_ttl: Some("soon".into()),
            ..Default::default()
        })
        .contains("cgroup-ttl \"soon\""));
        assert!(bad(Overrides {
            otlp: Some("https://x".into()),
            ..Default::default()
        })
        .contains("https is not supported"));
        assert!(bad(Overrides {
            layers: Some(vec![]),
            ..Default::default()
        })
        .contains("no layer"));
        assert!(bad(Overrides {
            resolution: Some(3),
            ..Default::default()
        })
        .contains("resolution 3"));
    }
}
