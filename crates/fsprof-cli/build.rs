//! Puts the git commit fsprof is built from into `FSPROF_GIT_COMMIT` for
//! `fsprof --version` ("unknown" outside a git checkout: a source tarball,
//! a crate package). Only the commit: whether the work tree differed from
//! it cannot be kept current without re-running on every edit.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let o = Command::new("git").args(args).output().ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    // Re-run when HEAD moves: a commit changes the branch's ref (loose or
    // packed), a checkout changes HEAD. `--git-path` finds them in a
    // worktree too.
    let mut watch = vec!["HEAD".to_string(), "packed-refs".to_string()];
    watch.extend(git(&["symbolic-ref", "-q", "HEAD"]));
    for path in &watch {
        // A path that does not exist would make cargo re-run this (and
        // rebuild fsprof) on every build.
        let found =
            git(&["rev-parse", "--git-path", path]).filter(|p| std::path::Path::new(p).exists());
        if let Some(p) = found {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=FSPROF_GIT_COMMIT={commit}");
}
