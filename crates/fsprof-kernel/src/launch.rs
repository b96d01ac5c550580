//! Starting `-- CMD` so that its first profiled syscall is its `execve`.
//!
//! The child is forked, unblocks signals and waits on a pipe; the parent
//! waits until the child sits inside that `read`, makes it a target, then
//! releases it. The read's entry happened before the child became a target,
//! so nothing of the launcher is counted — which is what makes the syscall
//! counts comparable with `strace -f -c`.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fsprof_core::profile::ExitStatus;

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("{0}: command not found")]
    NotFound(String),
    #[error("{cmd}: {err}")]
    Spawn { cmd: String, err: io::Error },
}

impl LaunchError {
    /// The status a shell uses for the same failure.
    pub fn exit_code(&self) -> i32 {
        match self {
            LaunchError::NotFound(_) => 127,
            LaunchError::Spawn { .. } => 126,
        }
    }
}

/// A forked child held before `execve`.
#[derive(Debug)]
pub struct GatedChild {
    pub pid: i32,
    gate: Option<std::os::fd::OwnedFd>,
    reaped: Option<ExitStatus>,
}

fn find_in_path(cmd: &OsStr) -> Option<PathBuf> {
    if cmd.as_bytes().contains(&b'/') {
        return Some(PathBuf::from(cmd));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join(cmd))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

fn cstr(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "argument contains a NUL byte"))
}

impl GatedChild {
    pub fn spawn(argv: &[OsString]) -> Result<GatedChild, LaunchError> {
        let name = argv[0].to_string_lossy().into_owned();
        let exe = find_in_path(&argv[0]).ok_or_else(|| LaunchError::NotFound(name.clone()))?;
        if !exe.exists() {
            return Err(LaunchError::NotFound(name));
        }
        let spawn_err = |err| LaunchError::Spawn {
            cmd: name.clone(),
            err,
        };
        // Everything the child needs is allocated before fork.
        let exe_c = cstr(exe.as_os_str()).map_err(spawn_err)?;
        let args: Vec<CString> = argv
            .iter()
            .map(|a| cstr(a))
            .collect::<Result<_, _>>()
            .map_err(spawn_err)?;
        let mut arg_ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        arg_ptrs.push(std::ptr::null());
        let mut fds = [0; 2];
        // SAFETY: fds is a valid two-int array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(spawn_err(io::Error::last_os_error()));
        }
        // SAFETY: the child only calls async-signal-safe functions on
        // memory prepared above, then execs or exits.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(spawn_err(io::Error::last_os_error()));
        }
        if pid == 0 {
            unsafe {
                let mut none: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut none);
                libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
                libc::close(fds[1]);
                let mut b = 0u8;
                libc::read(fds[0], &mut b as *mut u8 as *mut libc::c_void, 1);
                libc::execv(exe_c.as_ptr(), arg_ptrs.as_ptr());
                libc::_exit(if *libc::__errno_location() == libc::ENOENT {
                    127
                } else {
                    126
                });
            }
        }
        // SAFETY: closing our copy of the read end; keeping the write end.
        unsafe { libc::close(fds[0]) };
        use std::os::fd::FromRawFd;
        Ok(GatedChild {
            pid,
            // SAFETY: fds[1] is ours.
            gate: Some(unsafe { std::os::fd::OwnedFd::from_raw_fd(fds[1]) }),
            reaped: None,
        })
    }

    /// Waits (up to 5 s) until the child is blocked reading the gate.
    pub fn wait_parked(&self) {
        let read_nr = crate::names::syscall_nr("read").unwrap_or(0);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(s) = std::fs::read_to_string(format!("/proc/{}/syscall", self.pid)) {
                if s.split_whitespace().next() == Some(&read_nr.to_string()) {
                    return;
                }
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Lets the child exec.
    pub fn release(&mut self) {
        if let Some(g) = self.gate.take() {
            use std::os::fd::AsRawFd;
            // SAFETY: writing one byte to our pipe.
            unsafe { libc::write(g.as_raw_fd(), b"x".as_ptr() as *const libc::c_void, 1) };
        }
    }

    /// Non-blocking wait; `Some` once the child has exited.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        if self.reaped.is_some() {
            return self.reaped.clone();
        }
        let mut st = 0;
        // SAFETY: waiting for our own child.
        let r = unsafe { libc::waitpid(self.pid, &mut st, libc::WNOHANG) };
        if r == self.pid {
            self.reaped = Some(if libc::WIFSIGNALED(st) {
                ExitStatus::Signal(libc::WTERMSIG(st))
            } else {
                ExitStatus::Code(libc::WEXITSTATUS(st))
            });
        }
        self.reaped.clone()
    }

    pub fn signal(&self, sig: i32) {
        if self.reaped.is_none() {
            // SAFETY: signalling our own unreaped child.
            unsafe { libc::kill(self.pid, sig) };
        }
    }
}

impl Drop for GatedChild {
    /// A child that never got released (setup failed) must not linger.
    fn drop(&mut self) {
        if self.gate.is_some() && self.reaped.is_none() {
            self.signal(libc::SIGKILL);
            let mut st = 0;
            // SAFETY: reaping our own child.
            unsafe { libc::waitpid(self.pid, &mut st, 0) };
        }
    }
}
