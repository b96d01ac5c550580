//! Puts the git commit fsprof is built from into `FSPROF_GIT_COMMIT` for
//! `fsprof --version` ("unknown" outside a git checkout: a source tarball,
//! a crate package). Only the commit: whether the work tree differed from
//! it cannot be kept current without re-running on every edit.
//!
//! Also links the unwinder into the `fsprof` binary from `libgcc_eh.a`
//! instead of loading `libgcc_s.so.1` at start-up: that library's
//! constructor detects CPU features with CPUID instructions, each a trap
//! to the hypervisor in a VM, and loading it cost ~0.2 ms of every
//! `fsprof run` (docs/benchmarks.md, "Start-up cost"). Unwinding (panics,
//! backtraces) works the same with either.

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
    static_unwinder();
}

/// On glibc targets rustc links `-lgcc_s` for the unwinder. Linking every
/// object of `libgcc_eh.a` first defines the same `_Unwind_*` functions in
/// the binary, so `--as-needed` (rustc's default) leaves libgcc_s out.
/// Skipped where rustc links libgcc_eh itself (`crt-static`) or the C
/// compiler has no libgcc_eh.a (then libgcc_s is loaded as before);
/// `FSPROF_STATIC_UNWINDER` tells the tests which happened.
fn static_unwinder() {
    println!("cargo:rerun-if-env-changed=CC");
    let env = |k: &str| std::env::var(k).unwrap_or_default();
    let gnu = env("CARGO_CFG_TARGET_OS") == "linux" && env("CARGO_CFG_TARGET_ENV") == "gnu";
    let crt_static = env("CARGO_CFG_TARGET_FEATURE")
        .split(',')
        .any(|f| f == "crt-static");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let archive = Command::new(cc)
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        // A compiler that does not know the file prints the bare name.
        .filter(|p| std::path::Path::new(p).is_absolute() && std::path::Path::new(p).is_file());
    let Some(archive) = archive.filter(|_| gnu && !crt_static) else {
        println!("cargo:rustc-env=FSPROF_STATIC_UNWINDER=0");
        return;
    };
    println!("cargo:rustc-link-arg-bins=-Wl,--whole-archive");
    println!("cargo:rustc-link-arg-bins={archive}");
    println!("cargo:rustc-link-arg-bins=-Wl,--no-whole-archive");
    println!("cargo:rustc-env=FSPROF_STATIC_UNWINDER=1");
}
