//! A command made ready before its time: the calls most of a replay is
//! made of (opens, closes, stats, the data calls, `getdents64`) laid out
//! as one system call with every argument resolved — the slot's
//! descriptor, the cached parent directory and last component, the
//! buffer, the open flags — and the directory-stream calls the trace
//! took at libc level (`readdir`, `fdopendir`, `closedir`) as that one
//! libc call on the slot's stream, while the thread would otherwise only wait
//! for the command's time (Replayfs's productive pre-spin). At its time
//! the replay loop reads the clock, makes that one call and reads the
//! clock again; what the result changes in the replayer's own state (a
//! slot filled or emptied) comes after the second read. So a replayed
//! call's latency holds what the traced one's held, the call, and not
//! the replayer's dispatch, and a command that is due at once pays for
//! its decoding before its issue time, where the report can see it (the
//! replayer's own time between calls) rather than as a slower call.
//!
//! Anything else, and every case off the common path (a stream, an empty
//! slot, a path with a trailing slash or no last component, a symlink, a
//! namespace change since), is issued whole by [`Exec::issue`], timed
//! the same way.

use std::sync::atomic::Ordering;

use super::{
    last_errno, ret, sys_ret, DataArgs, Exec, Kind, Local, DIRP, EMPTY, FD, FILEP, MAX_BUF,
};
use crate::raw;
use crate::root::{is_plain, OpenHow};

/// Reads `name`'s bytes, so that the kernel's copy of them in the call is
/// not their first touch: a program stats a name it has just made (tar
/// from `readdir`), in its cache, while the replay's names sit apart in
/// its heap, each first read by the kernel (an open's name is read here
/// already, by [`is_plain`]). The replayed `fstatat` of a traced `tar`
/// ran +0.3 powers of two slower than traced without it (~80 ns of a
/// ~1.4 µs call is one cache miss on the name: docs/benchmarks/history.md,
/// replay13).
fn touch(name: &std::ffi::CStr) {
    std::hint::black_box(name.to_bytes().iter().fold(0u8, |x, &b| x ^ b));
}

/// One command's call, ready to be made.
pub struct Ready {
    call: Call,
    /// The namespace generation the cached parent directory belongs to.
    gen: u64,
    how: OpenHow,
    /// The stat calls' buffer: written by the kernel, read only after a
    /// successful call; not zeroed per command (144 bytes between two
    /// calls that may be due back to back).
    st: std::mem::MaybeUninit<libc::stat>,
}

#[derive(Clone, Copy)]
enum Call {
    /// Issued whole by [`Exec::issue`].
    Whole,
    /// `openat` of one plain component in its parent, not followed
    /// (`O_NOFOLLOW`, [`crate::root`] says why that is as confined); the slot
    /// it fills; `follow`: the traced open followed a final symlink
    /// (no O_NOFOLLOW), which is then opened whole, from the root.
    Open {
        dir: i32,
        name: *const libc::c_char,
        out: u32,
        follow: bool,
    },
    /// `close` of a slot's plain descriptor.
    Close { fd: i32, slot: u32 },
    /// A directory-stream call, made through libc.
    Dir(DirCall),
    /// `newfstatat(fd, "", AT_EMPTY_PATH)`: glibc's `fstat`.
    Fstat { fd: i32 },
    /// `newfstatat` of one component in its parent, not followed;
    /// `follow`: a symlink found there is then looked up whole.
    StatAt {
        dir: i32,
        name: *const libc::c_char,
        follow: bool,
    },
    /// read, pread64, write, pwrite64, getdents64 with their arguments.
    Data { nr: i64, a: [i64; 4] },
}

/// The directory-stream calls the trace took at libc level, made the same
/// way.
#[derive(Clone, Copy)]
enum DirCall {
    /// `readdir` of a slot's stream, as the traced program called it
    /// (most calls return an entry from the stream's buffer without a
    /// system call: only the libc call times them).
    Readdir { dir: *mut libc::DIR },
    /// `fdopendir` of a slot's descriptor (its `fstat`, `fcntl` and the
    /// stream's allocation, as traced); the slot then holds the stream.
    FdOpenDir { fd: i32, slot: u32 },
    /// `closedir` of a slot's stream.
    CloseDir { dir: *mut libc::DIR, slot: u32 },
}

