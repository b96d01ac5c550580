//! `fsprof plot` and `fsprof report --format html` from the command line:
//! real profiles in, files out, and bad input refused with one line, exit 2
//! and no file left behind.

use std::path::Path;

use fsprof_testkit::*;

fn no_stray_files(dir: &Path, keep: &[&str]) {
    let names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !keep.contains(&n.as_str()))
        .collect();
    assert!(names.is_empty(), "left behind: {names:?}");
}

/// Each `(args, expect)`: `fsprof ARGS...` in `dir` exits 2 with one line
/// of error that says `expect`; a failing case is named by its arguments.
fn fails(dir: &Path, cases: &[(&[&str], &str)]) {
    for &(args, expect) in cases {
        let o = fsprof().current_dir(dir).args(args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert_eq!(e.lines().count(), 1, "{args:?}: not one line: {e}");
        assert!(e.starts_with("fsprof: ") || e.starts_with("error: "), "{e}");
        assert!(e.contains(expect), "{args:?}: {e:?} lacks {expect:?}");
    }
}

/// Each kind of plot, in each format.
const FIGURES: [(&str, &str); 4] = [
    ("count", "c.svg"),
    ("delay", "d.png"),
    ("timeline", "t.svg"),
    ("timeline", "t.png"),
];

#[test]
fn plots_svg_and_png_from_a_real_profile() {
    let dir = tempfile::tempdir().unwrap();
    let p = record(dir.path(), "p.json", &["--interval", "50ms"]);
    let p = p.to_str().unwrap();
    for (kind, file) in FIGURES {
        let o = fsprof()
            .current_dir(dir.path())
            .args(["plot", p, "--op", "read", "--kind", kind, "-o", file])
            .output()
            .unwrap();
        assert!(o.status.success(), "{kind}: {}", stderr(&o));
        let bytes = std::fs::read(dir.path().join(file)).unwrap();
        if file.ends_with(".png") {
            assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        } else {
            let s = String::from_utf8(bytes).unwrap();
            assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
            assert!(s.contains("user/read"));
        }
    }
    // Same input, same bytes: figures can be committed next to a paper.
    let again = dir.path().join("c2.svg");
    let o = fsprof()
        .args(["plot", p, "--op", "read", "-o"])
        .arg(&again)
        .output()
        .unwrap();
    assert!(o.status.success());
    assert_eq!(
        std::fs::read(&again).unwrap(),
        std::fs::read(dir.path().join("c.svg")).unwrap()
    );
}

#[test]
fn bad_plot_requests_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let p = record(dir.path(), "p.json", &[]);
    let p = p.to_str().unwrap();
    fails(
        dir.path(),
        &[
            (
                &["plot", p, "--op", "raed", "-o", "x.svg"],
                "no op named \"raed\"",
            ),
            (
                &["plot", p, "--op", "read", "--layer", "block", "-o", "x.svg"],
                "no layer named \"block\"",
            ),
            (
                &[
                    "plot", p, "--op", "read", "--kind", "timeline", "-o", "x.png",
                ],
                "has no intervals",
            ),
            (
                &["plot", p, "--op", "read", "-o", "x.pdf"],
                "*.svg or *.png",
            ),
            (
                &["plot", p, "--op", "read", "-o", "missing-dir/x.svg"],
                "cannot write missing-dir/x.svg",
            ),
            (
                &["plot", "nope.json", "--op", "read", "-o", "x.svg"],
                "nope.json",
            ),
            // Not a directory entry we could write: /proc refuses new files.
            (
                &["plot", p, "--op", "read", "-o", "/proc/fsprof-x.svg"],
                "cannot write",
            ),
        ],
    );
    no_stray_files(dir.path(), &["p.json"]);

    std::fs::write(dir.path().join("x.svg"), "mine").unwrap();
    fails(
        dir.path(),
        &[(
            &["plot", p, "--op", "read", "-o", "x.svg"],
            "already exists",
        )],
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("x.svg")).unwrap(),
        "mine"
    );
}

#[test]
fn html_report_needs_an_output_file_and_checks_names() {
    let dir = tempfile::tempdir().unwrap();
    let p = record(dir.path(), "p.json", &[]);
    let p = p.to_str().unwrap();
    let cases: [(&[&str], &str); 3] = [
        (&["report", p, "--format", "html"], "-o report.html"),
        (
            &[
                "report", p, "--format", "html", "--op", "raed", "-o", "r.html",
            ],
            "no op named",
        ),
        (
            &["report", p, "--format", "html", "-o", "no/such/dir/r.html"],
            "cannot write",
        ),
    ];
    fails(dir.path(), &cases);
    no_stray_files(dir.path(), &["p.json"]);
    let html = html_report(Path::new(p), &dir.path().join("r.html"));
    assert!(html.starts_with("<!DOCTYPE html>") && html.trim_end().ends_with("</html>"));
    // Text reports can go to a file too.
    let o = fsprof()
        .current_dir(dir.path())
        .args(["report", p, "--format", "csv", "-o", "r.csv"])
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(std::fs::read_to_string(dir.path().join("r.csv"))
        .unwrap()
        .contains("read"));
}
