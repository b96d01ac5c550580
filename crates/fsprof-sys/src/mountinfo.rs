//! The mount table as `/proc/self/mountinfo` states it, and the one answer
//! to "which mount is this path on" for every tool that asks (a FUSE
//! mount's connection and unmount, a discovery's file system, a
//! benchmark's directory):
//!
//! - [`of_path`]: the mount a path is on, exactly: by the mount id the
//!   kernel gives for the path (`statx` `STATX_MNT_ID`, which tells bind
//!   mounts and mounts stacked on one point apart), else [`containing`];
//! - [`at`]: the topmost mount *at* a mount point, from the table alone
//!   (no `statx` of the path: on a FUSE mount that would be a request to
//!   its daemon, or hang on a stopped one);
//! - [`containing`]: the deepest mount point that holds a path, a later
//!   line winning at the same point (what both fall back to).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// One line of `/proc/self/mountinfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountEntry {
    pub id: u64,
    pub major: u32,
    pub minor: u32,
    pub mount_point: PathBuf,
    /// Per-mount options (`rw,relatime`).
    pub options: String,
    pub fs_type: String,
    /// What was mounted: a device path for block file systems.
    pub source: String,
    /// The file system's own options (`rw,errors=continue`).
    pub super_options: String,
}

impl MountEntry {
    /// Parses a mountinfo line; `None` for a malformed one.
    pub fn parse(line: &str) -> Option<MountEntry> {
        // id parent major:minor root mountpoint options [optional...] - fstype source super
        let (left, right) = line.split_once(" - ")?;
        let l: Vec<&str> = left.split(' ').collect();
        let r: Vec<&str> = right.split(' ').collect();
        if l.len() < 6 || r.len() < 3 {
            return None;
        }
        let (major, minor) = l[2].split_once(':')?;
        Some(MountEntry {
            id: l[0].parse().ok()?,
            major: major.parse().ok()?,
            minor: minor.parse().ok()?,
            mount_point: PathBuf::from(unescape(l[4])),
            options: l[5].to_string(),
            fs_type: r[0].to_string(),
            source: unescape(r[1]),
            super_options: r[2].to_string(),
        })
    }

    /// Whether the mount is read-only.
    pub fn read_only(&self) -> bool {
        self.options.split(',').any(|o| o == "ro")
    }
}

/// Every well-formed line of a mountinfo text, in its order (a later mount
/// at the same point hides an earlier one).
pub fn parse(text: &str) -> Vec<MountEntry> {
    text.lines().filter_map(MountEntry::parse).collect()
}

/// This process's mount table; empty if it cannot be read.
pub fn read() -> Vec<MountEntry> {
    parse(&std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default())
}

/// The mount whose mount point is the deepest that holds `path` (compared
/// by components: `/dev/shmem` is not in `/dev/shm`); among lines with the
/// same mount point the last, which hides the earlier ones. `path` is
/// taken as given: absolute and canonical for a meaningful answer.
pub fn containing<'a>(mounts: &'a [MountEntry], path: &Path) -> Option<&'a MountEntry> {
    mounts
        .iter()
        .enumerate()
        .filter(|(_, m)| path.starts_with(&m.mount_point))
        .max_by_key(|(i, m)| (m.mount_point.components().count(), *i))
        .map(|(_, m)| m)
}

/// `path` absolute, and canonical where it can be resolved.
fn resolved(path: &Path) -> PathBuf {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    abs.canonicalize().unwrap_or(abs)
}

/// The mount id of `path` (`statx`, Linux 5.8+).
fn mount_id(path: &Path) -> Option<u64> {
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statx is plain data the kernel fills in.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a valid out-pointer.
    let r = unsafe { libc::statx(libc::AT_FDCWD, c.as_ptr(), 0, libc::STATX_MNT_ID, &mut stx) };
    (r == 0 && stx.stx_mask & libc::STATX_MNT_ID != 0).then_some(stx.stx_mnt_id)
}

/// The mount `path` is on: the line of the mount id the kernel gives for
/// it, else the [`containing`] one. Looks `path` up (`statx`): for a
/// mount point served by a daemon that may not answer, use [`at`].
pub fn of_path(path: &Path) -> Option<MountEntry> {
    let path = resolved(path);
    let mounts = read();
    if let Some(id) = mount_id(&path) {
        if let Some(m) = mounts.iter().rev().find(|m| m.id == id) {
            return Some(m.clone());
        }
    }
    containing(&mounts, &path).cloned()
}

