//! Starting the profiled command and waiting for it, by one set of rules
//! for every capture source.
//!
//! The command is forked and held on a pipe before its `execve` until
//! [`Child::release`]; a source that counts the command's own system calls
//! attaches in between, so the launcher's work is not counted and the
//! first call seen is the `execve` (what makes syscall counts comparable
//! with `strace -f -c`). [`Child::spawn`], for everything else, starts the
//! command at once, as `posix_spawn` does (`clone(CLONE_VM|CLONE_VFORK)`)
//! but with fewer system calls.
//!
//! Failures follow the shell: a command that cannot be found exits 127,
//! one that is found but cannot be executed 126, and a failed `execve`
//! is reported by the launcher (over a close-on-exec pipe, as
//! `std::process` does) rather than as the command's exit status. Like
//! `execvp`, a file the kernel does not recognise as a program is run by
//! `/bin/sh`. The child starts with the signal mask and dispositions
//! fsprof was started with ([`crate::inherited`]), whatever fsprof itself
//! blocks or ignores since, and with fsprof's CPU mask (it only starts on
//! fsprof's CPU: `OnThisCpu`).
//!
//! Hand-written rather than `std::process::Command` because std cannot
//! hold a child between fork and exec nor give it back the ignored signals
//! and mask fsprof was started with (std resets both).