impl Exec<'_> {
    /// The command made ready: after its waits, before its time.
    pub fn ready(&self, kind: Kind, a: &DataArgs, cmd: u32, local: &mut Local) -> Ready {
        let mut r = Ready {
            call: Call::Whole,
            gen: 0,
            how: OpenHow::component(0, 0),
            st: std::mem::MaybeUninit::uninit(),
        };
        r.call = match kind {
            Kind::Read | Kind::Pread | Kind::Write | Kind::Pwrite => {
                self.ready_data(kind, a, local)
            }
            Kind::Open | Kind::Stat | Kind::Lstat => self.ready_path(kind, cmd, local, &mut r),
            Kind::Close | Kind::Fstat | Kind::Getdents => self.ready_fd(kind, a, local),
            Kind::Readdir | Kind::FdOpenDir => self.ready_dir(kind, a),
            _ => Call::Whole,
        };
        r
    }

    fn ready_data(&self, kind: Kind, a: &DataArgs, local: &mut Local) -> Call {
        let fd = self.slots.fd(a.slot) as i64;
        if a.len > MAX_BUF as u64 {
            return Call::Whole;
        }
        let (nr, off) = match kind {
            Kind::Read => (libc::SYS_read, 0),
            Kind::Pread => (libc::SYS_pread64, a.offset),
            Kind::Write => (libc::SYS_write, 0),
            _ => (libc::SYS_pwrite64, a.offset),
        };
        let (p, n) = if kind.is_read() {
            let b = local.read_buf(a.len);
            (b.as_mut_ptr() as i64, b.len() as i64)
        } else {
            // A write on a stream goes through stdio.
            if !self.slots.ptr(a.slot, FILEP).is_null() {
                return Call::Whole;
            }
            let d = self.data(a.buf, 0, a.len, local);
            (d.as_ptr() as i64, d.len() as i64)
        };
        Call::Data {
            nr,
            a: [fd, p, n, off],
        }
    }

    fn ready_path(&self, kind: Kind, cmd: u32, local: &mut Local, r: &mut Ready) -> Call {
        let c = &self.compiled.commands[cmd as usize];
        if self.string(c.path).ends_with(b"/") {
            return Call::Whole;
        }
        let Ok((dir, name)) = self.parent(c.path, local) else {
            return Call::Whole;
        };
        r.gen = local.gen;
        match kind {
            Kind::Open => match c.out {
                Some(out) if c.flags & libc::O_PATH as i64 == 0 && is_plain(name) => {
                    r.how = OpenHow::component(c.flags, c.mode);
                    Call::Open {
                        dir,
                        name: name.as_ptr(),
                        out,
                        follow: c.flags & libc::O_NOFOLLOW as i64 == 0,
                    }
                }
                _ => Call::Whole,
            },
            _ => {
                touch(name);
                Call::StatAt {
                    dir,
                    name: name.as_ptr(),
                    follow: kind == Kind::Stat,
                }
            }
        }
    }

    /// From the step's own arguments: the whole command (~160 bytes, one
    /// or two cache misses after a call that read or wrote file data) is
    /// not read for these.
    fn ready_fd(&self, kind: Kind, a: &DataArgs, local: &mut Local) -> Call {
        let fd = self.slots.fd(a.slot);
        // glibc's fstat refuses a negative descriptor itself (the call
        // would stat the working directory for AT_FDCWD).
        if fd < 0 {
            return Call::Whole;
        }
        match kind {
            Kind::Close => match a.slot {
                Some(slot) => match self.slots.kind[slot as usize].load(Ordering::Relaxed) {
                    FD => Call::Close { fd, slot },
                    DIRP => Call::Dir(DirCall::CloseDir {
                        dir: self.slots.ptr(Some(slot), DIRP) as *mut libc::DIR,
                        slot,
                    }),
                    _ => Call::Whole,
                },
                None => Call::Whole,
            },
            Kind::Fstat => Call::Fstat { fd },
            _ => {
                let b = local.read_buf(a.len.max(4096));
                Call::Data {
                    nr: libc::SYS_getdents64,
                    a: [fd as i64, b.as_mut_ptr() as i64, b.len() as i64, 0],
                }
            }
        }
    }
}

