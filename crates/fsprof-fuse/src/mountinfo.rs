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