use std::ffi::{CStr, CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fsprof_core::profile::ExitStatus;

use crate::inherited;

/// Every program fsprof starts from now on runs without address-space
/// layout randomization (`personality(ADDR_NO_RANDOMIZE)`, what `setarch
/// -R` and gdb do; the flag passes to the command across `execve` and to
/// its children). fsprof's own layout, made at its own exec, is not moved.
pub fn no_aslr_for_commands() -> io::Result<()> {
    // SAFETY: 0xffffffff asks for the current persona without changing it.
    let now = unsafe { libc::personality(0xffff_ffff) };
    if now == -1 {
        return Err(io::Error::last_os_error());
    }
    let no_random = libc::ADDR_NO_RANDOMIZE as libc::c_int;
    // SAFETY: sets one flag of this process's persona; no memory involved.
    if unsafe { libc::personality((now | no_random) as libc::c_ulong) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Why a command could not be started. [`LaunchError::exit_code`] is the
/// status a shell reports for the same failure.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("{0}: command not found")]
    NotFound(String),
    #[error("{0}: permission denied")]
    NotExecutable(String),
    #[error("{0}: cannot execute: {1}")]
    CannotExecute(String, io::Error),
    #[error("{0}: cannot start: {1}")]
    Start(String, io::Error),
}

impl LaunchError {
    /// 127 when the command was not found, 126 when it was found but could
    /// not be run (as bash and POSIX sh do).
    pub fn exit_code(&self) -> i32 {
        match self {
            LaunchError::NotFound(_) => 127,
            LaunchError::NotExecutable(_)
            | LaunchError::CannotExecute(..)
            | LaunchError::Start(..) => 126,
        }
    }

    fn from_exec_errno(cmd: String, errno: i32) -> LaunchError {
        match errno {
            libc::ENOENT | libc::ENOTDIR => LaunchError::NotFound(cmd),
            libc::EACCES | libc::EPERM => LaunchError::NotExecutable(cmd),
            e => LaunchError::CannotExecute(cmd, io::Error::from_raw_os_error(e)),
        }
    }
}

/// How long [`Child::wait_parked`] waits for the child to reach its gate.
const PARK_TIMEOUT: Duration = Duration::from_secs(5);
/// How often [`Child::wait_parked`] looks at the child's current syscall
/// once it has looked [`PARK_SPINS`] times in a row.
const PARK_POLL: Duration = Duration::from_micros(200);
/// Looks (with a yield between them) before [`PARK_POLL`]'s sleeps.
const PARK_SPINS: u32 = 50;

/// Where a command name without a slash is looked up when PATH is unset
/// (glibc's default).
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A command started by fsprof.
#[derive(Debug)]
pub struct Child {
    pid: i32,
    name: String,
    /// The write end of the pipe the child waits on before `execve`.
    gate: Option<OwnedFd>,
    /// The read end of the close-on-exec pipe a failed `execve` reports on.
    /// A held child first writes one byte there ([`PARKED`]) just before
    /// it waits on its gate.
    exec_errors: Option<OwnedFd>,
    /// Whether that byte has been read (or there is none to read).
    parked: std::cell::Cell<bool>,
    reaped: Option<ExitStatus>,
}

/// The byte a held child writes to its error pipe just before the `read`
/// of its gate: [`Child::wait_parked`] sleeps in a `read` until it comes,
/// rather than polling the child's state.
const PARKED: u8 = b'P';

/// Everything the child needs, allocated before `fork`: after it, the
/// child of a multi-threaded process may only make async-signal-safe calls.
/// The pointer arrays point into the heap buffers of the `CString`s, which
/// stay put when this struct moves.
struct Prepared {
    exe: CString,
    sh: CString,
    _strings: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    /// `/bin/sh exe args...`: how `execvp` runs a file that is not a program.
    sh_argv: Vec<*const libc::c_char>,
}

impl Prepared {
    fn new(argv: &[OsString], exe: &Path, env: &[(OsString, OsString)]) -> io::Result<Prepared> {
        let added: Vec<CString> = env
            .iter()
            .map(|(k, v)| {
                let mut kv = Vec::with_capacity(k.len() + 1 + v.len());
                kv.extend_from_slice(k.as_bytes());
                kv.push(b'=');
                kv.extend_from_slice(v.as_bytes());
                cstr(OsStr::from_bytes(&kv))
            })
            .collect::<io::Result<_>>()?;
        let mut envp = inherited_env(env);
        envp.extend(added.iter().map(|c| c.as_ptr()));
        envp.push(std::ptr::null());
        let args: Vec<CString> = argv.iter().map(|a| cstr(a)).collect::<io::Result<_>>()?;
        let exe = cstr(exe.as_os_str())?;
        let sh = cstr(OsStr::new("/bin/sh"))?;
        let sh_argv = pointers(
            &[&sh, &exe]
                .into_iter()
                .chain(args.iter().skip(1))
                .collect::<Vec<_>>(),
        );
        Ok(Prepared {
            argv: pointers(&args.iter().collect::<Vec<_>>()),
            envp,
            sh_argv,
            exe,
            sh,
            _strings: args.into_iter().chain(added).collect(),
        })
    }
}

/// fsprof's own environment as the command gets it, less the variables
/// `env` sets: the C library's own `NAME=VALUE` strings, in their order,
/// taken as `std::env::vars_os` takes them (an entry without `=` after its
/// first byte is left out). Pointers, not copies: copying each variable
/// into `OsString`s and back into a `CString` was ~25 µs of every `fsprof
/// run`'s start-up before the clone with a shell's ~35 variables
/// (docs/benchmarks/overhead.md, "Start-up, seventh session").
fn inherited_env(env: &[(OsString, OsString)]) -> Vec<*const libc::c_char> {
    extern "C" {
        static environ: *const *const libc::c_char;
    }
    let mut out = Vec::with_capacity(64);
    // SAFETY: `environ` is the C library's NULL-terminated array of
    // NUL-terminated strings, read as `getenv` and std's `vars_os` read it.
    // fsprof never changes its own environment (`set_var` is called only
    // in tests, on their own thread before they start anything; nextest
    // runs each test in a process of its own), and the C library never
    // frees an environment string, so the pointers stay valid until
    // `execve` (in a forked child, in its own copy of the memory).
    unsafe {
        let mut at = environ;
        while !at.is_null() && !(*at).is_null() {
            let entry = CStr::from_ptr(*at).to_bytes();
            let name = entry
                .get(1..)
                .and_then(|rest| rest.iter().position(|&b| b == b'='))
                .map(|eq| &entry[..eq + 1]);
            if name.is_some_and(|n| !env.iter().any(|(k, _)| k.as_bytes() == n)) {
                out.push(*at);
            }
            at = at.add(1);
        }
    }
    out
}

fn cstr(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "argument contains a NUL byte"))
}

