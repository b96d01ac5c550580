//! The one writer of every file a command makes: `-o`, `--profile`,
//! `--timing`, `--plot`, traces, replay files, a mount's profile at
//! unmount. fsprof often runs as root in directories other users can
//! write to, so a name is looked up in a way no other user can redirect.
//!
//! # What `-o NAME` may be, and what `--force` replaces
//!
//! NAME's directory part is looked up like any path (a symbolic link in it
//! is followed) and opened once; everything after happens inside that
//! descriptor, and NAME's last component is never resolved:
//!
//! - **nothing yet**: a file is created.
//! - **a regular file or a symbolic link**: refused without `--force`
//!   ("exists"); with `--force` the *name* is replaced. A symbolic link is
//!   replaced by the new file; the file it pointed to is never opened,
//!   written or changed.
//! - **fsprof's own descriptors** — `/dev/stdout`, `/dev/stderr`,
//!   `/dev/stdin`, `/dev/fd/N`, `/proc/self/fd/N` (as process substitution
//!   makes them: `-o >(gzip > p.json.gz)`): written into the descriptor
//!   fsprof already holds; no name is opened. A standard descriptor that
//!   was closed when fsprof started (`>&-`) is refused: what is there now
//!   is `/dev/null`, and the output would be lost ([`crate::stdio`]).
//! - **a character device** (`/dev/null`, a terminal) **or a FIFO**:
//!   written into, never replaced, and only when it belongs to root or to
//!   the user fsprof runs as. Root therefore never hands its output to a
//!   FIFO another user planted (nor blocks on it); a FIFO nobody reads is
//!   an error, not a hang.
//! - **a directory, a block device, a socket**, and any other name in
//!   `/proc`: refused. So is a name that ends in `/`.
//!
//! A file is written under a temporary name in the same directory
//! (`openat(O_CREAT|O_EXCL|O_NOFOLLOW)`, mode 0600 while it is written),
//! then renamed onto NAME (with `--force` swapped with what is there,
//! `renameat2(RENAME_EXCHANGE)`, and the old file unlinked, see
//! `replace`; `renameat2(RENAME_NOREPLACE)` without `--force`, so a file
//! that appears meanwhile is not replaced either): readers see the old
//! file or the whole new one, and a failed
//! write leaves nothing behind. The file gets the permission bits of the
//! regular file it replaces, else `0666` minus the umask, and never
//! world-write.
//!
//! Hand-written because no crate does this: tempfile's and atomicwrites'
//! `persist` rename by path (the directory is looked up again at the
//! rename), and none knows streams, devices or fsprof's descriptors.

use std::ffi::{CStr, CString, OsStr};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

use crate::format::FormatError;

/// What an output name is now (looked at, never followed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputTarget {
    /// Nothing yet: a file is created.
    New,
    /// A regular file: replaced with `--force`.
    Regular,
    /// A symbolic link: the link is replaced with `--force`.
    Symlink,
    /// A character device or a FIFO of root's or ours: written into.
    Stream,
    /// One of fsprof's descriptors (`/dev/stdout`, `/dev/fd/N`): written
    /// into.
    Descriptor(RawFd),
}

/// NAME's directory, held open, and NAME in it.
struct Place {
    path: PathBuf,
    dir: OwnedFd,
    name: CString,
}

impl Place {
    fn refuse(&self, what: impl Into<String>) -> FormatError {
        FormatError::NotWritable {
            path: self.path.clone(),
            what: what.into(),
        }
    }

    fn werr(&self, source: io::Error) -> FormatError {
        FormatError::Write {
            path: self.path.clone(),
            source,
        }
    }
}

/// Checks, before any work is done, that `path` can be written: refused
/// kinds of file, or an existing file or link without `overwrite`.
pub fn check_output(path: &Path, overwrite: bool) -> Result<OutputTarget, FormatError> {
    let place = locate(path)?;
    let (target, _) = classify(&place)?;
    if matches!(target, OutputTarget::Regular | OutputTarget::Symlink) && !overwrite {
        return Err(FormatError::Exists {
            path: path.to_owned(),
        });
    }
    Ok(target)
}

/// Checks that standard descriptor `fd` can take output (`-o -`): open,
/// writable, and not closed when fsprof started (`>&-`).
pub fn check_std(fd: RawFd) -> Result<(), FormatError> {
    writable_descriptor(fd).map_err(|what| FormatError::NotWritable {
        path: PathBuf::from(crate::stdio::name(fd)),
        what,
    })
}

/// Writes `bytes` to `path` by the rules of this module: a file appears
/// whole or not at all; without `overwrite` nothing that exists is
/// replaced, even what appears while we write.
pub fn write_atomic(path: &Path, bytes: &[u8], overwrite: bool) -> Result<(), FormatError> {
    write_atomic_parts(path, &[bytes], overwrite)
}

