//! Where an output file may go. Every command that writes a file (`-o`)
//! goes through [`write_atomic`]: a regular file is replaced atomically
//! (a temporary file renamed into place, only with `--force`); a stream the
//! user named (a terminal, `/dev/stdout`, `/dev/null`, a FIFO) is written
//! into; anything else (a directory, a block device, a socket) is refused.
//! A rename never replaces something that is not a regular file: `-o
//! /dev/null --force` must not leave a regular file where the device was.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::format::FormatError;

/// What an output path names now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutputTarget {
    /// Nothing yet.
    New,
    /// A regular file (at the given path, symlinks resolved, so that a
    /// symlink to it stays a symlink).
    Regular(PathBuf),
    /// A character device or a FIFO: written into, never replaced.
    Stream,
}

/// Looks at `path` (following symlinks) and says how it may be written,
/// or why it may not.
pub fn output_target(path: &Path) -> Result<OutputTarget, FormatError> {
    let refuse = |what: &str| FormatError::NotWritable {
        path: path.to_owned(),
        what: what.to_string(),
    };
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return match fs::symlink_metadata(path) {
                Ok(_) => Err(refuse("a symbolic link to nothing")),
                Err(_) => Ok(OutputTarget::New),
            };
        }
        Err(source) => {
            return Err(FormatError::Write {
                path: path.to_owned(),
                source,
            })
        }
    };
    let t = meta.file_type();
    if t.is_file() {
        let real = fs::canonicalize(path).map_err(|source| FormatError::Write {
            path: path.to_owned(),
            source,
        })?;
        Ok(OutputTarget::Regular(real))
    } else if t.is_char_device() || t.is_fifo() {
        Ok(OutputTarget::Stream)
    } else if t.is_dir() {
        Err(refuse("a directory"))
    } else if t.is_block_device() {
        Err(refuse("a block device"))
    } else if t.is_socket() {
        Err(refuse("a socket"))
    } else {
        Err(refuse("not a regular file"))
    }
}

/// Checks, before any work is done, that `path` can be written: refused
/// kinds of file, or an existing regular file without `overwrite`.
pub fn check_output(path: &Path, overwrite: bool) -> Result<OutputTarget, FormatError> {
    let t = output_target(path)?;
    if matches!(t, OutputTarget::Regular(_)) && !overwrite {
        return Err(FormatError::Exists {
            path: path.to_owned(),
        });
    }
    Ok(t)
}

/// For writers that build a file beside `path` and rename it into place
/// (trace files): Ok if `path` is nothing yet or a regular file, the error
/// (as an io::Error, for their error types) otherwise.
pub fn ensure_renamable(path: &Path) -> io::Result<()> {
    match output_target(path) {
        Ok(OutputTarget::New) | Ok(OutputTarget::Regular(_)) => Ok(()),
        Ok(OutputTarget::Stream) => Err(io::Error::other(
            "it is a terminal, device or FIFO; this file is written to a regular file only",
        )),
        Err(e) => Err(io::Error::other(e.to_string())),
    }
}

/// Writes `bytes` to `path`: atomically for a file (readers never see a
/// half-written file, a failed write leaves nothing behind; without
/// `overwrite` an existing file is never replaced, even one that appears
/// while we write), straight into a terminal, device or FIFO.
pub fn write_atomic(path: &Path, bytes: &[u8], overwrite: bool) -> Result<(), FormatError> {
    let werr = |source: io::Error| FormatError::Write {
        path: path.to_owned(),
        source,
    };
    let target = match check_output(path, overwrite)? {
        OutputTarget::Stream => return write_into(path, bytes).map_err(werr),
        OutputTarget::Regular(real) => real,
        OutputTarget::New => path.to_owned(),
    };
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    let name = target.file_name().ok_or_else(|| {
        werr(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a file name",
        ))
    })?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        // No fsync: the rename already guarantees readers a whole file, and
        // a flush to disk would add milliseconds to every short `fsprof run`.
        f.write_all(bytes)?;
        if overwrite {
            // What is there now must still be a regular file (or nothing):
            // a rename would replace anything else.
            match output_target(&target) {
                Ok(OutputTarget::Regular(_)) | Ok(OutputTarget::New) => {}
                _ => {
                    return Err(io::Error::new(
                        io::ErrorKind::AlreadyExists,
                        "replaced by something that is not a regular file",
                    ))
                }
            }
            fs::rename(&tmp, &target)
        } else {
            // link(2) fails if the target exists: a no-clobber rename.
            fs::hard_link(&tmp, &target)
        }
    })();
    let _ = fs::remove_file(&tmp);
    match result {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(FormatError::Exists {
            path: path.to_owned(),
        }),
        Err(e) => Err(werr(e)),
    }
}