impl Exec<'_> {
    /// The directory-stream calls on a slot: a stream to read, or a plain
    /// descriptor to make one of. Anything else (an empty slot, a stream
    /// where a descriptor was expected) is issued whole, which answers
    /// EBADF as the trace's conventions say.
    fn ready_dir(&self, kind: Kind, a: &DataArgs) -> Call {
        let Some(slot) = a.slot else {
            return Call::Whole;
        };
        let held = self.slots.kind[slot as usize].load(Ordering::Relaxed);
        match kind {
            Kind::Readdir if held == DIRP => Call::Dir(DirCall::Readdir {
                dir: self.slots.ptr(Some(slot), DIRP) as *mut libc::DIR,
            }),
            Kind::FdOpenDir if held == FD => Call::Dir(DirCall::FdOpenDir {
                fd: self.slots.fd(Some(slot)),
                slot,
            }),
            _ => Call::Whole,
        }
    }
}

impl Ready {
    /// Whether it is issued whole ([`Exec::issue`]): what
    /// [`Exec::prepare`] can do for it before its time is still to do.
    pub fn is_whole(&self) -> bool {
        matches!(self.call, Call::Whole)
    }

    /// Makes the call: the clock (`now`) read just before and just after
    /// it, and its result in the trace's conventions.
    #[inline(always)]
    pub fn fire(
        &mut self,
        exec: &Exec,
        kind: Kind,
        a: &DataArgs,
        cmd: u32,
        local: &mut Local,
        now: impl Fn() -> u64,
    ) -> (u64, (i64, i32), u64) {
        let (nr, args) = match self.call {
            Call::Dir(d) => return d.fire(exec, now),
            Call::Data { nr, a } => (nr, a),
            Call::Fstat { fd } => (
                libc::SYS_newfstatat,
                [
                    fd as i64,
                    c"".as_ptr() as i64,
                    self.st.as_mut_ptr() as i64,
                    libc::AT_EMPTY_PATH as i64,
                ],
            ),
            Call::Close { fd, .. } => (libc::SYS_close, [fd as i64, 0, 0, 0]),
            Call::Open { dir, name, .. } if self.current(exec) => (
                libc::SYS_openat,
                [dir as i64, name as i64, self.how.flags(), self.how.mode()],
            ),
            Call::StatAt { dir, name, .. } if self.current(exec) => (
                libc::SYS_newfstatat,
                [
                    dir as i64,
                    name as i64,
                    self.st.as_mut_ptr() as i64,
                    libc::AT_SYMLINK_NOFOLLOW as i64,
                ],
            ),
            _ => return whole_from(now(), exec, (kind, a, cmd), local, now),
        };
        let t0 = now();
        let r = raw::syscall4(nr, args[0], args[1], args[2], args[3]);
        let t1 = now();
        match self.call {
            Call::Open { out, .. } if r >= 0 => {
                exec.slots.set(out, FD, r as i32, std::ptr::null_mut())
            }
            // A symlink there: the traced open followed it.
            Call::Open { follow: true, .. }
                if r == -libc::ELOOP as i64 || r == -libc::ENOTDIR as i64 =>
            {
                return whole_from(t0, exec, (kind, a, cmd), local, now);
            }
            Call::StatAt { follow: true, .. }
                // SAFETY: the call succeeded, so the kernel filled it.
                if r == 0
                    && unsafe { self.st.assume_init_ref() }.st_mode & libc::S_IFMT
                        == libc::S_IFLNK =>
            {
                return whole_from(t0, exec, (kind, a, cmd), local, now);
            }
            // Emptied as Slots::close empties it, the descriptor closed.
            Call::Close { slot, .. } => {
                exec.slots.kind[slot as usize].store(EMPTY, Ordering::Relaxed);
                exec.slots.fd[slot as usize].store(-1, Ordering::Relaxed);
            }
            _ => {}
        }
        (t0, sys_ret(r), t1)
    }

