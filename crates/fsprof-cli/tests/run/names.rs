//! The executable each process is named by: the path it was executed by
//! when a shell or make started it by that path (known without reading
//! /proc, which costs a new process 5-10 µs), else what the kernel says it
//! runs (/proc/self/exe: a script's interpreter, a program started under
//! another argv[0]).

use fsprof_testkit::*;

#[test]
fn a_process_is_named_by_the_path_it_was_executed_by() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("mycat");
    std::os::unix::fs::symlink("/bin/cat", &link).unwrap();
    let script = dir.path().join("script");
    std::fs::write(&script, "#!/bin/sh\ncat /etc/hostname >/dev/null\n").unwrap();
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(&script, mode).unwrap();
    let shell = format!(
        "{l} /etc/hostname >/dev/null; (exec -a other {l} /etc/hostname >/dev/null); {s}",
        l = link.display(),
        s = script.display()
    );
    let (out, path) = run_profiled(dir.path(), &["bash", "-c", &shell]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let p = load(&path);
    let named = |argv0: &str| {
        let found: Vec<&str> = p
            .processes
            .iter()
            .filter(|pr| pr.argv.first().is_some_and(|a| a == argv0))
            .map(|pr| pr.exe.as_str())
            .collect();
        assert_eq!(found.len(), 1, "{argv0}: {found:?}");
        found[0]
    };
    let real = std::fs::canonicalize("/bin/cat").unwrap();
    // Started by its path: the path, the link not followed.
    assert_eq!(named(link.to_str().unwrap()), link.to_str().unwrap());
    // argv[0] of the program's choosing: what the kernel runs.
    assert_eq!(named("other"), real.to_str().unwrap());
    // A script: its interpreter, not the script.
    let sh = std::fs::canonicalize("/bin/sh").unwrap();
    assert_eq!(named("/bin/sh"), sh.to_str().unwrap());
}