fn pointers(v: &[&CString]) -> Vec<*const libc::c_char> {
    v.iter()
        .map(|c| c.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// The file `execve` will be given, found as `execvp` finds it: a name
/// with a slash as it is, otherwise the first executable file of that name
/// in PATH, else the first file of that name (which then fails with
/// "permission denied", as in a shell).
fn resolve(cmd: &OsStr, env: &[(OsString, OsString)]) -> Option<PathBuf> {
    if cmd.is_empty() {
        return None;
    }
    if cmd.as_bytes().contains(&b'/') {
        let p = PathBuf::from(cmd);
        return p.symlink_metadata().is_ok().then_some(p);
    }
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_else(|| DEFAULT_PATH.into());
    // One stat per directory, up to the first executable file.
    let mut first_file = None;
    for p in std::env::split_paths(&path).map(|d| d.join(cmd)) {
        use std::os::unix::fs::PermissionsExt;
        match p.metadata() {
            Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => return Some(p),
            Ok(m) if m.is_file() && first_file.is_none() => first_file = Some(p),
            _ => {}
        }
    }
    first_file
}

/// Reads a held child's [`PARKED`] byte from its error pipe, waiting at
/// most `timeout` (`None`: until it comes); false if it did not come (the
/// child is gone, or slow).
fn read_parked(errs: &OwnedFd, timeout: Option<Duration>) -> bool {
    let mut pfd = libc::pollfd {
        fd: errs.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let deadline = timeout.map(|t| Instant::now() + t);
    loop {
        let ms = deadline.map_or(-1, |d| {
            let left = d.saturating_duration_since(Instant::now());
            i32::try_from(left.as_millis()).unwrap_or(i32::MAX)
        });
        // SAFETY: one pollfd, ours.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        if n <= 0 {
            return false;
        }
        let mut b = 0u8;
        // SAFETY: reading one byte into a one-byte buffer from our pipe.
        let r = unsafe { libc::read(errs.as_raw_fd(), (&mut b as *mut u8).cast(), 1) };
        if r < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        return r == 1 && b == PARKED;
    }
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid two-int array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The command's name for messages and the program `argv[0]` resolves to
/// (PATH as the child's environment sets it), or "not found".
fn name_and_program(
    argv: &[OsString],
    env: &[(OsString, OsString)],
) -> Result<(String, PathBuf), LaunchError> {
    let name = argv
        .first()
        .map(|a| a.to_string_lossy().into_owned())
        .unwrap_or_default();
    let exe = resolve(argv.first().map_or(OsStr::new(""), |a| a), env)
        .ok_or_else(|| LaunchError::NotFound(name.clone()))?;
    Ok((name, exe))
}

impl Child {
    /// Starts `argv` with `env` added to fsprof's environment, at once.
    /// With `clone(CLONE_VM|CLONE_VFORK)` ([`vfork_exec`]): no copy of
    /// fsprof's page tables for a child that execs straight away, and no
    /// copy-on-write faults in either process after it (0.1–0.2 ms of
    /// `fsprof run`'s start-up; docs/benchmarks.md, "Start-up").
    pub fn spawn(argv: &[OsString], env: &[(OsString, OsString)]) -> Result<Child, LaunchError> {
        let (name, exe) = name_and_program(argv, env)?;
        let prepared =
            Prepared::new(argv, &exe, env).map_err(|e| LaunchError::Start(name.clone(), e))?;
        match vfork_exec(&prepared) {
            Ok(pid) => Ok(Child {
                pid,
                name,
                gate: None,
                exec_errors: None,
                parked: std::cell::Cell::new(true),
                reaped: None,
            }),
            Err(e) => Err(LaunchError::from_exec_errno(name, e)),
        }
    }

    /// Forks the child of `argv` and holds it before its `execve` until
    /// [`Child::release`]. Dropped unreleased, the child is killed.
    pub fn spawn_held(
        argv: &[OsString],
        env: &[(OsString, OsString)],
    ) -> Result<Child, LaunchError> {
        let (name, exe) = name_and_program(argv, env)?;
        let start = |e| LaunchError::Start(name.clone(), e);
        let prepared = Prepared::new(argv, &exe, env).map_err(start)?;
        let (gate_r, gate_w) = pipe().map_err(start)?;
        let (err_r, err_w) = pipe().map_err(start)?;
        // SAFETY: the child branch only makes async-signal-safe calls on
        // memory prepared above, then execs or exits.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(start(io::Error::last_os_error()));
        }
        if pid == 0 {
            // SAFETY: in the forked child; see `exec_child`.
            unsafe { exec_child(&prepared, gate_r.as_raw_fd(), err_w.as_raw_fd()) }
        }
        Ok(Child {
            pid,
            name,
            gate: Some(gate_w),
            exec_errors: Some(err_r),
            parked: std::cell::Cell::new(false),
            reaped: None,
        })
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Waits (up to 5 s) until the held child sits in the `read` of its
    /// gate, so that whatever attaches next sees nothing of the launcher:
    /// asleep until the child's [`PARKED`] byte (sent just before that
    /// `read`), then looking at its current system call until it is the
    /// `read` (the few instructions between the two; polling alone slept
    /// 200 µs at a time, 1–2 times a `trace` start).
    pub fn wait_parked(&self) {
        let deadline = Instant::now() + PARK_TIMEOUT;
        if !self.parked.get() {
            let Some(errs) = self.exec_errors.as_ref() else {
                return;
            };
            if !read_parked(errs, Some(PARK_TIMEOUT)) {
                return; // gone, or not there in time: as before, go on
            }
            self.parked.set(true);
        }
        let read_nr = libc::SYS_read.to_string();
        let mut looks = 0u32;
        while Instant::now() < deadline {
            if let Ok(s) = std::fs::read_to_string(format!("/proc/{}/syscall", self.pid)) {
                if s.split_whitespace().next() == Some(read_nr.as_str()) {
                    return;
                }
            }
            looks += 1;
            // The child runs on the other CPU or after a yield; a child
            // not in its `read` after this many looks is not running.
            if looks < PARK_SPINS {
                std::thread::yield_now();
            } else {
                std::thread::sleep(PARK_POLL);
            }
        }
    }

    /// Lets the held child exec, and returns once it has (or has failed
    /// to, which is reported as the shell would).
    pub fn release(&mut self) -> Result<(), LaunchError> {
        if let Some(g) = self.gate.take() {
            // SAFETY: writing one byte from a static buffer to our pipe.
            unsafe { libc::write(g.as_raw_fd(), b"x".as_ptr().cast(), 1) };
        }
        let Some(errs) = self.exec_errors.take() else {
            return Ok(());
        };
        // Not waited for: its byte comes before any errno (and surely
        // comes: the gate is open).
        if !self.parked.get() && !read_parked(&errs, None) {
            return Ok(());
        }
        let mut buf = [0u8; 4];
        let n = loop {
            // SAFETY: reading at most 4 bytes into a 4-byte buffer.
            let n = unsafe { libc::read(errs.as_raw_fd(), buf.as_mut_ptr().cast(), 4) };
            if n >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                break n;
            }
        };
        if n != 4 {
            return Ok(()); // end of file: the exec succeeded
        }
        let _ = self.wait();
        Err(LaunchError::from_exec_errno(
            self.name.clone(),
            i32::from_ne_bytes(buf),
        ))
    }

    /// Non-blocking wait; `Some` once the child has exited.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        if self.reaped.is_none() {
            self.reap(libc::WNOHANG);
        }
        self.reaped.clone()
    }

    /// Waits for the child to exit.
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        while self.reaped.is_none() {
            if !self.reap(0) && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(self.reaped.clone().expect("reaped above"))
    }

    /// One waitpid; false when it failed.
    fn reap(&mut self, flags: i32) -> bool {
        let mut st = 0;
        // SAFETY: waiting for our own child with a valid status pointer.
        let r = unsafe { libc::waitpid(self.pid, &mut st, flags) };
        if r == self.pid {
            self.reaped = Some(exit_status(st));
        }
        r >= 0
    }

    /// Sends `sig` to the child unless it has been reaped (its pid may
    /// belong to someone else by now).
    pub fn signal(&self, sig: i32) {
        if self.reaped.is_none() {
            // SAFETY: signalling our own unreaped child.
            unsafe { libc::kill(self.pid, sig) };
        }
    }
}