/// [`write_atomic`] of the concatenation of `parts`.
pub fn write_atomic_parts(
    path: &Path,
    parts: &[&[u8]],
    overwrite: bool,
) -> Result<(), FormatError> {
    OutputFile::create(path, overwrite)?.write_and_commit(parts)
}

/// An output being written: a temporary file renamed onto its name by
/// [`OutputFile::commit`] (removed if dropped before), or a stream or
/// descriptor written into.
pub struct OutputFile {
    file: File,
    staged: Option<Staged>,
    path: PathBuf,
}

/// The temporary file of an [`OutputFile`] and where it goes.
struct Staged {
    place: Place,
    /// Its name in the directory; `None` while it has none (made with
    /// `O_TMPFILE`, [`OutputFile::create_ahead`]).
    tmp: Option<CString>,
    overwrite: bool,
    mode: libc::mode_t,
    placed: bool,
}

impl OutputFile {
    /// Opens `path` for output: a file, a stream or a descriptor.
    pub fn create(path: &Path, overwrite: bool) -> Result<OutputFile, FormatError> {
        Self::open(path, overwrite, true)
    }

    /// [`OutputFile::create`] long before the output is written (a
    /// capture's profile, written at its end): the checks, and for a file
    /// the file itself, are done now, so that a name that cannot be
    /// written fails before the capture, and its end only writes. The
    /// file is made unnamed (`O_TMPFILE`) where the file system can:
    /// nothing appears in its directory meanwhile and a process killed
    /// before [`OutputFile::commit`] leaves nothing; elsewhere it is the
    /// usual temporary name. `None` for a stream or a descriptor, opened
    /// when written (a FIFO's reader may come later).
    pub fn create_ahead(path: &Path, overwrite: bool) -> Result<Option<OutputFile>, FormatError> {
        let place = locate(path)?;
        let (target, st) = classify(&place)?;
        match target {
            OutputTarget::Stream | OutputTarget::Descriptor(_) => Ok(None),
            OutputTarget::Regular | OutputTarget::Symlink if !overwrite => {
                Err(FormatError::Exists {
                    path: path.to_owned(),
                })
            }
            OutputTarget::New | OutputTarget::Regular | OutputTarget::Symlink => {
                let mode = staged_mode(target, st.as_ref());
                match crate::unnamed::make_in(place.dir.as_raw_fd(), mode) {
                    Ok(file) => Ok(Some(OutputFile {
                        file,
                        path: place.path.clone(),
                        staged: Some(Staged {
                            place,
                            tmp: None,
                            overwrite,
                            mode,
                            placed: false,
                        }),
                    })),
                    Err(e) if crate::unnamed::unsupported(&e) => {
                        stage(place, overwrite, mode).map(Some)
                    }
                    Err(e) => Err(place.werr(e)),
                }
            }
        }
    }

    /// Like [`OutputFile::create`] for files that must be regular files
    /// (a trace, a replay file): streams and descriptors are refused.
    pub fn create_file(path: &Path, overwrite: bool) -> Result<OutputFile, FormatError> {
        Self::open(path, overwrite, false)
    }

    fn open(path: &Path, overwrite: bool, streams: bool) -> Result<OutputFile, FormatError> {
        let place = locate(path)?;
        let (target, st) = classify(&place)?;
        let file = match target {
            OutputTarget::Stream | OutputTarget::Descriptor(_) if !streams => {
                return Err(place.refuse(
                    "it is a terminal, device, FIFO or descriptor; this file is written to a regular file only",
                ))
            }
            OutputTarget::Descriptor(fd) => dup(fd).map_err(|e| place.werr(e))?,
            OutputTarget::Stream => open_stream(&place, &st.expect("a stream was stat'ed"))?,
            OutputTarget::Regular | OutputTarget::Symlink if !overwrite => {
                return Err(FormatError::Exists {
                    path: path.to_owned(),
                })
            }
            OutputTarget::New | OutputTarget::Regular | OutputTarget::Symlink => {
                return stage(place, overwrite, staged_mode(target, st.as_ref()));
            }
        };
        Ok(OutputFile {
            file,
            staged: None,
            path: path.to_owned(),
        })
    }

    /// The file being written (to sync it, say).
    pub fn as_file(&self) -> &File {
        &self.file
    }

    /// Writes `parts`, then [`OutputFile::commit`]s.
    pub fn write_and_commit(mut self, parts: &[&[u8]]) -> Result<(), FormatError> {
        for bytes in parts {
            self.file
                .write_all(bytes)
                .map_err(|source| FormatError::Write {
                    path: self.path.clone(),
                    source,
                })?;
        }
        self.commit()
    }

