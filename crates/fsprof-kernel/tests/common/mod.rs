//! Shared by the kernel-facing tests.

/// Panics (fails) when this test cannot run: eBPF needs root. Under CI the
/// runner is root, so this never hides a missing feature there.
pub fn require_root(what: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{what}: this test needs root (eBPF) and CI=true, so it must not be skipped");
    }
    eprintln!("SKIPPED {what}: needs root for eBPF (set CI=true to make this a failure)");
    false
}