impl Drop for Child {
    /// A child that never got released (setup failed) must not linger.
    fn drop(&mut self) {
        if self.gate.is_some() && self.reaped.is_none() {
            self.signal(libc::SIGKILL);
            let _ = self.wait();
        }
    }
}

/// Bytes of stack for the [`vfork_exec`] child, which only makes a few
/// system calls on it before `execve` (glibc's `posix_spawn` uses 32 KiB
/// plus the page size).
const CHILD_STACK: usize = 64 * 1024;

/// What the [`vfork_exec`] child reads, and where it leaves its `errno`.
struct VforkArgs<'a> {
    p: &'a Prepared,
    errno: i32,
    /// fsprof's CPU mask, for the child to take back before `execve`
    /// when fsprof pinned itself for the clone (see [`OnThisCpu`]).
    mask: Option<&'a libc::cpu_set_t>,
    /// The thread that cloned (and pinned itself): the one to give the
    /// mask back to, which `getppid` names only when it is the main one.
    cloner: libc::pid_t,
    /// Set by the child once fsprof has its own mask back.
    parent_unpinned: bool,
}

/// fsprof pinned to the CPU it runs on while it clones the command, so the
/// command starts on that CPU; the child gives fsprof's own mask back to
/// itself and to fsprof before its `execve`, so both masks are what they
/// were. Why: the scheduler otherwise starts the child on the other (idle)
/// CPU, and on a VM every hand-over between fsprof and the command across
/// CPUs costs an inter-processor wake-up of a halted vCPU
/// (docs/benchmarks.md, "Start-up, fourth session"). fsprof's mask is
/// given back by the child, while fsprof still sleeps in the clone: woken
/// at the child's `execve`, fsprof is then placed on a CPU the command
/// does not occupy, and what it does next (docs/benchmarks/overhead.md,
/// "Start-up, sixth session") runs beside the command's start instead of
/// waiting for the command to block or exit (under SCHED_FIFO a woken
/// task of the same priority never preempts it). Pinned until then, it
/// was woken on the command's CPU and kept off the other one. The command
/// is free to move from there as the scheduler sees fit.
struct OnThisCpu {
    mask: libc::cpu_set_t,
    pinned: bool,
}