    /// Puts a written file in place under its name (streams and
    /// descriptors have nothing to put in place).
    pub fn commit(mut self) -> Result<(), FormatError> {
        let Some(s) = self.staged.as_mut() else {
            return Ok(());
        };
        let (dir, name) = (s.place.dir.as_raw_fd(), s.place.name.as_c_str());
        if s.tmp.is_none() {
            // Unnamed, its bits set when it was made: a link never
            // replaces, so without --force (or with nothing there) the
            // link is all; to replace, it is given a temporary name first.
            match crate::unnamed::link(&self.file, dir, name) {
                Ok(()) => {
                    s.placed = true;
                    return Ok(());
                }
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) && !s.overwrite => {
                    return Err(FormatError::Exists {
                        path: self.path.clone(),
                    })
                }
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                    s.tmp = Some(link_temporary(&self.file, &s.place)?);
                }
                Err(e) => return Err(s.place.werr(e)),
            }
        } else {
            // SAFETY: fchmod on the descriptor we hold.
            if unsafe { libc::fchmod(self.file.as_raw_fd(), s.mode) } != 0 {
                return Err(s.place.werr(io::Error::last_os_error()));
            }
        }
        let tmp = s.tmp.as_deref().expect("named by now");
        if s.overwrite {
            // A rename would replace whatever is there now: only a file or
            // a link may be (something else may have appeared meanwhile).
            match lstat_at(dir, name) {
                Ok(st) if !matches!(st.st_mode & libc::S_IFMT, libc::S_IFREG | libc::S_IFLNK) => {
                    return Err(s.place.refuse(format!("it is now {}", kind(&st))))
                }
                Err(e) if e.raw_os_error() != Some(libc::ENOENT) => return Err(s.place.werr(e)),
                _ => {}
            }
            replace(dir, tmp, name).map_err(|e| match e {
                Replace::Io(e) => s.place.werr(e),
                Replace::Now(what) => s.place.refuse(format!("it is now {what}")),
            })?;
        } else {
            rename_noreplace(dir, tmp, name).map_err(|e| match e.kind() {
                io::ErrorKind::AlreadyExists => FormatError::Exists {
                    path: self.path.clone(),
                },
                _ => s.place.werr(e),
            })?;
        }
        s.placed = true;
        Ok(())
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        let staged = self.staged.as_ref().filter(|s| !s.placed);
        if let Some((s, tmp)) = staged.and_then(|s| Some((s, s.tmp.as_ref()?))) {
            // Not committed (an error on the way): leave nothing behind.
            // SAFETY: a NUL-terminated name relative to the held directory.
            unsafe { libc::unlinkat(s.place.dir.as_raw_fd(), tmp.as_ptr(), 0) };
        }
    }
}

/// Splits `path` into its directory, opened (following links there), and
/// its last component.
fn locate(path: &Path) -> Result<Place, FormatError> {
    let bytes = path.as_os_str().as_bytes();
    let refuse = |what: &str| FormatError::NotWritable {
        path: path.to_owned(),
        what: what.into(),
    };
    let names_a_dir = bytes.is_empty()
        || bytes.ends_with(b"/")
        || bytes.ends_with(b"/.")
        || bytes.ends_with(b"/..")
        || bytes == b"."
        || bytes == b"..";
    let name = match path.file_name() {
        Some(n) if !names_a_dir => n,
        _ => return Err(refuse("it names a directory")),
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let werr = |source| FormatError::Write {
        path: path.to_owned(),
        source,
    };
    let cdir = cstring(dir.as_os_str()).map_err(werr)?;
    let name = cstring(name).map_err(werr)?;
    // SAFETY: a NUL-terminated path; the descriptor is owned below.
    let fd = unsafe {
        libc::open(
            cdir.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return Err(werr(io::Error::new(
            e.kind(),
            format!("directory {}: {e}", dir.display()),
        )));
    }
    Ok(Place {
        path: path.to_owned(),
        // SAFETY: a descriptor open() just gave us.
        dir: unsafe { OwnedFd::from_raw_fd(fd) },
        name,
    })
}

/// What NAME is, by the rules of the module doc; the stat of a stream or
/// a regular file.
fn classify(p: &Place) -> Result<(OutputTarget, Option<libc::stat>), FormatError> {
    if let Some(fd) = own_descriptor(p) {
        writable_descriptor(fd).map_err(|what| p.refuse(what))?;
        return Ok((OutputTarget::Descriptor(fd), None));
    }
    if on_procfs(p.dir.as_raw_fd()) {
        return Err(p.refuse(
            "it is in /proc, where fsprof writes only into its own descriptors (/proc/self/fd/N)",
        ));
    }
    let st = match lstat_at(p.dir.as_raw_fd(), &p.name) {
        Ok(st) => st,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok((OutputTarget::New, None)),
        Err(e) => return Err(p.werr(e)),
    };
    let target = match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => OutputTarget::Regular,
        libc::S_IFLNK => OutputTarget::Symlink,
        libc::S_IFCHR | libc::S_IFIFO => {
            // SAFETY: geteuid has no preconditions.
            let me = unsafe { libc::geteuid() };
            if st.st_uid != 0 && st.st_uid != me {
                return Err(p.refuse(format!(
                    "it is {} of another user (uid {}); fsprof writes into FIFOs and devices of root or of its own user only",
                    kind(&st),
                    st.st_uid
                )));
            }
            OutputTarget::Stream
        }
        _ => return Err(p.refuse(format!("it is {}", kind(&st)))),
    };
    Ok((target, Some(st)))
}

/// "a directory", "a socket", ... for messages.
fn kind(st: &libc::stat) -> &'static str {
    match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => "a regular file",
        libc::S_IFLNK => "a symbolic link",
        libc::S_IFDIR => "a directory",
        libc::S_IFBLK => "a block device",
        libc::S_IFCHR => "a character device",
        libc::S_IFIFO => "a FIFO",
        libc::S_IFSOCK => "a socket",
        _ => "not a regular file",
    }
}

