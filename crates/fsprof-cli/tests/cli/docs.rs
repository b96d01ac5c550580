//! What fsprof says about itself: `--version` with the commit it was built
//! from, shell completions and man pages generated from the same clap
//! definitions as `--help`.

use std::process::Command;

use fsprof_testkit::*;

#[test]
fn version_names_the_commit() {
    let o = fsprof().arg("--version").output().unwrap();
    assert!(o.status.success());
    // The ground truth is git's, asked here (not through fsprof's build).
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(workspace())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| stdout(&o).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    assert_eq!(
        stdout(&o),
        format!("fsprof {} (commit {head})\n", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn completions_cover_every_command_and_bash_parses_them() {
    let o = fsprof().args(["completions", "bash"]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let script = stdout(&o);
    for word in [
        "kernel",
        "report",
        "compare",
        "--pid",
        "--system-wide",
        "completions",
        "man",
    ] {
        assert!(script.contains(word), "bash completion lacks {word}");
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fsprof.bash");
    std::fs::write(&file, &script).unwrap();
    let st = Command::new("bash").arg("-n").arg(&file).status().unwrap();
    assert!(st.success(), "bash -n rejects the completion script");
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let o = fsprof().args(["completions", shell]).output().unwrap();
        assert!(
            o.status.success() && stdout(&o).contains("kernel"),
            "{shell}"
        );
    }
    let o = fsprof().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn man_pages_for_fsprof_and_each_command() {
    let o = fsprof().arg("man").output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let page = stdout(&o);
    assert!(
        page.contains(".TH fsprof 1"),
        "{}",
        &page[..200.min(page.len())]
    );
    assert!(
        page.contains("fsprof\\-kernel(1)"),
        "no SEE ALSO of the commands"
    );
    let dir = man_pages();
    for name in [
        "fsprof.1",
        "fsprof-run.1",
        "fsprof-kernel.1",
        "fsprof-report.1",
    ] {
        let text = std::fs::read_to_string(dir.path().join(name)).unwrap();
        assert!(text.starts_with(".ie"), "{name}");
    }
    let kernel = std::fs::read_to_string(dir.path().join("fsprof-kernel.1")).unwrap();
    assert!(kernel.contains("\\-\\-pid"), "{kernel}");
}

/// The kernel command's test hooks (`--require-tracepoint`,
/// `--perf-tracepoints`: tests reach the missing-tracepoint error and the
/// perf fallback with them) are not offered to users: not in `--help`,
/// the man page or the completions.
#[test]
fn test_hooks_stay_out_of_help_man_pages_and_completions() {
    let help = stdout(&succeeds(fsprof().args(["kernel", "--help"])));
    let man = std::fs::read_to_string(man_pages().path().join("fsprof-kernel.1")).unwrap();
    assert!(help.contains("--pid") && man.contains("\\-\\-pid"));
    for hook in ["require-tracepoint", "perf-tracepoints"] {
        assert!(!help.contains(hook), "kernel --help offers --{hook}");
        assert!(
            !man.contains(&hook.replace('-', "\\-")),
            "the kernel man page offers --{hook}"
        );
    }
    // clap_complete offers hidden arguments unless fsprof leaves them out.
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = stdout(&succeeds(fsprof().args(["completions", shell])));
        // The kernel command's own options are still there.
        assert!(
            script.contains("system-wide") && script.contains("probe-report"),
            "{shell}"
        );
        for hook in ["require-tracepoint", "perf-tracepoints"] {
            assert!(
                !script.contains(hook),
                "the {shell} completion offers --{hook}"
            );
        }
    }
}

/// `fsprof man --dir DIR` into a new directory; it must succeed.
fn man_pages() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    succeeds(fsprof().args(["man", "--dir"]).arg(dir.path()));
    dir
}

/// The exit statuses (130 after Ctrl-C above all, which a script tests for)
/// are in `--help` and the man pages, not only in the README.
#[test]
fn exit_statuses_are_documented_in_help_and_man_pages() {
    for (args, want) in [
        (&["--help"][..], "130 after Ctrl-C"),
        (&["run", "--help"][..], "130 after Ctrl-C"),
        (&["kernel", "--help"][..], "130 after Ctrl-C"),
        (
            &["--help"][..],
            "`compare` exits 1 when an op changed for the slower",
        ),
        // How to take repeated runs (issue 24: sides taken one after the
        // other put the machine's drift between them).
        (
            &["compare", "--help"][..],
            "Take each side's runs alternately, A B A B A B",
        ),
        // How p50/p99 are estimated (issue 9).
        (
            &["report", "--help"][..],
            "interpolated geometrically inside the bucket that holds it and clamped",
        ),
    ] {
        let o = fsprof().args(args).output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        let text = stdout(&o).split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(text.contains(want), "{args:?} lacks {want:?}: {text}");
    }
    let dir = man_pages();
    for name in ["fsprof.1", "fsprof-run.1", "fsprof-kernel.1"] {
        let page = std::fs::read_to_string(dir.path().join(name)).unwrap();
        assert!(page.contains("130 after Ctrl\\-C"), "{name}");
    }
}

/// `fsprof SUB --help`'s text, which must succeed.
fn help(sub: &[&str]) -> String {
    let o = succeeds(fsprof().args(sub).arg("--help"));
    stdout(&o)
}

/// One vocabulary: every command that prints a report after its work has
/// `-q, --quiet`; the layer filter is `--layer` wherever it appears (with
/// `--layers` accepted, not shown); the directory a measurement runs in
/// is a positional DIR (the old `--dir` read but not shown).
#[test]
fn every_command_speaks_one_vocabulary() {
    for sub in [
        "run", "kernel", "trace", "replay", "bench", "discover", "mount",
    ] {
        assert!(help(&[sub]).contains("-q, --quiet"), "{sub} lacks --quiet");
    }
    for sub in ["report", "plot", "kernel"] {
        let h = help(&[sub]);
        assert!(h.contains("--layer <"), "{sub}: {h}");
        assert!(!h.contains("--layers <"), "{sub}: {h}");
    }
    for sub in [&["bench", "sprite"][..], &["calibrate"], &["discover", "."]] {
        let h = help(&sub[..1]);
        assert!(h.contains("[DIR]") || h.contains("<DIR>"), "{sub:?}: {h}");
        assert!(!h.contains("--dir "), "{sub:?} shows --dir: {h}");
    }
    // The hidden spelling still parses, and both name the same directory.
    for flag in [&["--dir"][..], &[]] {
        let o = fsprof()
            .args(["bench", "sprite"])
            .args(flag)
            .arg("/nonexistent/fsprof-dir")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{flag:?}");
        assert!(
            stderr(&o).contains("/nonexistent/fsprof-dir"),
            "{}",
            stderr(&o)
        );
    }
}

/// A profile of `cat /etc/hostname` in `dir`.
fn small_profile(dir: &std::path::Path) -> std::path::PathBuf {
    let p = dir.join("p.json");
    succeeds(
        fsprof()
            .args(["run", "-q", "-o"])
            .arg(&p)
            .args(["--", "cat", "/etc/hostname"]),
    );
    p
}

#[test]
fn layer_and_layers_select_the_same_ops() {
    let d = tempfile::tempdir().unwrap();
    let p = small_profile(d.path());
    let report = |flag: &str| {
        let o = succeeds(
            fsprof()
                .arg("report")
                .arg(&p)
                .args(["--format", "json", flag, "user"]),
        );
        stdout(&o)
    };
    assert_eq!(report("--layer"), report("--layers"));
    let none = succeeds(fsprof().arg("report").arg(&p).args([
        "--format",
        "json",
        "--layer",
        "user-nonfile",
    ]));
    assert_ne!(stdout(&none), report("--layer"), "the filter filters");
}

/// `--format json` wherever a result is printed, parsed here.
#[test]
fn results_print_as_json_on_request() {
    let d = tempfile::tempdir().unwrap();
    let p = small_profile(d.path());
    let o = succeeds(fsprof().args(["check", "--format", "json"]).arg(&p));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[0]["ok"], true, "{v}");
    assert!(v[0]["ops_checked"].as_u64().unwrap() > 0, "{v}");
    let o = succeeds(fsprof().args(["kernel", "--probe-report", "--format", "json"]));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v.as_array().unwrap();
    assert!(rows.iter().any(|r| r["what"] == "privileges"), "{v}");
    assert!(rows.iter().all(|r| r["usable"].is_boolean()), "{v}");
    // replay's timing report: the JSON document --timing writes, on stdout.
    let t = d.path().join("t.trace");
    succeeds(
        fsprof()
            .args(["trace", "-q", "-o"])
            .arg(&t)
            .args(["--", "cat", "/etc/hostname"]),
    );
    let r = d.path().join("t.replay");
    succeeds(fsprof().arg("compile").arg(&t).arg("-o").arg(&r));
    // Each replay under a fresh root, which --prepare fills.
    let replay = |args: &[&str]| {
        let root = tempfile::tempdir().unwrap();
        let mut c = fsprof();
        c.arg("replay").arg(&r).arg("--root").arg(root.path());
        succeeds(c.arg("--prepare").args(args))
    };
    let timing = d.path().join("timing.json");
    let o = replay(&["--format", "json", "--timing", timing.to_str().unwrap()]);
    let printed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let stored: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&timing).unwrap()).unwrap();
    assert_eq!(printed, stored);
    assert!(!stderr(&o).contains("fidelity"), "{}", stderr(&o));
    // -q: no timing report at all.
    let o = replay(&["-q"]);
    assert!(
        o.stdout.is_empty() && !stderr(&o).contains("fidelity"),
        "{}",
        stderr(&o)
    );
}

