//! The directory a measurement runs in, as the kernel describes it: the
//! file system under it (type, `statfs` magic, block size, free space),
//! its device number and the mount it is on (fsprof-sys's mount table,
//! matched by mount id). `fsprof bench` records it in its result;
//! `fsprof discover` reads the block size and the file system's kind from
//! it and unmounts the mount it names.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

pub use fsprof_sys::mountinfo::MountEntry;

/// `statfs` magic numbers of the file systems measurements treat
/// specially.
pub mod magic {
    pub const EXT: i64 = 0xEF53;
    pub const XFS: i64 = 0x5846_5342;
    pub const BTRFS: i64 = 0x9123_683E;
    pub const TMPFS: i64 = 0x0102_1994;
    pub const RAMFS: i64 = 0x8584_58f6;
}

/// Why a directory cannot be measured in; each message names the path.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("{}: {source} (pass an existing directory)", dir.display())]
    Missing { dir: PathBuf, source: io::Error },
    #[error("{}: not a directory (pass a directory on the file system to measure)", dir.display())]
    NotADirectory { dir: PathBuf },
    #[error("{}: statfs: {source}", dir.display())]
    Statfs { dir: PathBuf, source: io::Error },
}

/// The file system under a directory.
#[derive(Clone, Debug)]
pub struct Target {
    /// The directory, canonical.
    pub dir: PathBuf,
    /// `ext2`, `xfs`, ... from the mount table, else from the statfs magic.
    pub fs_type: String,
    pub magic: i64,
    /// `statfs` f_bsize: the block size the file system states.
    pub statfs_block: u64,
    /// `statfs` f_frsize: the unit of its block counts.
    pub fragment_size: u64,
    /// Bytes an unprivileged user may still write.
    pub free_bytes: u64,
    /// The device number of files in `dir`.
    pub dev: (u32, u32),
    pub mount: Option<MountEntry>,
    pub page_size: u64,
}

impl Target {
    /// Looks `dir` up; a missing path or a non-directory is an error.
    pub fn probe(dir: &Path) -> Result<Target, TargetError> {
        let missing = |source| TargetError::Missing {
            dir: dir.to_path_buf(),
            source,
        };
        let canon = std::fs::canonicalize(dir).map_err(missing)?;
        let md = std::fs::metadata(&canon).map_err(missing)?;
        if !md.is_dir() {
            return Err(TargetError::NotADirectory {
                dir: dir.to_path_buf(),
            });
        }
        let st = statfs(&canon).map_err(|source| TargetError::Statfs {
            dir: dir.to_path_buf(),
            source,
        })?;
        let dev = (libc::major(md.dev()), libc::minor(md.dev()));
        let mount = fsprof_sys::mountinfo::of_path(&canon);
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
            fragment_size: st.f_frsize as u64,
            free_bytes: (st.f_bavail as u64).saturating_mul(st.f_frsize as u64),
            dev,
            mount,
            page_size: fsprof_sys::host::page_size() as u64,
        })
    }

    /// Whether files here live only in memory (no device behind the
    /// cache, so there is no cold state to reach).
    pub fn memory_only(&self) -> bool {
        matches!(self.magic, magic::TMPFS | magic::RAMFS)
    }

    /// Free bytes now (the figure in `free_bytes` is from the probe).
    pub fn free_now(&self) -> io::Result<u64> {
        let st = statfs(&self.dir)?;
        Ok((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
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

/// A path as the C string system calls take.
pub fn cpath(p: &Path) -> io::Result<CString> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_directory_is_found_in_the_mount_table() {
        let t = Target::probe(Path::new("/")).unwrap();
        let m = t.mount.clone().expect("/ is a mount");
        assert_eq!(m.mount_point, PathBuf::from("/"));
        assert!(t.statfs_block >= 512 && t.fragment_size >= 512);
        assert!(!t.memory_only());
    }

    #[test]
    fn a_memory_file_system_is_known_as_one() {
        let t = Target::probe(Path::new("/dev/shm")).unwrap();
        assert_eq!(t.fs_type, "tmpfs");
        assert!(t.memory_only() && t.free_bytes > 0);
        assert_eq!(t.mount.unwrap().mount_point, PathBuf::from("/dev/shm"));
    }

    #[test]
    fn a_missing_directory_or_a_file_is_refused_by_name() {
        let e = Target::probe(Path::new("/no/such/dir")).unwrap_err();
        assert!(e.to_string().starts_with("/no/such/dir: "), "{e}");
        let f = tempfile::NamedTempFile::new().unwrap();
        let e = Target::probe(f.path()).unwrap_err();
        assert!(e.to_string().contains("not a directory"), "{e}");
    }
}