impl OnThisCpu {
    fn pin() -> OnThisCpu {
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: cpu_set_t is plain data; the calls only read and write
        // the sets given, of the size given.
        unsafe {
            let mut mask: libc::cpu_set_t = std::mem::zeroed();
            let mut pinned = false;
            let cpu = libc::sched_getcpu();
            if cpu >= 0 && libc::sched_getaffinity(0, size, &mut mask) == 0 {
                let mut one: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu as usize, &mut one);
                pinned = libc::sched_setaffinity(0, size, &one) == 0;
            }
            OnThisCpu { mask, pinned }
        }
    }

    fn mask(&self) -> Option<&libc::cpu_set_t> {
        self.pinned.then_some(&self.mask)
    }

    /// The child gave fsprof its mask back (see [`vfork_child`]).
    fn given_back(&mut self) {
        self.pinned = false;
    }
}

impl Drop for OnThisCpu {
    fn drop(&mut self) {
        if self.pinned {
            // SAFETY: restores the mask read in `pin`.
            unsafe {
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.mask)
            };
        }
    }
}

/// Starts `p`'s program as `posix_spawn` does, with
/// `clone(CLONE_VM|CLONE_VFORK)` (returns once the child has exec'd or
/// failed to), but with only the system calls that give the child the
/// signal state fsprof was started with ([`inherited::restore`]: four),
/// where glibc's `posix_spawn` queries and resets every one of the 64
/// signals (128 `rt_sigaction`; ~0.1 ms of `fsprof run`'s start-up here).
/// Like `execvp`, a file the kernel does not recognise is run by
/// `/bin/sh`. The pid, or the errno of the failed start or `execve`.
fn vfork_exec(p: &Prepared) -> Result<i32, i32> {
    // Not zeroed: the child touches only the top of it, and writing all of
    // it would fault in every page.
    let mut stack: Vec<u8> = Vec::with_capacity(CHILD_STACK);
    // The stack grows down from its 16-byte aligned top.
    let top = (stack.as_mut_ptr() as usize + CHILD_STACK) & !15;
    let mut here = OnThisCpu::pin();
    let mut args = VforkArgs {
        p,
        errno: 0,
        mask: here.mask(),
        // SAFETY: gettid has no preconditions.
        cloner: unsafe { libc::gettid() },
        parent_unpinned: false,
    };
    // SAFETY: sigset_t is plain data; with every signal blocked no handler
    // of fsprof's can run in the child, which shares fsprof's memory,
    // before it has restored the inherited state. The child runs
    // `vfork_child` on its own stack, only async-signal-safe calls on
    // memory prepared before, and fsprof is suspended until it exec'd or
    // exited (CLONE_VFORK), so `args` and `stack` outlive its use of them.
    let pid = unsafe {
        let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD;
        let arg = (&mut args as *mut VforkArgs).cast();
        match clone_with_signals_blocked(vfork_child, top, flags, arg) {
            (pid, _) if pid >= 0 => pid,
            (_, clone_errno) => return Err(clone_errno),
        }
    };
    drop(stack);
    let errno = args.errno;
    if args.parent_unpinned {
        here.given_back();
    }
    drop(here);
    if errno != 0 {
        // The child failed to exec and exited: reap it here, as
        // posix_spawn does, so the failure is only the errno.
        let mut st = 0;
        // SAFETY: waiting for our own child with a valid status pointer.
        while unsafe { libc::waitpid(pid, &mut st, 0) } < 0
            && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
        {}
        return Err(errno);
    }
    Ok(pid)
}