/// The descriptor NAME stands for when it is one of fsprof's own:
/// `stdin`, `stdout`, `stderr` in `/dev`; a number in this process's
/// `/proc/.../fd` (which `/dev/fd` links to).
fn own_descriptor(p: &Place) -> Option<RawFd> {
    let name = p.name.to_bytes();
    // Only these names can be one; any other is not looked up (the
    // directory checks below cost three stats, one of them in /proc, on
    // every profile written).
    let std_name = matches!(name, b"stdin" | b"stdout" | b"stderr");
    if !std_name && (name.is_empty() || !name.iter().all(u8::is_ascii_digit)) {
        return None;
    }
    let dir = fstat(p.dir.as_raw_fd()).ok()?;
    let is =
        |path: &CStr| stat(path).is_ok_and(|s| s.st_dev == dir.st_dev && s.st_ino == dir.st_ino);
    if is(c"/dev") {
        return match name {
            b"stdin" => Some(0),
            b"stdout" => Some(1),
            b"stderr" => Some(2),
            _ => None,
        };
    }
    if is(c"/proc/self/fd") || is(c"/proc/thread-self/fd") {
        return std::str::from_utf8(name).ok()?.parse().ok();
    }
    None
}

/// Ok if output can go into descriptor `fd`; else why not.
fn writable_descriptor(fd: RawFd) -> Result<(), String> {
    let name = crate::stdio::name(fd);
    if crate::stdio::closed_at_start(fd) {
        return Err(format!(
            "{name} was closed when fsprof started (>&-): what is written there would be lost"
        ));
    }
    // SAFETY: F_GETFL only asks about the descriptor.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if fl == -1 {
        return Err(format!("{name} is not open"));
    }
    if fl & libc::O_PATH != 0 || fl & libc::O_ACCMODE == libc::O_RDONLY {
        return Err(format!("{name} is not open for writing"));
    }
    match fstat(fd) {
        Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFDIR => {
            Err(format!("{name} is a directory"))
        }
        _ => Ok(()),
    }
}

/// A descriptor of our own on what `fd` is open on.
fn dup(fd: RawFd) -> io::Result<File> {
    // SAFETY: duplicates a descriptor checked to be open; the copy is ours.
    let d = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if d < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor we just made.
    Ok(unsafe { File::from_raw_fd(d) })
}

/// Opens a device or FIFO that `st` described, never following a link,
/// and checks it is still that one.
fn open_stream(p: &Place, st: &libc::stat) -> Result<File, FormatError> {
    let flags = libc::O_WRONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY;
    // SAFETY: a NUL-terminated name relative to the held directory.
    let fd = unsafe { libc::openat(p.dir.as_raw_fd(), p.name.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::ENXIO) => p.refuse("no process is reading this FIFO"),
            _ => p.werr(e),
        });
    }
    // SAFETY: a descriptor openat just gave us.
    let f = unsafe { File::from_raw_fd(fd) };
    match fstat(fd) {
        Ok(now) if now.st_dev == st.st_dev && now.st_ino == st.st_ino => {}
        _ => return Err(p.refuse("it changed while being opened")),
    }
    // Blocking writes from here on: a slow reader is waited for. The open
    // file description is our own (we opened it), so no one else's changes.
    // SAFETY: F_GETFL/F_SETFL on a descriptor we own.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK);
    }
    Ok(f)
}

