//! System calls issued directly, returning `-errno` on failure.
//!
//! Hand-written because libc's `syscall()` is variadic and reports failure
//! through `errno`: on the replay's hot path (a cached 1 KiB `pread`, a
//! few hundred ns in the kernel) reading `errno` back after every call
//! cost ~20 instructions per command (callgrind), and Rust's
//! `io::Error::last_os_error` around it as many again. The kernel already
//! returns `-errno` in the result register; this keeps it.

/// A system call with up to four integer arguments; `-errno` on failure.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
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
}