/// `clone(f, stack_top, flags, arg)` with every signal blocked in the
/// calling thread across it, so the child starts with every signal
/// blocked (no handler of fsprof's runs in a child that shares its
/// memory); the pid (or -1) and the clone's errno.
///
/// # Safety
/// As `clone`: `f` runs on the stack below `stack_top` with `arg`, both
/// alive for as long as the child uses them.
// Inlined: on `run`'s start-up path (vfork_exec), whose functions
// startup.order lays out by name.
#[inline(always)]
pub(crate) unsafe fn clone_with_signals_blocked(
    f: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    stack_top: usize,
    flags: libc::c_int,
    arg: *mut libc::c_void,
) -> (libc::pid_t, i32) {
    // SAFETY: sigset_t is plain data; the clone's safety is the caller's.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let pid = libc::clone(f, stack_top as *mut libc::c_void, flags, arg);
        let clone_errno = *libc::__errno_location();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        (pid, clone_errno)
    }
}

/// The [`vfork_exec`] child.
extern "C" fn vfork_child(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the parent's `VforkArgs`, alive and not touched by
    // the parent until this child has exec'd or exited (CLONE_VFORK); only
    // async-signal-safe calls on buffers prepared before the clone.
    unsafe {
        let a = &mut *arg.cast::<VforkArgs>();
        inherited::restore();
        if let Some(mask) = a.mask {
            let size = std::mem::size_of::<libc::cpu_set_t>();
            libc::sched_setaffinity(0, size, mask);
            // fsprof, asleep in the clone until our `execve`, may then be
            // woken on the other CPU (see `OnThisCpu`).
            a.parent_unpinned = libc::sched_setaffinity(a.cloner, size, mask) == 0;
        }
        libc::execve(a.p.exe.as_ptr(), a.p.argv.as_ptr(), a.p.envp.as_ptr());
        if *libc::__errno_location() == libc::ENOEXEC {
            libc::execve(a.p.sh.as_ptr(), a.p.sh_argv.as_ptr(), a.p.envp.as_ptr());
        }
        a.errno = *libc::__errno_location();
        libc::_exit(127)
    }
}

