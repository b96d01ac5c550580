//! A profile's file made before the profile: an unnamed file
//! (`O_TMPFILE`) in the directory it goes to, made while the command runs
//! and linked under the first free name once written. `fsprof run`
//! without `-o` makes it beside the command's start, so that the run's
//! end does not wait for the file system to create an inode (~25–45 µs
//! on ext4 here, the largest system call of the run's end;
//! docs/benchmarks/overhead.md, "Start-up, sixth session").
//!
//! The file has no name until it is whole: the command never sees it in
//! its directory, and a run killed before its end leaves nothing. Its
//! name is given by `linkat`, which, like the rename of [`crate::output`]
//! without `--force`, never replaces what is there. Where the file
//! system has no `O_TMPFILE` nothing is made, and the profile is written
//! as any other output.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// An unnamed file open for writing in a directory held open.
#[derive(Debug)]
pub struct Unnamed {
    dir: OwnedFd,
    file: File,
}

impl Unnamed {
    /// An unnamed file in `dir`, with the permission bits of a new output
    /// file (`0666` less the umask, never world-writable) from the start:
    /// no name reaches it before [`Unnamed::link_first_free`], so nobody
    /// can open it while it is written, and the run's end saves an
    /// `fchmod`.
    pub fn make(dir: &Path) -> io::Result<Unnamed> {
        let dir: OwnedFd = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
            .open(dir)?
            .into();
        let file = make_in(dir.as_raw_fd(), crate::output::new_file_mode())?;
        Ok(Unnamed { dir, file })
    }

    /// Writes `parts` and links the file under the first of `names` that
    /// is free. `Ok(None)` when every name
    /// was taken (the file is then dropped, unnamed: nothing is left).
    pub fn link_first_free(
        mut self,
        parts: &[&[u8]],
        names: impl IntoIterator<Item = String>,
    ) -> io::Result<Option<String>> {
        for p in parts {
            self.file.write_all(p)?;
        }
        for name in names {
            let cname = CString::new(name.as_bytes())
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in the name"))?;
            match link(&self.file, self.dir.as_raw_fd(), &cname) {
                Ok(()) => return Ok(Some(name)),
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }
}

/// An unnamed file open for writing in directory `dir`, with permission
/// bits `mode` (which the umask cannot narrow: set again by descriptor).
pub(crate) fn make_in(dir: RawFd, mode: libc::mode_t) -> io::Result<File> {
    let flags = libc::O_TMPFILE | libc::O_WRONLY | libc::O_CLOEXEC;
    // SAFETY: "." relative to the directory held; owned below.
    let f = unsafe { libc::openat(dir, c".".as_ptr(), flags, libc::c_uint::from(mode)) };
    if f < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor openat just gave us.
    let file = unsafe { File::from_raw_fd(f) };
    // The umask applied to openat's mode: a replaced file's bits may be
    // wider than it allows (`0664` under umask 022).
    if mode & !crate::output::new_file_mode() & 0o777 != 0 {
        // SAFETY: fchmod on the descriptor we hold.
        if unsafe { libc::fchmod(file.as_raw_fd(), mode) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(file)
}

/// Whether an error of [`make_in`] means the file system (or kernel) has
/// no `O_TMPFILE`, rather than that no file may be made there.
pub(crate) fn unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)
    )
}

/// Gives the unnamed `file` the name `name` in `dir` (never over anything:
/// `EEXIST`): by its descriptor where fsprof may (`AT_EMPTY_PATH` needs
/// CAP_DAC_READ_SEARCH: root), else through `/proc/self/fd`.
pub(crate) fn link(file: &File, dir: RawFd, name: &CStr) -> io::Result<()> {
    // SAFETY: NUL-terminated names; descriptors we hold.
    let rc = unsafe {
        libc::linkat(
            file.as_raw_fd(),
            c"".as_ptr(),
            dir,
            name.as_ptr(),
            libc::AT_EMPTY_PATH,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::ENOENT) {
        return Err(e);
    }
    let proc_path =
        CString::new(format!("/proc/self/fd/{}", file.as_raw_fd())).expect("no NUL in a number");
    // SAFETY: as above.
    let rc = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            proc_path.as_ptr(),
            dir,
            name.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    match rc {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// Nothing is seen in the directory before the link; the link takes
    /// the first free name and never replaces a file, a link or a
    /// directory; the file gets 0666 less the umask.
    #[test]
    fn linked_whole_under_the_first_free_name_and_never_over_anything() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("p.json"), b"mine").unwrap();
        std::os::unix::fs::symlink("nowhere", d.path().join("p-2.json")).unwrap();
        std::fs::create_dir(d.path().join("p-3.json")).unwrap();
        let u = Unnamed::make(d.path()).unwrap();
        let listed = || std::fs::read_dir(d.path()).unwrap().count();
        assert_eq!(listed(), 3, "the unnamed file is not in the directory");
        let names = (1..6).map(|n| match n {
            1 => "p.json".to_string(),
            n => format!("p-{n}.json"),
        });
        let got = u.link_first_free(&[b"{", b"}"], names).unwrap();
        assert_eq!(got.as_deref(), Some("p-4.json"));
        assert_eq!(std::fs::read(d.path().join("p.json")).unwrap(), b"mine");
        assert_eq!(std::fs::read(d.path().join("p-4.json")).unwrap(), b"{}");
        let mode = std::fs::metadata(d.path().join("p-4.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, crate::output::new_file_mode());
        let none = Unnamed::make(d.path()).unwrap();
        let taken = ["p.json".to_string()];
        assert_eq!(none.link_first_free(&[b"x"], taken).unwrap(), None);
        assert_eq!(listed(), 4, "a file no name was free for leaves nothing");
    }
}
