//! Lower `stat` → FUSE attributes.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{FileAttr, FileType, INodeNo};

/// The FUSE file type of a mode's type bits.
pub fn kind(mode: u32) -> FileType {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => FileType::Directory,
        libc::S_IFLNK => FileType::Symlink,
        libc::S_IFIFO => FileType::NamedPipe,
        libc::S_IFSOCK => FileType::Socket,
        libc::S_IFCHR => FileType::CharDevice,
        libc::S_IFBLK => FileType::BlockDevice,
        _ => FileType::RegularFile,
    }
}

/// A timestamp, before 1970 too.
pub fn time(sec: i64, nsec: i64) -> SystemTime {
    let nsec = nsec.clamp(0, 999_999_999) as u32;
    if sec >= 0 {
        UNIX_EPOCH + Duration::new(sec as u64, nsec)
    } else {
        // -1.25 s is sec = -2, nsec = 750_000_000.
        UNIX_EPOCH - Duration::new(sec.unsigned_abs(), 0) + Duration::new(0, nsec)
    }
}

/// The attributes the kernel gets for inode `ino` (its node id: fuser
/// makes the node id and the inode number one and the same).
pub fn from_stat(st: &libc::stat, ino: u64) -> FileAttr {
    FileAttr {
        ino: INodeNo(ino),
        size: st.st_size as u64,
        blocks: st.st_blocks as u64,
        atime: time(st.st_atime, st.st_atime_nsec),
        mtime: time(st.st_mtime, st.st_mtime_nsec),
        ctime: time(st.st_ctime, st.st_ctime_nsec),
        crtime: UNIX_EPOCH,
        kind: kind(st.st_mode),
        perm: (st.st_mode & 0o7777) as u16,
        nlink: st.st_nlink as u32,
        uid: st.st_uid,
        gid: st.st_gid,
        // glibc's dev_t keeps the kernel's new_encode_dev() layout in its
        // low 32 bits, which is what fuse_attr.rdev carries.
        rdev: st.st_rdev as u32,
        blksize: st.st_blksize as u32,
        flags: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_before_the_epoch_keep_their_fraction() {
        let t = time(-2, 750_000_000);
        assert_eq!(
            UNIX_EPOCH.duration_since(t).unwrap(),
            Duration::from_millis(1250)
        );
        assert_eq!(
            time(3, 5).duration_since(UNIX_EPOCH).unwrap(),
            Duration::new(3, 5)
        );
    }

    #[test]
    fn device_numbers_survive_the_u32() {
        // SAFETY: stat is plain data; all zeroes is a valid value.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        st.st_mode = libc::S_IFCHR | 0o600;
        st.st_rdev = libc::makedev(136, 300);
        let a = from_stat(&st, 7);
        // new_encode_dev: minor low byte | major << 8 | (minor & ~0xff) << 12
        assert_eq!(a.rdev, (300 & 0xff) | (136 << 8) | ((300 & !0xff) << 12));
        assert_eq!(a.kind, FileType::CharDevice);
        assert_eq!(a.perm, 0o600);
    }
}
