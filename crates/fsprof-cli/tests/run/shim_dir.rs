//! The directory `fsprof run` installs its preload shim into, under
//! $TMPDIR: a name that any local user can take first, on a file system
//! that can be full. Neither may stop root's run, make root write into
//! another user's directory, or leave a partial file behind.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use fsprof_testkit::{count, fsprof, fsprof_path, load, need_program, need_root, stderr};

const NOBODY: u32 = 65534;

/// A shared temporary directory (mode 1777, like /tmp) where the user
/// nobody made `fsprof-0` first, a fallback-looking `fsprof-0-aaaaaa`,
/// and a symlink `fsprof-0-bbbbbb` to a directory of theirs.
fn planted(base: &Path) {
    std::fs::set_permissions(base, std::fs::Permissions::from_mode(0o1777)).unwrap();
    for (name, mode) in [
        ("fsprof-0", 0o777),
        ("fsprof-0-aaaaaa", 0o711),
        ("theirs", 0o777),
    ] {
        let d = base.join(name);
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).unwrap();
        std::os::unix::fs::chown(&d, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    std::os::unix::fs::symlink(base.join("theirs"), base.join("fsprof-0-bbbbbb")).unwrap();
    std::os::unix::fs::lchown(base.join("fsprof-0-bbbbbb"), Some(NOBODY), Some(NOBODY)).unwrap();
}

fn root_files_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.metadata().is_ok_and(|m| m.uid() == 0))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// Root's directories of the shim under `base` (the planted ones aside).
fn our_dirs(base: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(base)
        .unwrap()
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with("fsprof-0")
                && e.path()
                    .symlink_metadata()
                    .is_ok_and(|m| m.is_dir() && m.uid() == 0)
        })
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

#[test]
#[ignore = "needs root"]
fn a_shim_directory_planted_by_another_user_is_passed_by() {
    need_root("plants a directory owned by another user (nobody)");
    let base = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    planted(base.path());
    for k in 0..2 {
        let profile = out.path().join(format!("p{k}.json"));
        let o = fsprof()
            .args(["run", "-q", "-o"])
            .arg(&profile)
            .args(["--", "cat", "/etc/hostname"])
            .env("TMPDIR", base.path())
            .output()
            .unwrap();
        // It was exit 2: "... is not a private directory owned by uid 0".
        assert!(o.status.success(), "run {k}: {}", stderr(&o));
        assert!(count(&load(&profile), "read") >= 1, "cat was not profiled");
    }
    for theirs in ["fsprof-0", "fsprof-0-aaaaaa", "theirs"] {
        let left = root_files_in(&base.path().join(theirs));
        assert!(left.is_empty(), "root wrote {left:?} into {theirs}");
    }
    // One directory of root's own, made private, and found again by the
    // second run.
    let ours = our_dirs(base.path());
    assert_eq!(ours.len(), 1, "{ours:?}");
    let m = std::fs::metadata(&ours[0]).unwrap();
    assert_eq!(m.mode() & 0o7777, 0o711, "{}", ours[0].display());
    let shims: Vec<_> = std::fs::read_dir(&ours[0]).unwrap().flatten().collect();
    assert!(
        shims
            .iter()
            .any(|e| e.file_name().to_string_lossy().ends_with(".so")),
        "no shim in {}",
        ours[0].display()
    );
}

/// `fsprof run` with $TMPDIR on a 64 KiB tmpfs, too small for the shim,
/// in a private mount namespace: a clear refusal, and nothing left in the
/// shim's directory.
#[test]
#[ignore = "needs root, unshare"]
fn a_full_tmpdir_leaves_no_partial_shim() {
    need_root("mounts a small tmpfs in a private namespace");
    need_program("unshare", "util-linux");
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
set -e
mkdir "$1/tmp"
mount -t tmpfs -o size=64k fsprof-test "$1/tmp"
st=0
TMPDIR="$1/tmp" "$2" run -q -o "$1/p.json" -- true 2>"$1/err" || st=$?
echo "$st" > "$1/status"
ls -A "$1/tmp"/fsprof-0 > "$1/left"
"#;
    let o = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", script, "sh"])
        .arg(dir.path())
        .arg(fsprof_path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
    let err = read("err");
    assert_eq!(read("status").trim(), "2", "{err}");
    assert!(
        err.contains("cannot install the preload shim") && err.contains("No space left"),
        "{err}"
    );
    assert_eq!(
        read("left").trim(),
        "",
        "left behind in the shim's directory"
    );
}
