//! The mount at a mount point, found in the mount table
//! ([`fsprof_sys::mountinfo`]) without touching the mount itself (a stat of
//! the mount point would be a request to our own daemon, or hang on a dead
//! one), and unmounting.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use fsprof_sys::mountinfo::MountEntry;

/// The topmost mount at `mountpoint` if it is a FUSE mount.
pub fn fuse_at(mountpoint: &Path) -> Option<MountEntry> {
    fsprof_sys::mountinfo::at(mountpoint).filter(|e| e.fs_type.starts_with("fuse"))
}

/// The topmost mount at `mountpoint` if it is an fsprof mount: type
/// `fuse.fsprof` (mounted through fusermount3, which keeps the subtype),
/// or `fuse` with source `fsprof` (mounted by root with mount(2), where
/// the subtype becomes the source). Read from the mount table alone, so a
/// mount whose daemon is dead or whose control file we may not read is
/// still recognised.
pub fn fsprof_at(mountpoint: &Path) -> Option<MountEntry> {
    fuse_at(mountpoint).filter(is_fsprof)
}

fn is_fsprof(e: &MountEntry) -> bool {
    e.fs_type == "fuse.fsprof" || (e.fs_type == "fuse" && e.source == "fsprof")
}

/// The uid that made a FUSE mount (its `user_id=` option).
pub fn owner(e: &MountEntry) -> Option<u32> {
    e.super_options
        .split(',')
        .find_map(|o| o.strip_prefix("user_id="))
        .and_then(|v| v.parse().ok())
}

/// The device (major, minor) of the FUSE mount at `mountpoint`; the minor
/// is the connection's number under /sys/fs/fuse/connections.
pub fn device_of(mountpoint: &Path) -> Option<(u32, u32)> {
    fuse_at(mountpoint).map(|e| (e.major, e.minor))
}

/// `umount2`, lazily (`MNT_DETACH`) when asked.
pub fn umount(mountpoint: &Path, lazy: bool) -> std::io::Result<()> {
    let c = CString::new(mountpoint.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    let flags = if lazy { libc::MNT_DETACH } else { 0 };
    // SAFETY: a NUL-terminated path.
    if unsafe { libc::umount2(c.as_ptr(), flags) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both ways an fsprof mount appears in the mount table, and not
    /// another FUSE file system's.
    #[test]
    fn fsprof_mounts_are_told_by_type_or_source() {
        let line = |rest: &str| {
            MountEntry::parse(&format!(
                "43 27 0:39 / /m rw,nosuid,nodev,relatime - {rest}"
            ))
            .unwrap()
        };
        let root = line("fuse fsprof rw,user_id=0,group_id=0");
        let user = line("fuse.fsprof fsprof rw,user_id=65534,group_id=65534");
        let other = line("fuse.sshfs host:/ rw,user_id=1000,group_id=1000");
        assert!(is_fsprof(&root) && is_fsprof(&user) && !is_fsprof(&other));
        assert_eq!(owner(&user), Some(65534));
        assert_eq!(owner(&root), Some(0));
    }
}