/// The topmost mount whose mount point is `mount_point` (made absolute and
/// canonical), found in the table without a `statx` of it.
pub fn at(mount_point: &Path) -> Option<MountEntry> {
    let want = resolved(mount_point);
    containing(&read(), &want)
        .filter(|m| m.mount_point == want)
        .cloned()
}

/// mountinfo writes space, tab, newline and backslash as `\ooo`.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = |c: &u8| (b'0'..=b'7').contains(c);
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(octal) {
            let v = b[i + 1..i + 4]
                .iter()
                .fold(0u32, |v, c| v * 8 + (c - b'0') as u32);
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_with_escapes_and_optional_fields() {
        let m = MountEntry::parse(
            "36 35 7:3 / /var/tmp/my\\040mnt rw,relatime shared:1 master:2 - ext2 /dev/loop3 rw,errors=continue",
        )
        .unwrap();
        assert_eq!(m.id, 36);
        assert_eq!((m.major, m.minor), (7, 3));
        assert_eq!(m.mount_point, PathBuf::from("/var/tmp/my mnt"));
        assert_eq!(m.options, "rw,relatime");
        assert_eq!(m.fs_type, "ext2");
        assert_eq!(m.source, "/dev/loop3");
        assert_eq!(m.super_options, "rw,errors=continue");
        assert!(!m.read_only());
        assert!(MountEntry::parse("garbage").is_none());
        assert!(MountEntry::parse("1 2 x:y / / rw - ext4 /dev/x rw").is_none());
    }

    #[test]
    fn a_text_keeps_its_good_lines_in_order() {
        let t = "36 35 98:0 /mnt1 /mnt/my\\040dir ro,noatime master:1 - fuse.fsprof fsprof rw,user_id=0\n\
                 garbage\n\
                 61 1 0:52 / /proc rw - proc proc rw\n";
        let e = parse(t);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].mount_point, PathBuf::from("/mnt/my dir"));
        assert!(e[0].read_only());
        assert_eq!(e[1].fs_type, "proc");
        assert_eq!(unescape("a\\134b\\011c\\12"), "a\\b\tc\\12");
    }

    #[test]
    fn the_running_system_has_a_root_mount() {
        assert!(read()
            .iter()
            .any(|m| m.mount_point == std::path::Path::new("/")));
    }

    #[test]
    fn the_deepest_mount_holding_the_path_wins_and_the_last_at_a_point() {
        let t = parse(
            "22 1 254:0 / / rw,relatime - ext4 /dev/vda rw,errors=remount-ro\n\
             30 22 0:25 / /dev/shm rw,nosuid,nodev - tmpfs tmpfs rw,size=24684092k\n\
             41 22 7:3 / /mnt/with\\040space rw,relatime - xfs /dev/loop3 rw,attr2,inode64\n\
             42 41 7:4 / /mnt/with\\040space rw,relatime - ext2 /dev/loop4 rw\n",
        );
        let id = |p: &str| containing(&t, Path::new(p)).map(|m| m.id);
        assert_eq!(id("/dev/shm/x"), Some(30));
        assert_eq!(id("/dev/shm"), Some(30));
        // A sibling whose name merely starts with the mount point is not in it.
        assert_eq!(id("/dev/shmem"), Some(22));
        // Two mounts at one point: the later hides the earlier.
        assert_eq!(id("/mnt/with space/d"), Some(42));
        assert_eq!(id("/"), Some(22));
        assert_eq!(containing(&[], Path::new("/x")), None);
    }

    /// Against the kernel's own answer: /dev/shm is its own mount, a file
    /// below it is on it, and `at` finds only mount points.
    #[test]
    fn paths_are_found_on_their_mounts_in_the_running_system() {
        let shm = of_path(Path::new("/dev/shm")).unwrap();
        assert_eq!(shm.mount_point, PathBuf::from("/dev/shm"));
        let f = std::fs::File::create("/dev/shm/.fsprof-mountinfo-test").unwrap();
        drop(f);
        let m = of_path(Path::new("/dev/shm/.fsprof-mountinfo-test")).unwrap();
        let _ = std::fs::remove_file("/dev/shm/.fsprof-mountinfo-test");
        assert_eq!(m.id, shm.id);
        assert_eq!(at(Path::new("/dev/shm")).map(|m| m.id), Some(shm.id));
        assert_eq!(at(Path::new("/dev/shm/nothing-mounted-here")), None);
        assert_eq!(
            of_path(Path::new("/")).unwrap().mount_point,
            PathBuf::from("/")
        );
    }
}
