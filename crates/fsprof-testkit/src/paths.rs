//! Where the workspace and cargo's target directory are, wherever the
//! tests run from and wherever `CARGO_TARGET_DIR` points.

use std::path::{Path, PathBuf};

/// The workspace root (this crate lives in `crates/fsprof-testkit`).
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root")
}

/// Cargo's target directory for this build: the nearest directory above
/// the running test binary that holds cargo's `.rustc_info.json` (written
/// in every target directory; `CACHEDIR.TAG` only in the default one).
/// Derived from the binary rather than assumed to be `./target`, so
/// `CARGO_TARGET_DIR` and `build.target-dir` are respected.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.ancestors()
        .skip(1)
        .find(|d| d.join(".rustc_info.json").is_file())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| panic!("no cargo target directory above {}", exe.display()))
}

/// A scratch directory and its canonical path: traces record resolved
/// paths, and /tmp may be reached through a symbolic link.
pub fn canonical_tempdir() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().expect("a scratch directory");
    let base = std::fs::canonicalize(d.path()).expect("its canonical path");
    (d, base)
}

/// A scratch directory on the disk the build is on: workloads that miss
/// the page cache or use O_DIRECT need a real block device, which /tmp is
/// not when it is a tmpfs.
pub fn disk_tempdir() -> tempfile::TempDir {
    let base = target_dir().join("tmp");
    std::fs::create_dir_all(&base).expect("creating <target>/tmp");
    tempfile::tempdir_in(base).expect("a scratch directory under <target>/tmp")
}
