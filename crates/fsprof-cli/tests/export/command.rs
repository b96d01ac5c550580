//! `fsprof export` and `fsprof run --serve-metrics`, checked by the real
//! parsers: the Prometheus Python client's text parser and the OTLP
//! protobuf messages (opentelemetry-proto) via protobuf's JSON mapping.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use fsprof_testkit::*;

#[test]
#[ignore = "needs the Python export parsers, promtool"]
fn prometheus_and_otlp_exports_parse_and_match_the_profile() {
    let py = need_python_parsers();
    need_program("promtool", "prometheus");
    let dir = tempfile::tempdir().unwrap();
    for (name, extra) in [("r1.json", vec![]), ("r4.json", vec!["--resolution", "4"])] {
        let p = record(dir.path(), name, &extra);
        let prom = dir.path().join(format!("{name}.prom"));
        let o = export("prometheus", &p, Some(&prom));
        assert!(o.status.success(), "{}", stderr(&o));
        let out = py_check(&py, "check_prometheus.py", &[&prom, &p], &[]);
        assert!(out.contains("prometheus ok"), "{out}");
        promtool_accepts(&prom);

        // The protobuf exposition: delimited messages that tile the output.
        let o = export("prometheus-protobuf", &p, None);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(
            delimited_frames(&o.stdout),
            2,
            "histogram and error families"
        );

        // OTLP to standard output, as a pipeline into a collector would take it.
        let o = export("otlp-json", &p, None);
        assert!(o.status.success(), "{}", stderr(&o));
        let otlp = dir.path().join(format!("{name}.otlp.json"));
        std::fs::write(&otlp, &o.stdout).unwrap();
        let out = py_check(&py, "check_otlp.py", &[&otlp, &p], &[]);
        let scale = if name == "r4.json" { 2 } else { 0 };
        assert!(out.contains(&format!("at scale {scale}")), "{out}");
    }
}

#[test]
fn export_refuses_to_overwrite_and_names_bad_files() {
    let dir = tempfile::tempdir().unwrap();
    let p = record(dir.path(), "p.json", &[]);
    let out = dir.path().join("m.prom");
    std::fs::write(&out, "keep").unwrap();
    let o = export("prometheus", &p, Some(&out));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("already exists"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "keep");
    let o = export("otlp-json", &dir.path().join("nope.json"), None);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
}

/// Counts the length-prefixed frames of a delimited protobuf stream,
/// checking they end exactly at the end.
fn delimited_frames(mut b: &[u8]) -> usize {
    let mut n = 0;
    while !b.is_empty() {
        let (mut len, mut shift, mut k) = (0usize, 0, 0);
        loop {
            let byte = b[k];
            len |= usize::from(byte & 0x7f) << shift;
            shift += 7;
            k += 1;
            if byte & 0x80 == 0 {
                break;
            }
        }
        assert!(k + len <= b.len(), "frame overruns the output");
        b = &b[k + len..];
        n += 1;
    }
    n
}

/// Prometheus' own (Go) parser and linter, via `promtool check metrics`:
/// it must parse with no lint at all (base units: seconds, bytes).
fn promtool_accepts(path: &std::path::Path) {
    let o = std::process::Command::new(need_program("promtool", "prometheus"))
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(path).unwrap())
        .output()
        .unwrap();
    let text = format!("{}{}", stderr(&o), String::from_utf8_lossy(&o.stdout));
    assert_eq!(o.status.code(), Some(0), "promtool: {text}");
}

fn scrape(addr: &str) -> Option<String> {
    let mut c = TcpStream::connect_timeout(&addr.parse().ok()?, Duration::from_secs(2)).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(c, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut s = String::new();
    c.read_to_string(&mut s).ok()?;
    let (head, body) = s.split_once("\r\n\r\n")?;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    Some(body.to_string())
}

#[test]
#[ignore = "needs the Python export parsers, promtool"]
fn serve_metrics_exposes_live_counts_while_the_command_runs() {
    let py = need_python_parsers();
    let dir = tempfile::tempdir().unwrap();
    // The command keeps reading until the test has seen its calls (at most
    // ~20 s).
    let live = serve_live(
        dir.path(),
        &[],
        "cat /etc/hostname /etc/passwd >/dev/null",
        400,
    );
    let (addr, profile) = (live.addr.clone(), live.profile.clone());
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");

    let mut body = String::new();
    for _ in 0..100 {
        if let Some(b) = scrape(&addr) {
            if b.lines().any(|l| {
                l.starts_with("fsprof_op_latency_seconds_count{")
                    && l.contains("op=\"read\"")
                    && !l.ends_with(" 0")
            }) {
                body = b;
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!body.is_empty(), "never scraped read calls from {addr}");
    assert!(body.contains("command=\"sh\""), "{body}");
    assert!(live.finish().success());

    // The scrape parses and is bounded by the final profile.
    let scraped = dir.path().join("scrape.prom");
    std::fs::write(&scraped, &body).unwrap();
    let out = py_check(
        &py,
        "check_prometheus.py",
        &[&scraped, &profile],
        &["--live"],
    );
    assert!(out.contains("prometheus ok"), "{out}");
    promtool_accepts(&scraped);
    // The endpoint went away with the run.
    assert!(TcpStream::connect_timeout(&addr.parse().unwrap(), Duration::from_secs(1)).is_err());
}

#[test]
fn serve_metrics_refuses_non_loopback_before_running_anything() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let o = fsprof()
        .current_dir(dir.path())
        .args(["run", "--serve-metrics", "0.0.0.0:0", "--", "touch"])
        .arg(&marker)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.contains("not a loopback address") && e.contains("--metrics-allow-remote"),
        "{e}"
    );
    assert!(!marker.exists(), "the command ran anyway");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "left files behind"
    );
}
