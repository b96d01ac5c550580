//! Starting the profiled command and waiting for it as a shell would: its
//! exit status is passed through (128 + signal when killed), a command that
//! cannot be found is 127, one that cannot be executed 126. While it runs,
//! Ctrl-C and Ctrl-\ go to it (the terminal sends them to the whole process
//! group) and we survive them to write the profile; SIGTERM and SIGHUP sent
//! to us alone are forwarded to it.

use std::ffi::OsString;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicI32, Ordering};

use fsprof_core::profile::ExitStatus;

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("{0}: command not found")]
    NotFound(String),
    #[error("{0}: permission denied")]
    NotExecutable(String),
    #[error("{0}: cannot start: {1}")]
    Other(String, io::Error),
}

impl LaunchError {
    /// The exit status a shell uses for this failure.
    pub fn exit_code(&self) -> i32 {
        match self {
            LaunchError::NotFound(_) => 127,
            LaunchError::NotExecutable(_) => 126,
            LaunchError::Other(..) => 127,
        }
    }
}

static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    let pid = CHILD.load(Ordering::Relaxed);
    if pid > 0 {
        unsafe { libc::kill(pid, sig) };
    }
}

pub fn spawn(argv: &[OsString], env: &[(String, OsString)]) -> Result<Child, LaunchError> {
    let name = argv[0].to_string_lossy().into_owned();
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.spawn().map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => LaunchError::NotFound(name.clone()),
        io::ErrorKind::PermissionDenied => LaunchError::NotExecutable(name.clone()),
        _ => LaunchError::Other(name.clone(), e),
    })?;
    CHILD.store(child.id() as i32, Ordering::Relaxed);
    // After the spawn, so the child starts with the dispositions we had.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = forward as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGHUP, &sa, std::ptr::null_mut());
    }
    Ok(child)
}

/// Waits for the child and restores our signal dispositions.
pub fn wait(mut child: Child) -> io::Result<ExitStatus> {
    let status = child.wait()?;
    CHILD.store(0, Ordering::Relaxed);
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_DFL);
        libc::signal(libc::SIGQUIT, libc::SIG_DFL);
        libc::signal(libc::SIGTERM, libc::SIG_DFL);
        libc::signal(libc::SIGHUP, libc::SIG_DFL);
    }
    Ok(match (status.code(), status.signal()) {
        (Some(c), _) => ExitStatus::Code(c),
        (None, Some(s)) => ExitStatus::Signal(s),
        (None, None) => ExitStatus::Code(1),
    })
}
