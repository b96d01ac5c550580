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
        (&["--help"][..], "`compare` exits 1 when an op changed"),
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