/// The child side of [`Child::spawn_held`]: wait at the gate, exec, and
/// report a failed exec on the error pipe.
///
/// # Safety
/// Only in the child of `fork`; `p` was prepared before the fork.
unsafe fn exec_child(p: &Prepared, gate: i32, errors: i32) -> ! {
    // SAFETY: async-signal-safe calls on buffers prepared before the fork.
    unsafe {
        // The signal state fsprof was started with, before the wait: a
        // Ctrl-C while held ends the child as it would the command.
        inherited::restore();
        // Then nothing but the gate's `read` (Child::wait_parked).
        libc::write(errors, (&PARKED as *const u8).cast(), 1);
        let mut b = 0u8;
        let n = loop {
            let n = libc::read(gate, (&mut b as *mut u8).cast(), 1);
            if n >= 0 || *libc::__errno_location() != libc::EINTR {
                break n;
            }
        };
        if n != 1 {
            // fsprof went away without releasing us: never run unobserved.
            libc::_exit(126);
        }
        libc::execve(p.exe.as_ptr(), p.argv.as_ptr(), p.envp.as_ptr());
        if *libc::__errno_location() == libc::ENOEXEC {
            libc::execve(p.sh.as_ptr(), p.sh_argv.as_ptr(), p.envp.as_ptr());
        }
        let errno = *libc::__errno_location();
        libc::write(errors, errno.to_ne_bytes().as_ptr().cast(), 4);
        libc::_exit(if errno == libc::ENOENT { 127 } else { 126 });
    }
}

/// A `waitpid` status as the profile records it.
pub fn exit_status(st: i32) -> ExitStatus {
    if libc::WIFSIGNALED(st) {
        ExitStatus::Signal(libc::WTERMSIG(st))
    } else {
        ExitStatus::Code(libc::WEXITSTATUS(st))
    }
}

/// Whether a process with this pid exists. A zombie counts, and so does a
/// process we may not signal.
pub fn pid_exists(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the target exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Most processes [`descendants`] lists, so that a fork bomb cannot make
/// it run forever.
const MAX_DESCENDANTS: usize = 100_000;

/// `pid` and all its current descendants (from /proc/PID/task/*/children).
pub fn descendants(pid: i32) -> Vec<i32> {
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() && out.len() < MAX_DESCENDANTS {
        let p = out[i];
        if let Ok(rd) = std::fs::read_dir(format!("/proc/{p}/task")) {
            for t in rd.flatten() {
                if let Ok(s) = std::fs::read_to_string(t.path().join("children")) {
                    out.extend(s.split_whitespace().filter_map(|c| c.parse::<i32>().ok()));
                }
            }
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// As execvp: the first executable file of that name in PATH order
    /// (a directory or a non-executable file of that name before it is
    /// passed over), else the first file of that name.
    #[test]
    fn command_names_resolve_as_execvp_finds_them() {
        let t = tempfile::tempdir().unwrap();
        let dir = |n: &str| {
            let d = t.path().join(n);
            std::fs::create_dir(&d).unwrap();
            d
        };
        let (a, b, c, d) = (dir("a"), dir("b"), dir("c"), dir("d"));
        let file = |d: &Path, mode: u32| {
            let p = d.join("prog");
            std::fs::write(&p, b"#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            p
        };
        std::fs::create_dir(a.join("prog")).unwrap();
        let plain = file(&b, 0o644);
        let exe = file(&c, 0o755);
        file(&d, 0o755);
        let path =
            |dirs: &[&Path]| vec![(OsString::from("PATH"), std::env::join_paths(dirs).unwrap())];
        let find = |dirs: &[&Path]| resolve(OsStr::new("prog"), &path(dirs));
        assert_eq!(find(&[&a, &b, &c, &d]), Some(exe.clone()));
        assert_eq!(find(&[&a, &b]), Some(plain.clone()), "no executable one");
        assert_eq!(find(&[&a]), None, "a directory is not a program");
        assert_eq!(find(&[&d, &c]), Some(d.join("prog")));
        assert_eq!(
            resolve(OsStr::new("./nothing-here"), &path(&[&c])),
            None,
            "a name with a slash is not looked up"
        );
    }

    /// The thread that launches gets its own CPU mask back, also when it
    /// is not the main thread (the child gives it back by thread id).
    #[test]
    fn a_launching_thread_keeps_its_cpu_mask() {
        fn mask_text() -> String {
            std::fs::read_to_string("/proc/thread-self/status")
                .unwrap()
                .lines()
                .find(|l| l.starts_with("Cpus_allowed_list"))
                .unwrap()
                .to_string()
        }
        std::thread::spawn(|| {
            let before = mask_text();
            let env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
            let mut c = Child::spawn(&[OsString::from("true")], &env).unwrap();
            let after = mask_text();
            c.wait().unwrap();
            assert_eq!(after, before);
        })
        .join()
        .unwrap();
    }
}
