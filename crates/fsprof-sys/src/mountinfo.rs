//! The mount table as `/proc/self/mountinfo` states it, parsed once for
//! every tool that needs to know which mount a path is on (a FUSE mount's
//! connection, a discovery's file system, a benchmark's directory).
//! Reading it never touches a mount itself: a stat of a FUSE mount point
//! would be a request to its daemon, or hang on a dead one.

use std::path::PathBuf;

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
}