/// Temporary files made by this process so far (names must differ).
static TEMPS: AtomicU32 = AtomicU32::new(0);

/// The permission bits of the file that goes under NAME: those of the
/// regular file it replaces, else the umask's; never world-write.
fn staged_mode(target: OutputTarget, st: Option<&libc::stat>) -> libc::mode_t {
    let mode = match (target, st) {
        (OutputTarget::Regular, Some(st)) => st.st_mode & 0o777,
        _ => 0o666 & !umask(),
    };
    mode & !0o002
}

/// Calls `make` with temporary names beside NAME until it does not say
/// `EEXIST` (a name left by an earlier process of the same pid, or
/// planted); the name it took and what it made.
fn temporary<T>(
    place: &Place,
    mut make: impl FnMut(&CStr) -> io::Result<T>,
) -> Result<(CString, T), FormatError> {
    // A short prefix of NAME keeps the temporary name within NAME_MAX.
    let stem: Vec<u8> = place.name.to_bytes().iter().take(200).copied().collect();
    for _ in 0..100 {
        let mut tmp = b".".to_vec();
        tmp.extend_from_slice(&stem);
        let n = TEMPS.fetch_add(1, Relaxed);
        tmp.extend_from_slice(format!(".tmp-{}-{n}", std::process::id()).as_bytes());
        let tmp = CString::new(tmp).expect("no NUL in a file name");
        match make(&tmp) {
            Ok(made) => return Ok((tmp, made)),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => continue,
            Err(e) => return Err(place.werr(e)),
        }
    }
    Err(place.werr(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "no free temporary name in its directory",
    )))
}

/// Creates the temporary file beside NAME in the held directory.
fn stage(place: Place, overwrite: bool, mode: libc::mode_t) -> Result<OutputFile, FormatError> {
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let (tmp, file) = temporary(&place, |tmp| {
        // SAFETY: a NUL-terminated name relative to the held directory.
        let fd = unsafe { libc::openat(place.dir.as_raw_fd(), tmp.as_ptr(), flags, 0o600) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor openat just gave us.
        Ok(unsafe { File::from_raw_fd(fd) })
    })?;
    Ok(OutputFile {
        file,
        path: place.path.clone(),
        staged: Some(Staged {
            place,
            tmp: Some(tmp),
            overwrite,
            mode,
            placed: false,
        }),
    })
}

/// Gives an unnamed `file` a temporary name beside NAME (to be swapped
/// with what NAME is: [`replace`]).
fn link_temporary(file: &File, place: &Place) -> Result<CString, FormatError> {
    temporary(place, |tmp| {
        crate::unnamed::link(file, place.dir.as_raw_fd(), tmp)
    })
    .map(|(tmp, ())| tmp)
}

/// Why [`replace`] failed.
enum Replace {
    Io(io::Error),
    /// NAME became something that is not a file or a link meanwhile
    /// (what it is).
    Now(&'static str),
}

/// Puts `tmp` in place of `name` in `dir`, which holds a file, a link or
/// nothing: readers see the old file or the new one, never neither.
///
/// Swapped (`renameat2(RENAME_EXCHANGE)`), then the old one removed under
/// the temporary name, rather than renamed over: ext4 (`auto_da_alloc`)
/// allocates and starts writing the new file's blocks before a rename
/// over an existing file returns, 0.5–1 ms for a 60 KB trace on this
/// project's test machine, against ~0.1 ms for the swap and the unlink
/// (docs/benchmarks/trace-replay.md, "The fixed cost of one trace").
/// What is given up is that heuristic's promise after a crash within the
/// next few seconds (the new file's data may not be on disk; the user
/// asked for the old one to go), as for any new output, which fsprof does
/// not fsync either. What the swap took out is checked before it is removed,
/// never followed (a link is removed, not what it points to), and swapped
/// back if it is neither a file nor a link. Where the file system cannot
/// swap, or nothing is there, a plain rename.
fn replace(dir: RawFd, tmp: &CStr, name: &CStr) -> Result<(), Replace> {
    if !exchange(dir, tmp, name) {
        // SAFETY: NUL-terminated names relative to the held directory.
        if unsafe { libc::renameat(dir, tmp.as_ptr(), dir, name.as_ptr()) } != 0 {
            return Err(Replace::Io(io::Error::last_os_error()));
        }
        return Ok(());
    }
    let old = lstat_at(dir, tmp).map_err(Replace::Io)?;
    if !matches!(old.st_mode & libc::S_IFMT, libc::S_IFREG | libc::S_IFLNK) {
        exchange(dir, tmp, name);
        return Err(Replace::Now(kind(&old)));
    }
    // SAFETY: a NUL-terminated name relative to the held directory; flags
    // 0: removes the name, follows nothing. The
    // new file is in place whatever this returns (a failure leaves the
    // old one under the temporary name).
    unsafe { libc::unlinkat(dir, tmp.as_ptr(), 0) };
    Ok(())
}

/// Swaps the entries `a` and `b` of `dir` (`renameat2(RENAME_EXCHANGE)`);
/// whether it did.
fn exchange(dir: RawFd, a: &CStr, b: &CStr) -> bool {
    // SAFETY: NUL-terminated names relative to the held directory.
    unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            dir,
            a.as_ptr(),
            dir,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        ) == 0
    }
}

