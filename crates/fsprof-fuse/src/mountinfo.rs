//! The mount table, read without touching the mount itself (a stat of the
//! mount point would be a request to our own daemon, or hang on a dead
//! one), and unmounting.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// One line of `/proc/self/mountinfo` that matters here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub major: u32,
    pub minor: u32,
    pub mountpoint: PathBuf,
    pub fstype: String,
    pub source: String,
}

/// `\040`-style escapes of mountinfo fields.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut k = 0;
    while k < b.len() {
        if b[k] == b'\\'
            && k + 3 < b.len()
            && b[k + 1..k + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[k + 1] - b'0') * 64 + (b[k + 2] - b'0') * 8 + (b[k + 3] - b'0');
            out.push(v);
            k += 4;
        } else {
            out.push(b[k]);
            k += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub fn parse(text: &str) -> Vec<Entry> {
    text.lines()
        .filter_map(|l| {
            // id parent major:minor root mountpoint options [optional...] - fstype source super
            let (left, right) = l.split_once(" - ")?;
            let f: Vec<&str> = left.split(' ').collect();
            let (major, minor) = f.get(2)?.split_once(':')?;
            let r: Vec<&str> = right.split(' ').collect();
            Some(Entry {
                major: major.parse().ok()?,
                minor: minor.parse().ok()?,
                mountpoint: PathBuf::from(unescape(f.get(4)?)),
                fstype: r.first()?.to_string(),
                source: unescape(r.get(1)?),
            })
        })
        .collect()
}

/// The topmost mount at `mountpoint`, if any.
pub fn at(mountpoint: &Path) -> Option<Entry> {
    let want = std::path::absolute(mountpoint).ok()?;
    let want = want.canonicalize().unwrap_or(want);
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    parse(&text)
        .into_iter()
        .rev()
        .find(|e| e.mountpoint == want)
}

/// The device (major, minor) of the FUSE mount at `mountpoint`; the minor
/// is the connection's number under /sys/fs/fuse/connections.
pub fn device_of(mountpoint: &Path) -> Option<(u32, u32)> {
    at(mountpoint)
        .filter(|e| e.fstype.starts_with("fuse"))
        .map(|e| (e.major, e.minor))
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

    #[test]
    fn lines_with_optional_fields_and_escapes_parse() {
        let t = "36 35 98:0 /mnt1 /mnt/my\\040dir rw,noatime master:1 - fuse.fsprof fsprof rw,user_id=0\n\
                 61 1 0:52 / /proc rw - proc proc rw\n";
        let e = parse(t);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].mountpoint, PathBuf::from("/mnt/my dir"));
        assert_eq!((e[0].major, e[0].minor), (98, 0));
        assert_eq!(e[0].fstype, "fuse.fsprof");
        assert_eq!(e[0].source, "fsprof");
        assert_eq!(e[1].fstype, "proc");
    }
}
