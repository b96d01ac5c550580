//! `fsprof agent` against real consumers: a workload with known block I/O
//! (direct reads and writes on a raw loop device) runs in two cgroups
//! while a real Prometheus (Debian's 2.42, native histograms on) scrapes
//! the agent every second and an OTLP receiver on the official
//! opentelemetry-proto parser takes its pushes. Then the counts per
//! cgroup and device in Prometheus equal `/sys/block` and the workload's,
//! `histogram_quantile` lands in the agent's own bucket, `promtool`
//! accepts the agent's exposition, the pushes count what the scrape does,
//! and `fsprof pull` of the range gives back the agent's profile bucket
//! for bucket.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::kit::*;
use fsprof_core::layer::Unit;
use fsprof_core::{Histogram, Resolution};
use fsprof_testkit::*;

/// Kills a helper server we started, however the test ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// A Prometheus scraping `target` every second, native histograms on.
fn prometheus(dir: &Path, target: &str) -> (Killed, String) {
    let prom = need_program("prometheus", "prometheus");
    let web = format!("127.0.0.1:{}", free_port());
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: fsprof\n    static_configs:\n      - targets: ['{target}']\n"),
    )
    .unwrap();
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    let child = Command::new(prom)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address={web}"))
        .arg("--enable-feature=native-histograms")
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    (Killed(child), web)
}

