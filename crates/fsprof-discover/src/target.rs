//! The directory a discovery measures in: the file system under it (type,
//! block size as `statfs` states it, free space), the mount it belongs to
//! (from `/proc/self/mountinfo`, matched by mount id) and the scratch
//! directory the measurements create their files in and remove afterwards.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::DiscoverError;

/// `statfs` magic numbers of the file systems the methods treat specially.
pub mod magic {
    pub const EXT: i64 = 0xEF53;
    pub const XFS: i64 = 0x5846_5342;
    pub const BTRFS: i64 = 0x9123_683E;
    pub const TMPFS: i64 = 0x0102_1994;
    pub const RAMFS: i64 = 0x8584_58f6;
}

pub use fsprof_sys::mountinfo::MountEntry;

/// The file system under a directory, as the kernel describes it.
#[derive(Clone, Debug)]
pub struct Target {
    /// The directory, canonical.
    pub dir: PathBuf,
    /// `ext2`, `xfs`, ... from the mount table, else from the statfs magic.
    pub fs_type: String,
    pub magic: i64,
    /// `statfs` f_bsize: the block size the file system states.
    pub statfs_block: u64,
    /// Bytes an unprivileged user may still write.
    pub free_bytes: u64,
    /// The device number of files in `dir`.
    pub dev: (u32, u32),
    pub mount: Option<MountEntry>,
    pub page_size: u64,
}

impl Target {
    /// Looks `dir` up; a missing path or a non-directory is an error.
    pub fn probe(dir: &Path) -> Result<Target, DiscoverError> {
        let bad = |reason: String| DiscoverError::Dir {
            dir: dir.to_path_buf(),
            reason,
        };
        let canon = std::fs::canonicalize(dir).map_err(|e| bad(e.to_string()))?;
        let md = std::fs::metadata(&canon).map_err(|e| bad(e.to_string()))?;
        if !md.is_dir() {
            return Err(bad("not a directory".into()));
        }
        let st = statfs(&canon).map_err(|e| bad(format!("statfs: {e}")))?;
        let dev = (libc::major(md.dev()), libc::minor(md.dev()));
        let mount = own_mount(&canon, dev);
        let magic = st.f_type as i64;
        let fs_type = mount
            .as_ref()
            .map(|m| m.fs_type.clone())
            .unwrap_or_else(|| magic_name(magic).to_string());
        Ok(Target {
            dir: canon,
            fs_type,
            magic,
            statfs_block: st.f_bsize as u64,
            free_bytes: (st.f_bavail as u64).saturating_mul(st.f_frsize as u64),
            dev,
            mount,
            page_size: fsprof_sys::host::page_size() as u64,
        })
    }

    /// Whether files here live only in memory (no device behind the cache).
    pub fn memory_only(&self) -> bool {
        matches!(self.magic, magic::TMPFS | magic::RAMFS)
    }
}

fn magic_name(m: i64) -> &'static str {
    match m {
        magic::EXT => "ext2/3/4",
        magic::XFS => "xfs",
        magic::BTRFS => "btrfs",
        magic::TMPFS => "tmpfs",
        magic::RAMFS => "ramfs",
        _ => "unknown",
    }
}

pub(crate) fn cpath(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn statfs(p: &Path) -> io::Result<libc::statfs> {
    let c = cpath(p)?;
    // SAFETY: statfs is plain data the kernel fills in.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a valid out-pointer.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

/// The mount id of `p` (statx, Linux 5.8+).
fn mount_id(p: &Path) -> Option<u64> {
    let c = cpath(p).ok()?;
    // SAFETY: statx is plain data the kernel fills in.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a valid out-pointer.
    let r = unsafe { libc::statx(libc::AT_FDCWD, c.as_ptr(), 0, libc::STATX_MNT_ID, &mut stx) };
    (r == 0 && stx.stx_mask & libc::STATX_MNT_ID != 0).then_some(stx.stx_mnt_id)
}

/// The mount `dir` is on: by mount id, else the longest mount point that
/// contains it with the same device number.
fn own_mount(dir: &Path, dev: (u32, u32)) -> Option<MountEntry> {
    let mounts = fsprof_sys::mountinfo::read();
    if let Some(id) = mount_id(dir) {
        if let Some(m) = mounts.iter().find(|m| m.id == id) {
            return Some(m.clone());
        }
    }
    mounts
        .into_iter()
        .filter(|m| (m.major, m.minor) == dev && dir.starts_with(&m.mount_point))
        .max_by_key(|m| m.mount_point.as_os_str().len())
}

/// A private directory under the target for the measurements' files,
/// removed with everything in it when dropped.
#[derive(Debug)]
pub struct Scratch {
    path: PathBuf,
}

impl Scratch {
    /// Creates `DIR/.fsprof-discover-<pid>-<n>` (mode 0700); a directory
    /// fsprof may not write in is [`DiscoverError::NotWritable`].
    pub fn create(dir: &Path) -> Result<Scratch, DiscoverError> {
        let pid = std::process::id();
        for n in 0..1000 {
            let path = dir.join(format!(".fsprof-discover-{pid}-{n}"));
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(Scratch { path }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(DiscoverError::NotWritable {
                        dir: dir.to_path_buf(),
                        reason: e.to_string(),
                    })
                }
            }
        }
        Err(DiscoverError::NotWritable {
            dir: dir.to_path_buf(),
            reason: "no free scratch directory name".into(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A file name in the scratch directory.
    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_directory_is_found_in_the_mount_table() {
        let t = Target::probe(Path::new("/")).unwrap();
        let m = t.mount.expect("/ is a mount");
        assert_eq!(m.mount_point, PathBuf::from("/"));
        assert!(t.statfs_block >= 512);
    }

    #[test]
    fn a_missing_directory_or_a_file_is_refused() {
        let e = Target::probe(Path::new("/no/such/dir")).unwrap_err();
        assert!(e.to_string().contains("/no/such/dir"), "{e}");
        let f = tempfile::NamedTempFile::new().unwrap();
        let e = Target::probe(f.path()).unwrap_err();
        assert!(e.to_string().contains("not a directory"), "{e}");
    }

    #[test]
    fn scratch_directories_are_private_and_removed() {
        let d = tempfile::tempdir().unwrap();
        let path = {
            let s = Scratch::create(d.path()).unwrap();
            std::fs::write(s.file("x"), b"1").unwrap();
            let mode = std::fs::metadata(s.path()).unwrap().mode() & 0o777;
            assert_eq!(mode, 0o700);
            s.path().to_path_buf()
        };
        assert!(!path.exists());
    }
}
