//! The live endpoint scraped by a real Prometheus server (Debian's, with
//! native histograms enabled): it must ingest fsprof's buckets one for one
//! as a native histogram in seconds, each at the native bucket
//! `fsprof_export::native_index` places it.
//! Everything stays on loopback; every wait is bounded.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command};
use std::time::Duration;

use fsprof_core::format::read_profile;
use fsprof_testkit::*;

/// Stops the server we started (by its pid) however the test ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn http_get(addr: &str, path: &str) -> Option<String> {
    let mut c = TcpStream::connect_timeout(&addr.parse().ok()?, Duration::from_secs(2)).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut s = String::new();
    c.read_to_string(&mut s).ok()?;
    Some(s.split_once("\r\n\r\n")?.1.to_string())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
#[ignore = "needs prometheus"]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
fn prometheus_scrapes_native_histograms_with_fsprof_buckets() {
    let prom = need_program("prometheus", "prometheus");
    let dir = tempfile::tempdir().unwrap();
    // Resolution 2: schema 1, so the check below tells sub-buckets apart.
    let extra = ["--resolution", "2", "--interval", "250ms"];
    let live = serve_live(dir.path(), &extra, "cat /etc/passwd >/dev/null", 600);
    let (target, profile) = (live.addr.clone(), live.profile.clone());

    let web = format!("127.0.0.1:{}", free_port());
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: fsprof\n    static_configs:\n      - targets: ['{target}']\n"),
    )
    .unwrap();
    let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
    let _server = Killed(
        Command::new(prom)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={web}"))
            .arg("--enable-feature=native-histograms")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    );

    let query = "/api/v1/query?query=fsprof_op_latency_seconds%7Bop%3D%22read%22%7D";
    let mut result = None;
    for _ in 0..80 {
        std::thread::sleep(Duration::from_millis(500));
        if let Some(body) = http_get(&web, query) {
            let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
            if let Some(r) = v["data"]["result"].as_array().and_then(|r| r.first()) {
                if r.get("histogram").is_some() {
                    result = Some(r.clone());
                    break;
                }
            }
        }
    }
    assert!(live.finish().success());
    let log = std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default();
    let r = result.unwrap_or_else(|| {
        panic!("Prometheus never stored a native histogram for read; its log:\n{log}")
    });

    let m = &r["metric"];
    assert_eq!(m["layer"], "user");
    assert_eq!(m["host"], fsprof_sys::host::hostname());
    assert_eq!(m["command"], "sh");
    let h = &r["histogram"][1];
    let count: u64 = h["count"].as_str().unwrap().parse().unwrap();
    assert!(count > 0);
    let buckets = h["buckets"].as_array().unwrap();
    let fin = read_profile(&profile).unwrap();
    let read = fin.layer("user").unwrap().op("read").unwrap();
    let res = fin.resolution();
    let mut total = 0;
    for b in buckets {
        // [boundary rule, lower, upper, count]; rule 0 = open left, closed right.
        assert_eq!(b[0], 0, "{b}");
        let lo: f64 = b[1].as_str().unwrap().parse().unwrap();
        let hi: f64 = b[2].as_str().unwrap().parse().unwrap();
        let n: u64 = b[3].as_str().unwrap().parse().unwrap();
        // Native bucket j of schema 1 is (2^((j-1)/2), 2^(j/2)] s.
        let j = (hi.log2() * 2.0).round() as i32;
        assert!(
            (lo - ((j - 1) as f64 / 2.0).exp2()).abs() <= lo * 1e-12,
            "{b}"
        );
        assert!((hi - (j as f64 / 2.0).exp2()).abs() <= hi * 1e-12, "{b}");
        let i = fsprof_export::fsprof_index(j, res, fsprof_core::layer::Unit::Ns);
        // Scraped mid-run: never more than the final profile holds.
        assert!(
            n <= read.histogram.get(i),
            "bucket {i}: {n} > {}",
            read.histogram.get(i)
        );
        total += n;
    }
    assert_eq!(total, count);
    assert!(count <= read.post);
}
