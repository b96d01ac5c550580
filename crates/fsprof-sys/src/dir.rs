//! A directory held open and listed again from its start, for a reader
//! that lists the same directory every few milliseconds (`fsprof trace`'s
//! run directory, every 5 ms): `std::fs::read_dir` opens it anew each
//! time, allocates a 32 KiB buffer and a path per entry, which was a third
//! of the harvest's own work on a loop of short processes. Hand-written
//! over libc's `DIR` because std has no rewind and the names are wanted
//! borrowed, not as `OsString`s.

use std::ffi::CStr;
use std::fs::File;
use std::io;
use std::os::fd::IntoRawFd;
use std::path::Path;

/// An open directory stream.
pub struct HeldDir {
    dir: std::ptr::NonNull<libc::DIR>,
}

impl HeldDir {
    /// Opens `path` as a directory (never through a link at its last
    /// component).
    pub fn open(path: &Path) -> io::Result<HeldDir> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = File::options()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)?;
        let fd = file.into_raw_fd();
        // SAFETY: fd is an open directory descriptor this function owns;
        // fdopendir takes it over on success.
        let dir = unsafe { libc::fdopendir(fd) };
        match std::ptr::NonNull::new(dir) {
            Some(dir) => Ok(HeldDir { dir }),
            None => {
                let e = io::Error::last_os_error();
                // SAFETY: fdopendir failed, so fd is still this function's.
                unsafe { libc::close(fd) };
                Err(e)
            }
        }
    }

    /// Calls `each` with the name of every entry (`.` and `..` included),
    /// as the directory holds them now.
    pub fn list(&mut self, mut each: impl FnMut(&[u8])) -> io::Result<()> {
        // SAFETY: self.dir is an open stream (closed only by Drop).
        unsafe { libc::rewinddir(self.dir.as_ptr()) };
        loop {
            // readdir reports an error only through errno, left as it was
            // at the end of the directory.
            // SAFETY: as above; errno is this thread's.
            unsafe { *libc::__errno_location() = 0 };
            // SAFETY: as above.
            let e = unsafe { libc::readdir64(self.dir.as_ptr()) };
            if e.is_null() {
                return match io::Error::last_os_error() {
                    err if err.raw_os_error() == Some(0) => Ok(()),
                    err => Err(err),
                };
            }
            // SAFETY: readdir returned an entry, valid until the next
            // readdir on this stream; d_name is NUL-terminated.
            let name = unsafe { CStr::from_ptr((*e).d_name.as_ptr()) };
            each(name.to_bytes());
        }
    }
}

impl Drop for HeldDir {
    fn drop(&mut self) {
        // SAFETY: the stream is open and not used after this.
        unsafe { libc::closedir(self.dir.as_ptr()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(d: &mut HeldDir) -> Vec<String> {
        let mut v = Vec::new();
        d.list(|n| v.push(String::from_utf8_lossy(n).into_owned()))
            .unwrap();
        v.retain(|n| n != "." && n != "..");
        v.sort();
        v
    }

    #[test]
    fn a_listing_again_sees_what_came_and_went_since_the_last() {
        let t = tempfile::tempdir().unwrap();
        let mut d = HeldDir::open(t.path()).unwrap();
        assert!(names(&mut d).is_empty());
        std::fs::write(t.path().join("t1"), b"").unwrap();
        std::fs::write(t.path().join("f0"), b"").unwrap();
        assert_eq!(names(&mut d), ["f0", "t1"]);
        std::fs::rename(t.path().join("f0"), t.path().join("t2")).unwrap();
        std::fs::remove_file(t.path().join("t1")).unwrap();
        assert_eq!(names(&mut d), ["t2"]);
    }

    #[test]
    fn a_link_or_a_file_is_refused() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("file"), b"").unwrap();
        std::os::unix::fs::symlink(t.path(), t.path().join("link")).unwrap();
        assert!(HeldDir::open(&t.path().join("file")).is_err());
        assert!(HeldDir::open(&t.path().join("link")).is_err());
    }
}
