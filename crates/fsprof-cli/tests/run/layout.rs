//! `fsprof run --no-aslr`: the command (and what it runs) starts without
//! address-space layout randomization, so repeated runs get one memory
//! layout, and the profile says so; without it the kernel's randomization
//! is left alone.

use std::path::Path;

use fsprof_core::format::read_profile;
use fsprof_testkit::{fsprof, stderr};

/// The stack line of /proc/self/maps of a `grep` the command's shell runs
/// (a child of the command, so the setting must pass across fork and exec),
/// and the profile's `layout` setting.
fn stack_of(args: &[&str], dir: &Path) -> (String, Option<String>) {
    let profile = dir.join("p.json");
    let o = fsprof()
        .arg("run")
        .args(args)
        .args(["-q", "-f", "-o"])
        .arg(&profile)
        .args(["--", "sh", "-c", "grep -F '[stack]' /proc/self/maps; true"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let p = read_profile(&profile).unwrap();
    let stack = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(stack.contains("[stack]"), "{stack}");
    (stack, p.meta.settings.get("layout").cloned())
}

#[test]
fn no_aslr_gives_every_run_one_layout() {
    let d = tempfile::tempdir().unwrap();
    let (first, said) = stack_of(&["--no-aslr"], d.path());
    let (second, _) = stack_of(&["--no-aslr"], d.path());
    assert_eq!(
        first, second,
        "two runs with --no-aslr had different stacks"
    );
    assert!(said.unwrap().starts_with("fixed (--no-aslr"));
    // Without it, the kernel randomizes (about 2^22 stack places): three
    // runs all alike would mean the option is not what made them so.
    let runs: Vec<(String, Option<String>)> = (0..3).map(|_| stack_of(&[], d.path())).collect();
    assert!(runs.iter().all(|(_, said)| said.is_none()));
    assert!(
        runs.iter().any(|(s, _)| *s != runs[0].0),
        "three runs without --no-aslr had one stack: {runs:?}"
    );
}
