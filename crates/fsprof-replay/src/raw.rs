//! System calls issued directly, returning `-errno` on failure.
//!
//! Hand-written because libc's `syscall()` is variadic and reports failure
//! through `errno`: on the replay's hot path (a cached 1 KiB `pread`, a
//! few hundred ns in the kernel) reading `errno` back after every call
//! cost ~20 instructions per command (callgrind), and Rust's
//! `io::Error::last_os_error` around it as many again. The kernel already
//! returns `-errno` in the result register; this keeps it.

/// A system call with up to four integer arguments; `-errno` on failure.
///
/// Never inlined: a program makes its calls through its C library, each
/// from inside a called function, and on this project's test machine
/// (AMD EPYC VM) the kernel's time for the same call on the same file is
/// ~25% shorter when the `syscall` instruction sits inline in a loop
/// than when it sits in a function the loop calls (rdtsc around the
/// instruction itself; fstat 1,080 against 1,350 ticks, openat 3,140
/// against 4,310, close 1,300 against 1,810; as in glibc's wrappers). The
/// replay of a traced `tar` ran 0.3-0.6 powers of two faster than the
/// trace for exactly that reason (docs/benchmarks/history.md, replay13).
#[cfg(target_arch = "x86_64")]
#[inline(never)]
pub fn syscall4(n: libc::c_long, a: i64, b: i64, c: i64, d: i64) -> i64 {
    let ret: i64;
    // SAFETY: the x86-64 Linux system call convention (number in rax,
    // arguments in rdi, rsi, rdx, r10; rcx and r11 clobbered). Callers pass
    // descriptors and buffers valid for the lengths they pass, as for the
    // libc wrappers.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") n => ret,
            in("rdi") a,
            in("rsi") b,
            in("rdx") c,
            in("r10") d,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// A system call with up to four integer arguments; `-errno` on failure.
#[cfg(not(target_arch = "x86_64"))]
#[inline]
pub fn syscall4(n: libc::c_long, a: i64, b: i64, c: i64, d: i64) -> i64 {
    // SAFETY: as for the x86-64 version: callers pass valid arguments.
    let r = unsafe { libc::syscall(n, a, b, c, d) } as i64;
    if r == -1 {
        -(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO) as i64)
    } else {
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_and_errors_come_back_as_the_kernel_gives_them() {
        // A read of a descriptor that is not open: -EBADF, errno untouched.
        let mut b = [0u8; 4];
        assert_eq!(
            syscall4(libc::SYS_read, -1, b.as_mut_ptr() as i64, 4, 0),
            -(libc::EBADF as i64)
        );
        // A pread of a real file at an offset.
        let f = tempfile::tempfile().unwrap();
        use std::os::fd::AsRawFd;
        std::io::Write::write_all(&mut &f, b"abcdefgh").unwrap();
        let fd = f.as_raw_fd() as i64;
        assert_eq!(
            syscall4(libc::SYS_pread64, fd, b.as_mut_ptr() as i64, 4, 3),
            4
        );
        assert_eq!(&b, b"defg");
    }

    /// The replay's calls are made from inside a called function, as a C
    /// library makes a program's (see [`syscall4`]): the function is a
    /// symbol of its own in the built code, not inlined into its callers.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn calls_are_made_from_a_function_of_their_own() {
        // Used, so that the function is in this binary either way.
        std::hint::black_box(syscall4(libc::SYS_getppid, 0, 0, 0, 0));
        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new("nm")
            .arg(&exe)
            .output()
            .expect("nm (binutils) runs");
        assert!(out.status.success(), "{out:?}");
        let syms = String::from_utf8_lossy(&out.stdout);
        assert!(
            syms.lines()
                .any(|l| l.contains("fsprof_replay3raw8syscall4")
                    && (l.contains(" t ") || l.contains(" T "))),
            "no symbol of raw::syscall4 in {}: inlined into its callers",
            exe.display()
        );
    }
}