/// `renameat2(RENAME_NOREPLACE)`; where the file system does not support
/// it, `linkat` (which never replaces either) and `unlinkat`.
fn rename_noreplace(dir: RawFd, tmp: &CStr, name: &CStr) -> io::Result<()> {
    // SAFETY: NUL-terminated names relative to the held directory.
    let r = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            dir,
            tmp.as_ptr(),
            dir,
            name.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if !matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) {
        return Err(e);
    }
    // SAFETY: as above; flags 0: a link to the temporary file itself.
    if unsafe { libc::linkat(dir, tmp.as_ptr(), dir, name.as_ptr(), 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    unsafe { libc::unlinkat(dir, tmp.as_ptr(), 0) };
    Ok(())
}

/// The process's umask as [`note_umask`] was told it.
static UMASK: std::sync::OnceLock<libc::mode_t> = std::sync::OnceLock::new();

/// Tells this module the process's umask, which the caller read with
/// umask(2) while it was the only thread (fsprof's `main` does, first
/// thing). Without it the umask is read from `/proc/self/status` when the
/// first new file is made: ~50 µs at the end of every `fsprof run` that
/// writes a profile file (docs/benchmarks/overhead.md, "fsprof's own
/// start-up, stage by stage"). The first value given is kept.
pub fn note_umask(mask: libc::mode_t) {
    let _ = UMASK.set(mask & 0o777);
}

/// The process's umask: as noted at start, else from /proc (reading it
/// with umask(2) would change it for a moment under other threads); 022
/// if /proc does not say.
fn umask() -> libc::mode_t {
    *UMASK.get_or_init(|| {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                let v = s.lines().find_map(|l| l.strip_prefix("Umask:"))?;
                libc::mode_t::from_str_radix(v.trim(), 8).ok()
            })
            .unwrap_or(0o022)
    })
}

/// The permission bits of a new output file: `0666` less the umask,
/// never world-writable.
pub(crate) fn new_file_mode() -> libc::mode_t {
    0o666 & !umask() & !0o002
}

fn cstring(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in the name"))
}

fn lstat_at(dir: RawFd, name: &CStr) -> io::Result<libc::stat> {
    // SAFETY: stat is plain data filled by fstatat; a NUL-terminated name.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstatat(dir, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(st)
    }
}

fn fstat(fd: RawFd) -> io::Result<libc::stat> {
    // SAFETY: stat is plain data filled by fstat.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(st)
    }
}

fn stat(path: &CStr) -> io::Result<libc::stat> {
    // SAFETY: stat is plain data filled by stat; a NUL-terminated path.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::stat(path.as_ptr(), &mut st) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(st)
    }
}