    /// Whether the cached parent directory is still what its path names:
    /// no call that may change that (a rename, an unlink) came since.
    #[inline(always)]
    fn current(&self, exec: &Exec) -> bool {
        exec.gen.load(Ordering::Acquire) == self.gen
    }
}

impl DirCall {
    /// The directory-stream calls, made through libc as the traced program
    /// made them, timed from just before to just after the call; the slot
    /// is filled or emptied after the second clock read.
    #[inline(always)]
    fn fire(self, exec: &Exec, now: impl Fn() -> u64) -> (u64, (i64, i32), u64) {
        // SAFETY: the stream and the descriptor are the slot's own (checked
        // when made ready, and no other thread uses the slot meanwhile: the
        // compiler's ordering constraints); errno is this thread's.
        unsafe {
            match self {
                DirCall::Readdir { dir } => {
                    // The shim's readdir wrapper clears errno around the
                    // call too: NULL with errno 0 is the end of the stream.
                    let t0 = now();
                    *libc::__errno_location() = 0;
                    let e = libc::readdir(dir);
                    let got = if e.is_null() {
                        match last_errno() {
                            0 => (0, 0),
                            x => (-1, x),
                        }
                    } else {
                        (1, 0)
                    };
                    let t1 = now();
                    (t0, got, t1)
                }
                DirCall::FdOpenDir { fd, slot } => {
                    let t0 = now();
                    let d = libc::fdopendir(fd);
                    let t1 = now();
                    if d.is_null() {
                        return (t0, (-1, last_errno()), t1);
                    }
                    exec.slots.set(slot, DIRP, fd, d as *mut _);
                    (t0, (fd as i64, 0), t1)
                }
                DirCall::CloseDir { dir, slot } => {
                    let t0 = now();
                    let r = libc::closedir(dir);
                    let t1 = now();
                    let got = ret(r as i64);
                    // Emptied as Slots::close empties it.
                    exec.slots.kind[slot as usize].store(EMPTY, Ordering::Relaxed);
                    exec.slots.fd[slot as usize].store(-1, Ordering::Relaxed);
                    exec.slots.ptr[slot as usize].store(std::ptr::null_mut(), Ordering::Relaxed);
                    (t0, got, t1)
                }
            }
        }
    }
}

/// The command (kind, arguments, index) issued whole from `t0` on, when
/// it was not made ready or the ready call did not answer for it (a
/// symlink to follow from the root): one call, as the traced one was.
#[inline(never)]
fn whole_from(
    t0: u64,
    exec: &Exec,
    (kind, a, cmd): (Kind, &DataArgs, u32),
    local: &mut Local,
    now: impl Fn() -> u64,
) -> (u64, (i64, i32), u64) {
    let got = exec.issue(kind, a, cmd, local);
    (t0, got, now())
}

#[cfg(test)]
mod tests {
    use super::touch;
    use std::os::fd::AsRawFd;

    fn minor_faults() -> i64 {
        // SAFETY: getrusage fills the struct given.
        unsafe {
            let mut u: libc::rusage = std::mem::zeroed();
            assert_eq!(libc::getrusage(libc::RUSAGE_THREAD, &mut u), 0);
            u.ru_minflt
        }
    }

    /// `touch` reads the name itself: a name in a page of a file mapping
    /// that nothing has read yet is faulted in by it (before the call, as
    /// the program's own name was), not by the kernel in the call.
    #[test]
    fn touch_reads_the_name_before_the_call() {
        let f = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut &f, b"ppdev.h\0").unwrap();
        // SAFETY: a private read-only mapping of the file's first page,
        // unmapped at the end; the name in it ends with its NUL.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                f.as_raw_fd(),
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            let bytes = std::slice::from_raw_parts(p.cast::<u8>(), 8);
            let name = std::ffi::CStr::from_bytes_with_nul_unchecked(bytes);
            // Unmapped again whatever building the name read: the next
            // read of it faults.
            assert_eq!(libc::madvise(p, 4096, libc::MADV_DONTNEED), 0);
            let before = minor_faults();
            touch(name);
            assert!(minor_faults() > before, "the name was not read");
            libc::munmap(p, 4096);
        }
    }
}