/// An instant query's result vector.
fn query(web: &str, q: &str) -> Vec<serde_json::Value> {
    let enc: String = q
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let Some(body) = http_get(web, &format!("/api/v1/query?query={enc}"), None) else {
        return Vec::new();
    };
    let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

/// The native histogram's count of the one series `sel` selects, if
/// Prometheus has it.
fn native_count(web: &str, sel: &str) -> Option<u64> {
    let r = query(web, &format!("fsprof_op_latency_seconds{sel}"));
    let h = r.first()?.get("histogram")?;
    h[1]["count"].as_str()?.parse().ok()
}

/// Polls until `f` holds (at most `limit`), then asserts it.
fn eventually(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < limit, "{what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The fsprof histogram in a text scrape's classic buckets of one series.
fn classic_histogram(text: &str, labels: &[(&str, &str)], res: Resolution) -> Histogram {
    let s = samples(text);
    let mut les: Vec<(f64, f64)> = s
        .iter()
        .filter(|((n, l), _)| {
            n == "fsprof_op_latency_seconds_bucket"
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|((_, l), v)| (l["le"].parse::<f64>().unwrap_or(f64::INFINITY), *v))
        .collect();
    les.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut h = Histogram::default();
    let mut prev = 0.0;
    for (le, cum) in les.into_iter().filter(|(le, _)| le.is_finite()) {
        let n = (cum - prev) as u64;
        prev = cum;
        if le == 0.0 {
            h.add_to(None, n);
        } else {
            // le = 2^((i+1)/r) ns, in seconds.
            let i = ((le * 1e9).log2() * f64::from(res.get())).round() as i32 - 1;
            h.add_to(Some(i), n);
        }
    }
    h
}

/// The OTLP receiver (tests/exporters/otlp_receiver.py): its port.
fn otlp_receiver(py: &Path, summary: &Path) -> (Killed, u16) {
    let mut child = Command::new(py)
        .arg(workspace().join("tests/exporters/otlp_receiver.py"))
        .arg(summary)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("receiver said {line:?}"));
    (Killed(child), port)
}

#[test]
#[ignore = "needs root, prometheus, promtool, the Python export parsers"]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
fn prometheus_and_otlp_see_exactly_what_the_workload_did_by_cgroup_and_device() {
    let py = need_python_parsers();
    let promtool = need_program("promtool", "prometheus");
    let dir = tempfile::tempdir().unwrap();
    let dev = RawLoop::new(64);
    let id = std::process::id();
    let (a, b) = (
        Cgroup::new(&format!("fsprof-pa-{id}")),
        Cgroup::new(&format!("fsprof-pb-{id}")),
    );
    let summary = dir.path().join("otlp.json");
    let (_receiver, port) = otlp_receiver(&py, &summary);
    let otlp = format!("http://127.0.0.1:{port}");
    let mut agent = Agent::start(
        dir.path(),
        &[
            "--collect-interval",
            "1s",
            "--otlp",
            &otlp,
            "--otlp-interval",
            "1s",
            "-o",
            "agent.json",
        ],
    );
    let (_prom, web) = prometheus(dir.path(), &agent.addr);
    eventually(
        Duration::from_secs(60),
        "Prometheus scrapes the agent",
        || query(&web, "up").iter().any(|r| r["value"][1] == "1"),
    );

    let from = unix_now();
    let before = dev.stat();
    a.run(&dev.read_script(4096, 300, 0));
    a.run(&dev.write_script(8192, 100, 1000));
    b.run(&dev.read_script(16384, 200, 100));
    let after = dev.stat();
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (500, 100),
        "only the workload used the device"
    );

    let (read, write) = (
        format!("{}:read", dev.name()),
        format!("{}:write", dev.name()),
    );
    let sel =
        |cg: &Cgroup, op: &str| format!("{{cgroup=\"{}\",layer=\"block\",op=\"{op}\"}}", cg.label);
    eventually(
        Duration::from_secs(60),
        "Prometheus has the final counts",
        || {
            native_count(&web, &sel(&a, &read)) == Some(300)
                && native_count(&web, &sel(&a, &write)) == Some(100)
                && native_count(&web, &sel(&b, &read)) == Some(200)
        },
    );
    let to = unix_now();
    let total = |op: &str| -> u64 {
        query(
            &web,
            &format!("fsprof_op_latency_seconds{{layer=\"block\",op=\"{op}\"}}"),
        )
        .iter()
        .map(|r| {
            r["histogram"][1]["count"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .unwrap()
        })
        .sum()
    };
    assert_eq!(
        (total(&read), total(&write)),
        (after.0 - before.0, after.1 - before.1)
    );

    // The agent's own exposition: the same counts, and promtool's lint.
    let text = agent.scrape();
    let scrape = dir.path().join("agent.prom");
    std::fs::write(&scrape, &text).unwrap();
    let o = Command::new(&promtool)
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(&scrape).unwrap())
        .output()
        .unwrap();
    assert!(o.status.success(), "promtool: {}{}", stderr(&o), stdout(&o));
    let res = Resolution::new(1).unwrap();
    let own = classic_histogram(&text, &[("cgroup", &a.label), ("op", &read)], res);
    assert_eq!(own.total(), 300);

    // histogram_quantile over the stored native histogram: in the bucket
    // of the agent's own median.
    let q = query(
        &web,
        &format!(
            "histogram_quantile(0.5, fsprof_op_latency_seconds{})",
            sel(&a, &read)
        ),
    );
    let v: f64 = q[0]["value"][1].as_str().unwrap().parse().unwrap();
    let j = (v.log2() * f64::from(res.get()) - 1e-9).ceil() as i32;
    let prom_bucket = fsprof_export::fsprof_index(j, res, Unit::Ns);
    let (lo, _) = own.quantile_range(0.5, res, None, None);
    let own_bucket = (lo.log2() * f64::from(res.get())).round() as i32;
    assert_eq!(
        prom_bucket, own_bucket,
        "Prometheus' median {v}s, the agent's in ({lo}ns, ...]"
    );

    // The OTLP pushes: parsed by opentelemetry-proto, the scrape's counts.
    let key = |cg: &Cgroup, op: &str| format!("fsprof.op.latency|{}|block|{op}", cg.label);
    let mut last = serde_json::Value::Null;
    eventually(
        Duration::from_secs(30),
        "an OTLP push with the final counts",
        || {
            last = std::fs::read(&summary)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .unwrap_or_default();
            last["points"][key(&a, &read)]["count"] == 300
                && last["points"][key(&b, &read)]["count"] == 200
        },
    );
    assert_eq!(last["errors"], serde_json::json!([]), "{last}");
    assert_eq!(last["content_type"], "application/x-protobuf");
    let pushed = &last["points"][key(&a, &read)];
    assert_eq!(pushed["offset"], own.offset, "{pushed}");
    assert_eq!(pushed["buckets"], serde_json::json!(own.counts), "{pushed}");

    assert_eq!(
        agent.stop(libc::SIGTERM).code(),
        Some(0),
        "{}",
        agent.log_text()
    );
    let profile = fsprof_testkit::load(&dir.path().join("agent.json"));
    let block = profile.layer("block").unwrap();
    assert_eq!(block.op(&read).unwrap().post, 500);
    assert_eq!(block.op(&write).unwrap().post, 100);
    pull_equals_the_agent(&web, &profile, from, to, &dev.name(), dir.path());
}

/// `fsprof pull` of the range, selecting the test's device, equals the
/// agent's profile bucket for bucket (block and block-size).
fn pull_equals_the_agent(
    web: &str,
    agent: &fsprof_core::Profile,
    from: f64,
    to: f64,
    dev: &str,
    dir: &Path,
) {
    let out = dir.join("pulled.json");
    let o = fsprof()
        .args(["pull", "--prometheus", &format!("http://{web}")])
        .args([
            "--from",
            &format!("{:.3}", from - 5.0),
            "--to",
            &format!("{:.3}", to + 1.0),
        ])
        .arg(format!("{{op=~\"{dev}:.*\"}}"))
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let pulled = fsprof_testkit::load(&out);
    for layer in ["block", "block-size"] {
        let theirs = pulled
            .layer(layer)
            .unwrap_or_else(|| panic!("no {layer} in the pull"));
        let ours = agent.layer(layer).unwrap();
        for op in ours
            .ops
            .iter()
            .filter(|o| o.name.starts_with(&format!("{dev}:")))
        {
            let p = theirs
                .op(&op.name)
                .unwrap_or_else(|| panic!("no {layer}/{} in the pull", op.name));
            assert_eq!(p.histogram, op.histogram, "{layer}/{}", op.name);
            assert_eq!(
                (p.post, p.errors),
                (op.post, op.errors),
                "{layer}/{}",
                op.name
            );
        }
        assert_eq!(
            theirs.ops.len(),
            ours.ops
                .iter()
                .filter(|o| o.name.starts_with(&format!("{dev}:")))
                .count()
        );
    }
    let check = fsprof().arg("check").arg(&out).output().unwrap();
    assert!(check.status.success(), "{}", stdout(&check));
}
