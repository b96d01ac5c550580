//! Ctrl-C and termination requests reach the profiled command, and fsprof
//! survives them long enough to write the profile.

use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use fsprof_testkit::*;

fn wait_for(path: &std::path::Path, pattern: &str) {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(10) {
        if std::fs::read_to_string(path).is_ok_and(|s| s.contains(pattern)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("the profiled command never started");
}

fn start(dir: &std::path::Path, group: bool) -> (std::process::Child, std::path::PathBuf) {
    let out = dir.join("p.json");
    let marker = dir.join("started");
    let script = format!(
        "cat /etc/hostname >/dev/null; echo go > {}; exec sleep 30",
        marker.display()
    );
    let mut cmd = fsprof();
    cmd.args(["run", "-q", "-o"])
        .arg(&out)
        .args(["--", "sh", "-c", &script]);
    cmd.stderr(Stdio::piped());
    if group {
        cmd.process_group(0);
    }
    let child = cmd.spawn().unwrap();
    wait_for(&marker, "go");
    (child, out)
}

/// Sends `sig` to `pid` (a process group when negative); fsprof (`child`)
/// then exits with `status`.
fn signalled(child: std::process::Child, pid: i32, sig: i32, status: i32) {
    // SAFETY: kill(2) takes no pointers.
    unsafe { libc_kill(pid, sig) };
    let res = child.wait_with_output().unwrap();
    assert_eq!(res.status.code(), Some(status), "{}", stderr(&res));
}

#[test]
fn ctrl_c_to_the_process_group_still_writes_the_profile() {
    let dir = tempfile::tempdir().unwrap();
    let (child, out) = start(dir.path(), true);
    // What a terminal does on Ctrl-C: SIGINT to the whole foreground group.
    let group = -(child.id() as i32);
    signalled(child, group, 2, 130);
    let p = load(&out);
    assert!(
        count(&p, "read") >= 1,
        "cat's calls before the interrupt are kept"
    );
}

#[test]
fn sigterm_to_fsprof_is_forwarded_to_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let (child, out) = start(dir.path(), false);
    let pid = child.id() as i32;
    signalled(child, pid, 15, 143);
    assert!(load(&out).meta.exit.is_some());
}

/// A pseudo-terminal pair: the master end, and the slave opened without
/// becoming our controlling terminal.
fn pty() -> (std::fs::File, std::fs::File) {
    use std::os::fd::FromRawFd;
    // SAFETY: plain libc calls; the descriptors are owned by the Files.
    unsafe {
        let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(m >= 0, "posix_openpt");
        assert_eq!(libc::grantpt(m), 0);
        assert_eq!(libc::unlockpt(m), 0);
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(m, name.as_mut_ptr(), name.len()), 0);
        let s = libc::open(name.as_ptr(), libc::O_RDWR | libc::O_NOCTTY);
        assert!(s >= 0, "opening the pty slave");
        (std::fs::File::from_raw_fd(m), std::fs::File::from_raw_fd(s))
    }
}

/// Runs `fsprof run -- count_sigint` on a terminal of its own, types
/// Ctrl-C there, then lets the command end. Returns how many SIGINTs the
/// command got, fsprof's exit status and the profile.
fn ctrl_c_on_a_terminal(group: &str) -> (usize, Option<i32>, String, fsprof_core::Profile) {
    use std::io::{Read, Write};
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.json");
    let (ints, ready, stop) = (
        dir.path().join("ints"),
        dir.path().join("ready"),
        dir.path().join("stop"),
    );
    let prog = compile("count_sigint", dir.path(), &[]);
    let (mut master, slave) = pty();
    let mut cmd = fsprof();
    cmd.args(["run", "-q", "-o"])
        .arg(&out)
        .arg("--")
        .args([&prog, &ints, &ready, &stop])
        .arg(group)
        .stdin(slave.try_clone().unwrap())
        .stdout(slave.try_clone().unwrap())
        .stderr(slave);
    // SAFETY: setsid and ioctl are async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            // A new session whose controlling terminal is the pty: fsprof
            // (and the command it starts) are its foreground group.
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
    let mut child = cmd.spawn().unwrap();
    drop(cmd);
    let mut reader = master.try_clone().unwrap();
    let output = std::thread::spawn(move || {
        let mut text = Vec::new();
        let mut buf = [0u8; 4096];
        // Ends with EIO once every holder of the slave is gone.
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            text.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&text).into_owned()
    });
    wait_for(&ready, "go");
    master.write_all(&[0x03]).unwrap(); // ^C
                                        // Time for the deliveries (and any wrong one) to land.
    std::thread::sleep(Duration::from_millis(500));
    std::fs::write(&stop, "").unwrap();
    let status = child.wait().unwrap();
    drop(master);
    let said = output.join().unwrap();
    let got = std::fs::read(&ints).unwrap_or_default().len();
    (got, status.code(), said, load(&out))
}

#[test]
fn ctrl_c_on_a_terminal_is_the_terminals_to_deliver() {
    // Typed at the terminal, Ctrl-C reaches fsprof and the command alike:
    // the command gets it once and handles it, fsprof keeps capturing
    // until it exits and does not call that an interruption.
    let (got, code, said, p) = ctrl_c_on_a_terminal("same-group");
    assert_eq!(got, 1, "the command got Ctrl-C {got} times");
    assert_eq!(code, Some(0), "{said}");
    assert!(!said.contains("interrupted"), "{said}");
    assert_eq!(p.meta.exit, Some(fsprof_core::profile::ExitStatus::Code(0)));
    assert!(count(&p, "read") >= 1, "the command's calls are kept");
    // A command that left the terminal's group does not get it from the
    // terminal, and fsprof does not pass a terminal's signal on.
    let (got, code, said, _) = ctrl_c_on_a_terminal("own-group");
    assert_eq!(got, 0, "fsprof passed the terminal's Ctrl-C on");
    assert_eq!(code, Some(0), "{said}");
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}
