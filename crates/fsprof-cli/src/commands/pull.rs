//! `fsprof pull`: fsprof's metrics as Prometheus stored them, read back
//! into a profile (fsprof-pull), for `report`, `compare`, `plot`.

use anyhow::Result;
use clap::Args;

use super::capture::output;
use crate::args::OutputArgs;

pub const HELP: &str = "\
Examples:
  fsprof pull --prometheus http://prom:9090 --from -7d --to -6d -o last-week.json
  fsprof pull --prometheus http://prom:9090 --from -1d -o this-week.json
  fsprof compare last-week.json this-week.json
  fsprof pull --prometheus http://prom:9090 '{instance=\"web1:9464\"}' -o web1.json
  fsprof pull --prometheus http://prom:9090 --by cgroup '{cgroup=~\"nginx.*\"}' -o by-cgroup.json

Each series' gain between the last sample at or before --from and the last
at or before --to is added to the op its layer and op labels name, bucket
for bucket (native histograms, or the classic buckets where Prometheus kept
those). With --by, ops are kept apart by those labels: read{cgroup=x}.";

#[derive(Debug, Args)]
pub struct PullArgs {
    /// Prometheus' base URL (http://HOST:9090)
    #[arg(long, value_name = "URL", required = true)]
    pub prometheus: String,
    /// Start of the range: now-1h, -7d, Unix seconds or RFC 3339 [default: -1h]
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub from: Option<String>,
    /// End of the range [default: now]
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub to: Option<String>,
    /// Keep series apart by these labels (e.g. instance, cgroup)
    #[arg(long, value_delimiter = ',', value_name = "LABEL,...")]
    pub by: Vec<String>,
    #[command(flatten)]
    pub out: OutputArgs,
    /// Label matchers selecting the series, e.g. {instance="web1:9464"}
    #[arg(value_name = "SELECTOR")]
    pub selector: Option<String>,
}

/// `{...}` around matchers given without braces; `{}` for none.
fn selector(s: Option<&str>) -> String {
    match s.map(str::trim) {
        None | Some("") => "{}".into(),
        Some(s) if s.starts_with('{') => s.to_string(),
        Some(s) => format!("{{{s}}}"),
    }
}

pub fn pull(a: PullArgs) -> Result<i32> {
    let out = output(&a.out);
    out.check()?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs_f64();
    let when = |t: Option<&str>, default: &str| {
        fsprof_pull::time::parse(t.unwrap_or(default), now).map_err(anyhow::Error::msg)
    };
    let opts = fsprof_pull::Options {
        url: a.prometheus.clone(),
        from: when(a.from.as_deref(), "now-1h")?,
        to: when(a.to.as_deref(), "now")?,
        by: a.by.clone(),
        selector: selector(a.selector.as_deref()),
    };
    let profile = fsprof_pull::pull(&opts)?;
    let saved = fsprof_capture::save(&profile, &out, "pull", None)?;
    fsprof_sys::diag!(
        "fsprof: {} ops pulled, profile written to {}",
        profile.layers.iter().map(|l| l.ops.len()).sum::<usize>(),
        saved.display()
    );
    Ok(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn matchers_get_their_braces() {
        assert_eq!(super::selector(None), "{}");
        assert_eq!(super::selector(Some("instance=\"a\"")), "{instance=\"a\"}");
        assert_eq!(super::selector(Some("{op=~\"x.*\"}")), "{op=~\"x.*\"}");
    }
}
