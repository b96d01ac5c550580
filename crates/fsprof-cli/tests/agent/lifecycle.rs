//! `fsprof agent` as a service: SIGTERM detaches every program and map,
//! SIGKILL leaves nothing behind either and a restart starts clean, SIGHUP
//! applies the configuration file (and keeps the settings in force when
//! the file is bad), counters never go down within a process, and the
//! systemd unit in the repository verifies and grants enough to run.

use std::time::Duration;

use crate::kit::*;
use fsprof_testkit::*;

/// Every counter-like sample (buckets, counts, sums, error totals) of
/// `before` that is still exported in `after` is at least what it was.
fn assert_monotonic(before: &str, after: &str) {
    let (a, b) = (samples(before), samples(after));
    let mut compared = 0;
    for (k, v) in &a {
        let counter = ["_bucket", "_count", "_sum", "_total"]
            .iter()
            .any(|s| k.0.ends_with(s));
        if let (true, Some(w)) = (counter, b.get(k)) {
            assert!(w >= v, "{k:?} went down: {v} -> {w}");
            compared += 1;
        }
    }
    assert!(compared > 10, "only {compared} samples compared");
}

#[test]
#[ignore = "needs root"]
fn sigterm_detaches_everything_sigkill_leaves_nothing_and_a_restart_is_clean() {
    let dir = tempfile::tempdir().unwrap();
    let dev = RawLoop::new(16);
    let cg = Cgroup::new(&format!("fsprof-life-{}", std::process::id()));
    let mut a = Agent::start(dir.path(), &["--collect-interval", "1s", "--top", "1000"]);
    let pid = a.pid();
    assert!(
        !bpf_objects_of(pid).is_empty(),
        "the check sees the agent's objects"
    );
    cg.run(&dev.read_script(4096, 50, 0));
    let first = a.scrape();
    cg.run(&dev.read_script(4096, 70, 100));
    // Scrapes less than a second apart share one read of the maps.
    std::thread::sleep(fsprof_agent::collector::FRESH);
    let second = a.scrape();
    assert_monotonic(&first, &second);
    let s = samples(&second);
    let reads = value(
        &s,
        "fsprof_op_latency_seconds_count",
        &[
            ("cgroup", &cg.label),
            ("op", &format!("{}:read", dev.name())),
        ],
    );
    assert_eq!(reads, 120.0, "{second}");

    let st = a.stop(libc::SIGTERM);
    assert_eq!(st.code(), Some(0), "{}", a.log_text());
    assert_eq!(
        wait_bpf_gone(pid),
        Vec::<String>::new(),
        "left after SIGTERM"
    );
    assert!(
        a.log_text().contains("stopped (signal 15)"),
        "{}",
        a.log_text()
    );

    let mut b = Agent::start(dir.path(), &[]);
    let pid = b.pid();
    b.stop(libc::SIGKILL);
    assert_eq!(
        wait_bpf_gone(pid),
        Vec::<String>::new(),
        "left after SIGKILL"
    );

    // A new process counts from zero: the old series are not there.
    let c = Agent::start(dir.path(), &[]);
    let s = samples(&c.scrape());
    assert_eq!(
        value(
            &s,
            "fsprof_op_latency_seconds_count",
            &[("cgroup", &cg.label)]
        ),
        0.0
    );
    drop(c);
}

#[test]
#[ignore = "needs root"]
fn sighup_applies_the_file_and_a_bad_file_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("agent.toml");
    std::fs::write(&conf, "top = 5\ncgroup-ttl = \"1m\"\n").unwrap();
    let conf_s = conf.to_str().unwrap();
    let mut a = Agent::start(dir.path(), &["--config", conf_s]);
    assert!(
        a.log_text()
            .contains("(top 5, cgroups gone 1m ago forgotten)"),
        "{}",
        a.log_text()
    );

    std::fs::write(
        &conf,
        "top = 7\ncgroup-ttl = \"1m\"\ncgroup-labels = \"path\"\n",
    )
    .unwrap();
    a.signal(libc::SIGHUP);
    let line = a.wait_for_line("configuration reloaded", Duration::from_secs(30));
    assert!(line.contains("changed: labels, bounds"), "{line}");

    std::fs::write(&conf, "tpo = 7\n").unwrap();
    a.signal(libc::SIGHUP);
    let line = a.wait_for_line("reload refused", Duration::from_secs(30));
    assert!(line.contains("unknown field `tpo`"), "{line}");
    // Still serving, with the settings it had.
    assert!(a.scrape().contains("fsprof_agent_cgroups "));
    assert_eq!(a.stop(libc::SIGTERM).code(), Some(0));
}

/// The unit file verifies, and the agent runs with exactly the
/// capabilities it keeps and no new privileges, as systemd starts it.
#[test]
#[ignore = "needs root, systemd-analyze, setpriv"]
fn the_systemd_unit_verifies_and_its_capabilities_suffice() {
    let analyze = need_program("systemd-analyze", "systemd");
    let setpriv = need_program("setpriv", "util-linux");
    let dir = tempfile::tempdir().unwrap();
    let unit = std::fs::read_to_string(workspace().join("dist/fsprof-agent.service")).unwrap();
    let exe = fsprof_path();
    let verify = |text: &str| {
        let p = dir.path().join("fsprof-agent.service");
        std::fs::write(
            &p,
            text.replace("/usr/local/bin/fsprof", exe.to_str().unwrap()),
        )
        .unwrap();
        std::process::Command::new(&analyze)
            .arg("verify")
            .arg(&p)
            .output()
            .unwrap()
    };
    let o = verify(&unit);
    assert!(o.status.success() && o.stderr.is_empty(), "{}", stderr(&o));
    let o = verify(&unit.replace("Type=notify", "Type=notfy"));
    assert!(
        !o.status.success() || !o.stderr.is_empty(),
        "a broken unit passed"
    );

    let caps = unit
        .lines()
        .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
        .unwrap();
    let bset: Vec<String> = caps
        .split_whitespace()
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
        .collect();
    let o = std::process::Command::new(setpriv)
        .arg(format!("--bounding-set=-all,{}", bset.join(",")))
        .arg("--no-new-privs")
        .arg(exe)
        .args([
            "agent",
            "--serve-metrics",
            "127.0.0.1:0",
            "--duration",
            "2s",
        ])
        .output()
        .unwrap();
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("serving metrics on") && err.contains("programs detached"),
        "{err}"
    );
}