/// Whether `dir` is on procfs.
fn on_procfs(dir: RawFd) -> bool {
    // SAFETY: statfs is plain data filled by fstatfs.
    unsafe {
        let mut s: libc::statfs = std::mem::zeroed();
        libc::fstatfs(dir, &mut s) == 0 && s.f_type as u64 == libc::PROC_SUPER_MAGIC as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;
    use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};

    fn mkfifo(p: &Path) {
        let c = CString::new(p.as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path; mkfifo only creates a node.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    /// A scratch directory for a test that needs root (for `why`).
    fn root_tempdir(why: &str) -> tempfile::TempDir {
        // SAFETY: geteuid has no preconditions.
        let euid = unsafe { libc::geteuid() };
        assert_eq!(euid, 0, "this test needs root ({why})");
        tempfile::tempdir().unwrap()
    }

    /// The names in `dir`, sorted.
    fn sorted_names(dir: &Path) -> Vec<String> {
        let mut v: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    }

    fn mode(p: &Path) -> u32 {
        fs::symlink_metadata(p).unwrap().mode() & 0o7777
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
            std::thread::spawn(move || fs::read(fifo).unwrap())
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
    fn sockets_directories_and_names_in_proc_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let sock = d.path().join("sock");
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let e = write_atomic(&sock, b"x", true).unwrap_err();
        assert!(e.to_string().contains("it is a socket"), "{e}");
        assert!(fs::symlink_metadata(&sock).unwrap().file_type().is_socket());
        let e = write_atomic(d.path(), b"x", true).unwrap_err();
        assert!(e.to_string().contains("it is a directory"), "{e}");
        for p in ["new/", "new/.", "..", "/"] {
            let e = write_atomic(&d.path().join(p), b"x", true).unwrap_err();
            assert!(e.to_string().contains("names a directory"), "{p}: {e}");
        }
        assert!(!d.path().join("new").exists());
        for p in ["/proc/uptime", "/proc/1/fd/1", "/proc/self/fd/x"] {
            let e = check_output(Path::new(p), true).unwrap_err();
            assert!(e.to_string().contains("in /proc"), "{p}: {e}");
        }
        assert_eq!(
            fs::read_dir(d.path()).unwrap().count(),
            1,
            "a temporary file stayed"
        );
    }

    /// The last component is never resolved: a link (dangling or not) is
    /// a name that exists, and `--force` replaces the link itself.
    #[test]
    fn a_symlink_is_replaced_never_written_through() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("real.json");
        fs::write(&file, "old").unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
        for (link, to) in [
            ("link.json", file.clone()),
            ("dangling", d.path().join("none")),
        ] {
            let link = d.path().join(link);
            symlink(&to, &link).unwrap();
            assert!(matches!(
                check_output(&link, false),
                Err(FormatError::Exists { .. })
            ));
            assert_eq!(check_output(&link, true).unwrap(), OutputTarget::Symlink);
            assert!(matches!(
                write_atomic(&link, b"new", false),
                Err(FormatError::Exists { .. })
            ));
            write_atomic(&link, b"new", true).unwrap();
            assert!(fs::symlink_metadata(&link).unwrap().file_type().is_file());
            assert_eq!(fs::read_to_string(&link).unwrap(), "new");
        }
        assert_eq!(fs::read_to_string(&file).unwrap(), "old");
        assert_eq!(mode(&file), 0o600);
        assert!(!d.path().join("none").exists());
    }

    /// Only the last component is never resolved: the directory part is
    /// looked up as any path.
    #[test]
    fn a_symlinked_directory_is_followed() {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir(d.path().join("real")).unwrap();
        symlink(d.path().join("real"), d.path().join("alias")).unwrap();
        write_atomic(&d.path().join("alias/p.json"), b"x", false).unwrap();
        assert_eq!(fs::read(d.path().join("real/p.json")).unwrap(), b"x");
        let e = write_atomic(&d.path().join("nodir/p.json"), b"x", false).unwrap_err();
        assert!(e.to_string().contains("directory"), "{e}");
    }

    /// A replaced file keeps its permission bits; a new one gets the
    /// umask's; neither is world-writable.
    #[test]
    fn permission_bits_of_the_replaced_file_or_the_umask() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("p.json");
        write_atomic(&f, b"1", false).unwrap();
        assert_eq!(mode(&f), 0o666 & !umask() & !0o002);
        for m in [0o600, 0o640, 0o666] {
            fs::set_permissions(&f, fs::Permissions::from_mode(m)).unwrap();
            write_atomic(&f, b"2", true).unwrap();
            assert_eq!(mode(&f), m & !0o002, "{m:o}");
        }
    }

    /// A replaced file (or link) leaves nothing behind: not under its
    /// name, not under the temporary one it was swapped to; a directory
    /// that took the name meanwhile is swapped back and refused.
    #[test]
    fn a_replaced_file_is_removed_and_a_directory_is_swapped_back() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("p.json");
        let names = || sorted_names(d.path());
        for body in ["1", "22", "333"] {
            write_atomic(&f, body.as_bytes(), true).unwrap();
            assert_eq!(fs::read_to_string(&f).unwrap(), body);
            assert_eq!(names(), ["p.json"]);
        }
        let dir = File::open(d.path()).unwrap();
        fs::write(d.path().join(".tmp"), "new").unwrap();
        fs::create_dir(d.path().join("sub")).unwrap();
        let r = replace(dir.as_raw_fd(), c".tmp", c"sub");
        assert!(matches!(r, Err(Replace::Now(_))));
        assert!(d.path().join("sub").is_dir());
        assert_eq!(fs::read_to_string(d.path().join(".tmp")).unwrap(), "new");
    }

    /// Without --force nothing is replaced, not even a file that appears
    /// while the output is written; an output dropped before its commit
    /// leaves nothing behind.
    #[test]
    fn no_clobber_holds_to_the_end_and_failures_leave_nothing() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("p.json");
        let mut out = OutputFile::create(&f, false).unwrap();
        out.write_all(b"late").unwrap();
        fs::write(&f, "theirs").unwrap();
        assert!(matches!(out.commit(), Err(FormatError::Exists { .. })));
        assert_eq!(fs::read_to_string(&f).unwrap(), "theirs");
        let mut out = OutputFile::create(&d.path().join("q.json"), false).unwrap();
        out.write_all(b"half").unwrap();
        drop(out);
        let names: Vec<_> = fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["p.json"]);
    }

    /// A file made ahead ([`OutputFile::create_ahead`]) has no name until
    /// its commit: nothing appears in the directory, a drop leaves
    /// nothing; the commit names it without `--force` only where nothing
    /// is (not even what appeared meanwhile), and with `--force` replaces
    /// a file keeping its bits. A stream is left to be opened when written.
    #[test]
    fn a_file_made_ahead_is_unnamed_until_its_commit() {
        let d = tempfile::tempdir().unwrap();
        let names = || sorted_names(d.path());
        let (p, q) = (d.path().join("p.json"), d.path().join("q.json"));
        let mut out = OutputFile::create_ahead(&p, false).unwrap().unwrap();
        assert!(names().is_empty());
        out.write_all(b"1").unwrap();
        out.commit().unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "1");
        assert!(matches!(
            OutputFile::create_ahead(&p, false),
            Err(FormatError::Exists { .. })
        ));
        // Wider than the umask (022 here) lets a new file be.
        fs::set_permissions(&p, fs::Permissions::from_mode(0o664)).unwrap();
        let mut out = OutputFile::create_ahead(&p, true).unwrap().unwrap();
        out.write_all(b"2").unwrap();
        assert_eq!(names(), ["p.json"]);
        out.commit().unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "2");
        assert_eq!(mode(&p), 0o664);
        let mut late = OutputFile::create_ahead(&q, false).unwrap().unwrap();
        late.write_all(b"late").unwrap();
        fs::write(&q, "theirs").unwrap();
        assert!(matches!(late.commit(), Err(FormatError::Exists { .. })));
        assert_eq!(fs::read_to_string(&q).unwrap(), "theirs");
        drop(OutputFile::create_ahead(&d.path().join("r.json"), true).unwrap());
        assert_eq!(names(), ["p.json", "q.json"]);
        assert!(OutputFile::create_ahead(Path::new("/dev/null"), false)
            .unwrap()
            .is_none());
    }

    /// `/dev/fd/N` and `/proc/self/fd/N` (process substitution) are the
    /// descriptor fsprof holds: written into, nothing opened by name.
    #[test]
    fn own_descriptors_are_written_into() {
        let mut fds = [0; 2];
        // SAFETY: a valid array of two ints.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: descriptors pipe just made; owned from here.
        let (r, w) = unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) };
        for p in [
            format!("/dev/fd/{}", fds[1]),
            format!("/proc/self/fd/{}", fds[1]),
        ] {
            assert_eq!(
                check_output(Path::new(&p), false).unwrap(),
                OutputTarget::Descriptor(fds[1])
            );
            write_atomic(Path::new(&p), b"x", false).unwrap();
        }
        drop(w);
        assert_eq!(std::io::read_to_string(r).unwrap(), "xx");
        let e = write_atomic(Path::new(&format!("/dev/fd/{}", fds[0])), b"x", true).unwrap_err();
        assert!(e.to_string().contains("not open"), "{e}");
        assert!(OutputFile::create_file(Path::new("/dev/stderr"), true).is_err());
    }

    /// /dev/null's device is written into; the node stays a device (a
    /// private one: the test must not touch the real /dev/null).
    #[test]
    #[ignore = "needs root"]
    fn a_device_node_is_never_replaced_by_a_file() {
        let d = root_tempdir("mknod");
        let null = d.path().join("null");
        let c = CString::new(null.as_os_str().as_bytes()).unwrap();
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

    /// Root never writes into another user's FIFO or device node (one
    /// planted for it), and never replaces it.
    #[test]
    #[ignore = "needs root"]
    fn another_users_fifo_is_refused() {
        let d = root_tempdir("chown");
        let fifo = d.path().join("fifo");
        mkfifo(&fifo);
        std::os::unix::fs::chown(&fifo, Some(65534), Some(65534)).unwrap();
        for force in [false, true] {
            let e = write_atomic(&fifo, b"x", force).unwrap_err();
            assert!(e.to_string().contains("another user (uid 65534)"), "{e}");
        }
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    }
}
