//! `fsprof agent` under cgroup churn: 2,000 cgroups are created, do block
//! I/O and are removed while it runs. Its memory stays under a bound, the
//! cgroup label values it exports stay at or under top + 1 (`other`), the
//! series of removed cgroups are gone once the TTL has passed, every
//! cgroup is named (none unresolved: `cgroup_mkdir` names them while they
//! exist), and a healthy agent says nothing after starting.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::kit::*;

/// Labels with series of their own.
const TOP: usize = 8;
const CGROUPS: usize = 2000;
/// The agent's resident memory must stay under this (debug build).
const RSS_BOUND_KIB: u64 = 48 * 1024;

/// Cgroup label values among the op series of a scrape.
fn labels(text: &str) -> BTreeSet<String> {
    samples(text)
        .keys()
        .filter(|(n, _)| n == "fsprof_op_latency_seconds_count")
        .filter_map(|(_, l)| l.get("cgroup").cloned())
        .collect()
}

#[test]
#[ignore = "needs root"]
fn two_thousand_cgroups_come_and_go_within_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let dev = RawLoop::new(64);
    let ttl = Duration::from_secs(3);
    let mut agent = Agent::start(
        dir.path(),
        &[
            "--top",
            &TOP.to_string(),
            "--cgroup-ttl",
            "3s",
            "--collect-interval",
            "1s",
        ],
    );
    let started_lines = agent.log_text().lines().count();
    let root = cgroup_root();
    let prefix = format!("fsprof-churn-{}-", std::process::id());
    let t0 = Instant::now();
    let (mut max_rss, mut max_labels) = (0, 0);
    for wave in 0..CGROUPS / 100 {
        for k in 0..100 {
            let name = format!("{prefix}{}", wave * 100 + k);
            let cg = Cgroup::new(&name);
            // One 4 KiB read each, at its own offset.
            cg.run(&dev.read_script(4096, 1, (wave * 100 + k) as u32));
        }
        // The cgroups of this wave are removed (dropped above); scrape.
        let text = agent.scrape();
        let l = labels(&text);
        max_labels = max_labels.max(l.len());
        assert!(l.len() <= TOP + 1, "wave {wave}: {} labels: {l:?}", l.len());
        max_rss = max_rss.max(rss_kib(agent.pid()));
    }
    let churn = t0.elapsed();
    assert!(
        std::fs::read_dir(&root)
            .unwrap()
            .flatten()
            .all(|e| !e.file_name().to_string_lossy().starts_with(&prefix)),
        "the test's cgroups are all removed"
    );
    // After the TTL (and a read), no series of a removed cgroup is left.
    std::thread::sleep(ttl + Duration::from_secs(3));
    let text = agent.scrape();
    let left: Vec<String> = labels(&text)
        .into_iter()
        .filter(|l| l.contains(&prefix))
        .collect();
    assert!(
        left.is_empty(),
        "series of removed cgroups after the TTL: {left:?}"
    );
    let s = samples(&text);
    let other = value(
        &s,
        "fsprof_op_latency_seconds_count",
        &[("cgroup", "other"), ("op", &format!("{}:read", dev.name()))],
    );
    let own: f64 = value(
        &s,
        "fsprof_op_latency_seconds_count",
        &[("op", &format!("{}:read", dev.name()))],
    );
    assert!(own <= CGROUPS as f64 && other <= own, "{own} {other}");
    assert_eq!(
        value(&s, "fsprof_agent_cgroups_unresolved_total", &[]),
        0.0,
        "every cgroup was named"
    );
    let known = value(&s, "fsprof_agent_cgroups", &[]);
    let live = value(&s, "fsprof_agent_cgroups_live", &[]);
    assert!(
        known <= live + 1.0,
        "gone cgroups are forgotten: {known} known, {live} live"
    );
    max_rss = max_rss.max(rss_kib(agent.pid()));
    assert!(max_rss < RSS_BOUND_KIB, "RSS {max_rss} KiB");
    // Healthy: nothing said since the start lines.
    let log = agent.log_text();
    assert_eq!(log.lines().count(), started_lines, "{log}");
    assert_eq!(agent.stop(libc::SIGTERM).code(), Some(0));
    eprintln!(
        "churn: {CGROUPS} cgroups in {churn:?}; max RSS {max_rss} KiB; max {max_labels} labels (top {TOP}); series of removed cgroups gone {ttl:?} after"
    );
}