/// `-o FILE` is "write to FILE instead of standard output" in report as in
/// bench, FILE's extension picking the format unless --format does.
#[test]
fn output_means_the_same_in_bench_as_in_report() {
    let d = tempfile::tempdir().unwrap();
    let p = small_profile(d.path());
    let csv = d.path().join("r.csv");
    let o = succeeds(fsprof().arg("report").arg(&p).arg("-o").arg(&csv));
    assert!(o.stdout.is_empty());
    // CSV: several lines, every one with the same number of fields.
    let is_csv = |text: &str| {
        let fields: Vec<usize> = text.lines().map(|l| l.split(',').count()).collect();
        fields.len() > 1 && fields[0] > 3 && fields.iter().all(|&n| n == fields[0])
    };
    let read = |f: &std::path::Path| std::fs::read_to_string(f).unwrap();
    assert!(is_csv(&read(&csv)), "report -o r.csv: {}", read(&csv));
    let scratch = tempfile::tempdir_in("/dev/shm").unwrap();
    let bench = |args: &[&str]| {
        let mut c = fsprof();
        c.args(["bench", "pread"]).arg(scratch.path());
        c.args(["--ops", "200", "--runs", "2", "--warmup", "0", "-f"]);
        succeeds(c.args(args))
    };
    let bcsv = d.path().join("b.csv");
    let o = bench(&["-o", bcsv.to_str().unwrap()]);
    assert!(o.stdout.is_empty(), "{}", stdout(&o));
    assert!(is_csv(&read(&bcsv)), "bench -o b.csv: {}", read(&bcsv));
    assert!(
        stderr(&o).contains("± 95% CI"),
        "the table on stderr: {}",
        stderr(&o)
    );
    // --format wins over the extension, and -q keeps stderr to the file line.
    let o = bench(&["-q", "--format", "json", "-o", bcsv.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&bcsv).unwrap()).unwrap();
    assert_eq!(v["bench"]["format"], "fsprof-bench");
    assert!(!stderr(&o).contains("± 95% CI"), "{}", stderr(&o));
    // Without -o, the result is on standard output.
    let o = bench(&["--format", "csv"]);
    assert!(is_csv(&stdout(&o)), "{}", stdout(&o));
}

/// `trace --data` says what each level keeps, reads' bytes included.
#[test]
fn trace_data_help_says_full_keeps_reads() {
    let h = help(&["trace"]);
    assert!(h.contains("every read"), "{h}");
}
