//! The HTML reports in a real browser: Debian's Chromium, headless, driven
//! by playwright-core (tests/browser/check_report.mjs). The page must load
//! without console errors or network requests, show the expected number of
//! charts, each drawn, and switch to log axes. Screenshots land in
//! <target dir>/browser-artifacts/ for CI to keep.

use std::path::{Path, PathBuf};
use std::process::Command;

use fsprof_core::format::read_profile;
use fsprof_testkit::*;

/// Chromium, Node and the locked playwright-core, all installed by
/// `./scripts/test-all` before any test runs (nothing is installed here).
fn browser() -> (PathBuf, PathBuf) {
    let chromium = std::env::var_os("CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/usr/bin/chromium".into());
    need_file(&chromium, "chromium");
    need_program("node", "nodejs");
    (chromium, need_playwright())
}

/// Screenshots for CI to keep, in the target directory in use.
fn artifacts() -> PathBuf {
    let d = target_dir().join("browser-artifacts");
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn check_in_browser(html: &Path, expect_charts: usize, shot_name: &str) {
    let (chromium, node_modules) = browser();
    let shot = artifacts().join(shot_name);
    let o = Command::new("node")
        .env("CHROMIUM", chromium)
        .env("FSPROF_NODE_MODULES", node_modules)
        .arg(workspace().join("tests/browser/check_report.mjs"))
        .arg("--html")
        .arg(html)
        .args([
            "--expect-charts",
            &expect_charts.to_string(),
            "--screenshot",
        ])
        .arg(&shot)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "browser check failed:\n{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let png = std::fs::read(&shot).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    println!("screenshot: {}", shot.display());
}

/// Charts the report should hold, counted from the profile itself: count
/// and delay histograms per op; with intervals, a heat map per op seen in
/// an interval and a latency-per-interval chart per layer (layers shown
/// by default: the calls on non-files only on request).
fn expected_charts(p: &fsprof_core::Profile) -> usize {
    let mut n = 0;
    let shown = p
        .layers
        .iter()
        .filter(|l| fsprof_core::profile::layer::shown_by_default(&l.name));
    for l in shown {
        for op in &l.ops {
            n += 2;
            let in_intervals = p.intervals.iter().any(|iv| {
                iv.layers.iter().filter(|il| il.name == l.name).any(|il| {
                    il.op(&op.name)
                        .is_some_and(|o| !o.histogram.counts.is_empty())
                })
            });
            n += usize::from(in_intervals);
        }
        n += usize::from(!p.intervals.is_empty());
    }
    n
}

#[test]
#[ignore = "needs chromium, node, playwright-core"]
fn html_report_renders_in_chromium() {
    browser();
    let dir = tempfile::tempdir().unwrap();
    let p = record(dir.path(), "p.json", &["--interval", "50ms"]);
    let profile = read_profile(&p).unwrap();
    assert!(!profile.intervals.is_empty());
    let html = dir.path().join("report.html");
    html_report(&p, &html);
    let n = expected_charts(&profile);
    assert!(n >= 10, "a real run has several ops: {n}");
    check_in_browser(&html, n, "report.png");
}

#[test]
#[ignore = "needs chromium, node, playwright-core"]
fn compare_report_renders_in_chromium() {
    browser();
    let dir = tempfile::tempdir().unwrap();
    let a = record(dir.path(), "a.json", &[]);
    // B does more: a sync and writes a file, which A never does.
    let b = dir.path().join("b.json");
    let target = dir.path().join("copy.x");
    let o = fsprof()
        .args(["run", "-q", "-o"])
        .arg(&b)
        .args([
            "--",
            "sh",
            "-c",
            &format!(
                "find /usr/include -maxdepth 2 -name '*.h' | head -200 | xargs cat > '{}'; sync",
                target.display()
            ),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let html = dir.path().join("compare.html");
    let o = fsprof()
        .arg("compare")
        .arg(&a)
        .arg(&b)
        .args(["--format", "html", "-o"])
        .arg(&html)
        .output()
        .unwrap();
    // 1: some op changed significantly (B syncs, A does not).
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    let interesting = page.matches("<section class=\"op\"").count();
    assert!(interesting >= 1, "no interesting op");
    assert!(page.contains("sync"));
    // Two overlaid histograms (count, delay) per interesting op.
    check_in_browser(&html, 2 * interesting, "compare.png");
}