/// Writes into a character device or FIFO. A FIFO nobody reads is an
/// error (ENXIO), not a hang.
fn write_into(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let f = fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENXIO) => io::Error::other("no process is reading this FIFO"),
            _ => e,
        })?;
    // Blocking writes from here on: a slow reader is waited for.
    use std::os::fd::AsRawFd;
    let fd = f.as_raw_fd();
    // SAFETY: F_GETFL/F_SETFL on a descriptor we own and keep open.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK);
    }
    (&f).write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn mkfifo(p: &Path) {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path; mkfifo only creates a node.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn a_fifo_is_written_into_never_replaced() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        mkfifo(&fifo);
        // Nobody reads: an error, not a hang, and the FIFO stays.
        let e = write_atomic(&fifo, b"x", true).unwrap_err();
        assert!(e.to_string().contains("no process is reading"), "{e}");
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        // Wait for the reader to open its end.
        let t = std::time::Instant::now();
        loop {
            match write_atomic(&fifo, b"profile", true) {
                Ok(()) => break,
                Err(_) if t.elapsed().as_secs() < 10 => {
                    std::thread::sleep(std::time::Duration::from_millis(10))
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(reader.join().unwrap(), b"profile");
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    }

    #[test]
    fn sockets_directories_and_dangling_links_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let sock = d.path().join("sock");
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let e = write_atomic(&sock, b"x", true).unwrap_err();
        assert!(e.to_string().contains("a socket"), "{e}");
        assert!(fs::symlink_metadata(&sock).unwrap().file_type().is_socket());
        let e = write_atomic(d.path(), b"x", true).unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");
        let dangling = d.path().join("dangling");
        symlink(d.path().join("nothing"), &dangling).unwrap();
        let e = write_atomic(&dangling, b"x", true).unwrap_err();
        assert!(e.to_string().contains("symbolic link to nothing"), "{e}");
    }

    #[test]
    fn a_symlink_to_a_file_stays_a_symlink() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("real.json");
        fs::write(&file, "old").unwrap();
        let link = d.path().join("link.json");
        symlink(&file, &link).unwrap();
        assert!(matches!(
            write_atomic(&link, b"new", false),
            Err(FormatError::Exists { .. })
        ));
        write_atomic(&link, b"new", true).unwrap();
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read_to_string(&file).unwrap(), "new");
    }

    /// /dev/null's device is written into; the node stays a device (a
    /// private one: the test must not touch the real /dev/null).
    #[test]
    #[ignore = "needs root"]
    fn a_device_node_is_never_replaced_by_a_file() {
        // SAFETY: geteuid has no preconditions.
        let euid = unsafe { libc::geteuid() };
        assert_eq!(euid, 0, "this test needs root (mknod)");
        let d = tempfile::tempdir().unwrap();
        let null = d.path().join("null");
        let c = std::ffi::CString::new(null.as_os_str().as_encoded_bytes()).unwrap();
        let dev = libc::makedev(1, 3);
        // SAFETY: a NUL-terminated path; mknod only creates a node.
        let rc = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, dev) };
        assert_eq!(rc, 0);
        write_atomic(&null, b"profile", true).unwrap();
        write_atomic(&null, b"profile", false).unwrap();
        assert!(fs::symlink_metadata(&null)
            .unwrap()
            .file_type()
            .is_char_device());
    }
}
