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

/// Rewrites its argument in place (as setproctitle does), then forks: the
/// child is the same image, named as it was executed, whatever the
/// program did to its argv after start-up (shim/pool.c copies the names
/// the constructor only lent at the first fork, from the parent's header).
const REWRITES_ARGV_THEN_FORKS: &str = r#"
#include <fcntl.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void a_call(void)
{
    char b[8];
    int fd = open("/etc/hostname", O_RDONLY);
    read(fd, b, sizeof b);
    close(fd);
}

int main(int argc, char **argv)
{
    memset(argv[1], 'X', strlen(argv[1]));
    a_call();
    for (int generation = 0; generation < 2; generation++) {
        pid_t pid = fork();
        if (pid > 0) {
            int st;
            waitpid(pid, &st, 0);
            return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
        }
        a_call();
    }
    return 0;
}
"#;

#[test]
fn a_forked_child_is_named_as_its_image_was_executed_after_argv_is_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let prog = compile_source("rewrites_argv", REWRITES_ARGV_THEN_FORKS, dir.path(), &[]);
    let prog = prog.to_str().unwrap();
    let (out, path) = run_profiled(dir.path(), &[prog, "original-argument"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let p = load(&path);
    let named: Vec<(&Vec<String>, &str)> = p
        .processes
        .iter()
        .filter(|pr| pr.exe == prog)
        .map(|pr| (&pr.argv, pr.exe.as_str()))
        .collect();
    assert_eq!(
        named.len(),
        3,
        "the image, its child and grandchild: {named:?}"
    );
    for (argv, _) in &named {
        assert_eq!(argv.as_slice(), [prog, "original-argument"], "{named:?}");
    }
}
