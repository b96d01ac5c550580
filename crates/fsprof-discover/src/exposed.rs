//! What the kernel states about the parameters fsprof infers: the block
//! size `statfs` reports, the backing device's `read_ahead_kb`, a memory
//! cgroup's limit, free memory. Each value says where it was read, so a
//! reader can tell a setting from a measured behaviour when they differ.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::target::Target;

/// A value the kernel exposes, next to an inferred one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Exposed {
    /// Bytes (every parameter fsprof discovers is a size), or a count.
    pub value: u64,
    /// Where it was read, e.g. `/sys/class/bdi/7:3/read_ahead_kb`.
    pub source: String,
}

/// The block size `statfs` states.
pub fn block_size(t: &Target) -> Exposed {
    Exposed {
        value: t.statfs_block,
        source: format!("statfs({}).f_bsize", t.dir.display()),
    }
}

/// The backing-device-info directory in sysfs that governs read-ahead for
/// files in `t` (or on `device` when given).
pub fn bdi_dir(t: &Target, device: Option<&Path>) -> Option<PathBuf> {
    let (major, minor) = match device {
        Some(d) => {
            let md = std::fs::metadata(d).ok()?;
            if !md.file_type().is_block_device() {
                return None;
            }
            (libc::major(md.rdev()), libc::minor(md.rdev()))
        }
        None => t.dev,
    };
    let direct = PathBuf::from(format!("/sys/class/bdi/{major}:{minor}"));
    if direct.join("read_ahead_kb").exists() {
        return Some(direct);
    }
    // A partition shares its disk's bdi.
    let sysdev = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    if sysdev.join("partition").exists() {
        let parent = std::fs::canonicalize(&sysdev).ok()?.parent()?.join("dev");
        let disk = std::fs::read_to_string(parent).ok()?;
        let d = PathBuf::from(format!("/sys/class/bdi/{}", disk.trim()));
        if d.join("read_ahead_kb").exists() {
            return Some(d);
        }
    }
    btrfs_bdi(t)
}

/// btrfs has a bdi of its own (`btrfs-N`), found through the sysfs
/// directory of the file system whose device list holds the mount source.
fn btrfs_bdi(t: &Target) -> Option<PathBuf> {
    let m = t.mount.as_ref().filter(|m| m.fs_type == "btrfs")?;
    let src = std::fs::canonicalize(&m.source).ok()?;
    let name = src.file_name()?.to_owned();
    for fs in std::fs::read_dir("/sys/fs/btrfs").ok()?.flatten() {
        if fs.path().join("devices").join(&name).exists() {
            let bdi = fs.path().join("bdi");
            if bdi.join("read_ahead_kb").exists() {
                return Some(bdi);
            }
        }
    }
    None
}

fn read_kb(path: PathBuf) -> Option<Exposed> {
    let v: u64 = std::fs::read_to_string(&path).ok()?.trim().parse().ok()?;
    Some(Exposed {
        value: v * 1024,
        source: path.display().to_string(),
    })
}

/// The read-ahead limits that apply, in bytes: first the one governing
/// files in `t` (the file system's bdi: its disk's, or btrfs's own), then
/// `device`'s when given and different (on btrfs the device's setting does
/// not govern reads through the file system).
pub fn read_ahead(t: &Target, device: Option<&Path>) -> Vec<Exposed> {
    let fs = bdi_dir(t, None);
    let mut out: Vec<Exposed> = fs
        .iter()
        .filter_map(|d| read_kb(d.join("read_ahead_kb")))
        .collect();
    if device.is_some() {
        if let Some(d) = bdi_dir(t, device).filter(|d| Some(d) != fs.as_ref()) {
            out.extend(read_kb(d.join("read_ahead_kb")));
        }
    }
    out
}

/// The block device behind `t`: `device`, else the file system's own
/// device number, else what is mounted (btrfs has an anonymous one).
fn block_device(t: &Target, device: Option<&Path>) -> Option<(u32, u32)> {
    let rdev = |p: &Path| {
        let md = std::fs::metadata(p).ok()?;
        md.file_type()
            .is_block_device()
            .then(|| (libc::major(md.rdev()), libc::minor(md.rdev())))
    };
    if let Some(d) = device {
        return rdev(d);
    }
    let (major, minor) = t.dev;
    if Path::new(&format!("/sys/dev/block/{major}:{minor}")).exists() {
        return Some(t.dev);
    }
    rdev(Path::new(&t.mount.as_ref()?.source))
}

/// The largest request the device takes (`max_sectors_kb`): Linux lets a
/// large read grow its read-ahead up to it.
pub fn max_request(t: &Target, device: Option<&Path>) -> Option<Exposed> {
    let (major, minor) = block_device(t, device)?;
    let sysdev = std::fs::canonicalize(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    let disk = if sysdev.join("partition").exists() {
        sysdev.parent()?.to_path_buf()
    } else {
        sysdev
    };
    read_kb(disk.join("queue/max_sectors_kb"))
}

/// Memory that could be had without swapping (MemAvailable).
pub fn available_memory() -> Exposed {
    Exposed {
        value: fsprof_sys::host::memory().available,
        source: "/proc/meminfo MemAvailable".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_size_comes_from_statfs() {
        let t = Target::probe(Path::new("/")).unwrap();
        let e = block_size(&t);
        assert_eq!(e.value, t.statfs_block);
        assert!(e.source.starts_with("statfs("));
    }

    #[test]
    fn a_non_device_adds_no_read_ahead() {
        let t = Target::probe(Path::new("/")).unwrap();
        let fs = read_ahead(&t, None);
        // A path that is no device adds nothing to the file system's own.
        assert_eq!(read_ahead(&t, Some(Path::new("/etc/hostname"))), fs);
    }
}
