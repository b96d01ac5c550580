//! PNG figures go through `fsprof-render`, the renderer installed beside
//! fsprof (crates/fsprof-cli/src/png.rs): the pixels fsprof-plot's own
//! renderer gives, and one line of error, exit 2 and no file when the
//! renderer is missing, fails or is killed.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use fsprof_testkit::*;

/// fsprof on its own in a directory of `dir` (a hard link where the file
/// system allows, else a copy: the renderer is looked for beside the
/// executable's path, which a symbolic link would resolve away).
fn lone_fsprof(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let exe = bin.join("fsprof");
    if std::fs::hard_link(fsprof_path(), &exe).is_err() {
        std::fs::copy(fsprof_path(), &exe).unwrap();
    }
    exe
}

/// The same SVG drawn by fsprof-plot in this process and by `fsprof plot`
/// through the renderer, at a scale that is not the default: the same
/// bytes (the scale reaches the renderer unrounded).
#[test]
fn a_png_has_the_pixels_of_fsprof_plots_renderer() {
    let dir = tempfile::tempdir().unwrap();
    let p = record(dir.path(), "p.json", &[]);
    let plot = |out: &str, extra: &[&str]| {
        let o = fsprof()
            .current_dir(dir.path())
            .arg("plot")
            .arg(&p)
            .args(["--op", "read", "-o", out])
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success(), "{out}: {}", stderr(&o));
        std::fs::read(dir.path().join(out)).unwrap()
    };
    let svg = String::from_utf8(plot("f.svg", &[])).unwrap();
    let png = plot("f.png", &["--scale", "0.7"]);
    assert_eq!(png, fsprof_plot::svg_to_png(&svg, 0.7).unwrap());
}

/// Without the renderer beside it, with one that fails, and with one that
/// is killed, `plot -o F.png` says so in one line, exits 2 and leaves no
/// file; SVG still works without it.
#[test]
fn a_missing_failing_or_killed_renderer_is_one_line_of_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = record(dir.path(), "p.json", &[]);
    let exe = lone_fsprof(dir.path());
    let renderer = exe.with_file_name("fsprof-render");
    let plot = |out: &str| {
        std::process::Command::new(&exe)
            .current_dir(dir.path())
            .arg("plot")
            .arg(&p)
            .args(["--op", "read", "-o", out])
            .output()
            .unwrap()
    };
    let fake = |script: &str| {
        std::fs::write(&renderer, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(&renderer, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    let expect_error = |want: &str| {
        let o = plot("x.png");
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{want}: {e}");
        assert_eq!(e.lines().count(), 1, "{want}: not one line: {e}");
        assert!(
            e.starts_with("fsprof: ") && e.contains(want),
            "{e:?} lacks {want:?}"
        );
        assert!(
            !dir.path().join("x.png").exists(),
            "{want}: a file was left"
        );
    };
    let missing = format!("{} is missing", renderer.display());
    expect_error(&missing);
    fake("cat >/dev/null; echo 'fsprof-render: out of ink' >&2; exit 3");
    expect_error("fsprof: fsprof-render: out of ink");
    fake("kill -9 $$");
    expect_error("was killed by signal 9");
    fake("cat >/dev/null; printf 'GIF89a'");
    expect_error("wrote no PNG");
    let o = plot("x.svg");
    assert!(o.status.success(), "{}", stderr(&o));
}
