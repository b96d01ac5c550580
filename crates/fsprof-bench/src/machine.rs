//! What a result must say about where it was measured: the machine (CPU,
//! caches, memory, kernel), the file system under DIR (type, device, mount
//! options, free space) and how busy the machine was.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use fsprof_sys::host::HostFacts;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CacheInfo {
    pub level: u32,
    pub kind: String,
    pub size_bytes: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub host: String,
    pub kernel: String,
    pub cpu_model: String,
    pub cpus: usize,
    pub page_size: usize,
    pub memory_total: u64,
    pub memory_available: u64,
    pub caches: Vec<CacheInfo>,
    /// `scaling_governor` of CPU 0, absent where cpufreq is not exposed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_governor: Option<String>,
    /// 1-minute load average when the benchmark started.
    pub load_average: f64,
}

impl Machine {
    pub fn read() -> Machine {
        let h = HostFacts::read();
        Machine {
            host: h.hostname,
            kernel: h.kernel,
            cpu_model: h.cpu_model,
            cpus: h.cpus,
            page_size: h.page_size,
            memory_total: h.memory.total,
            memory_available: h.memory.available,
            caches: h
                .caches
                .iter()
                .map(|c| CacheInfo {
                    level: c.level,
                    kind: c.kind.clone(),
                    size_bytes: c.size_bytes,
                })
                .collect(),
            cpu_governor: std::fs::read_to_string(
                "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
            )
            .ok()
            .map(|s| s.trim().to_string()),
            load_average: load_average().unwrap_or(0.0),
        }
    }

    /// Data/unified cache sizes by level (L1d, L2, L3 ...), ascending.
    pub fn data_caches(&self) -> Vec<(u32, u64)> {
        self.caches
            .iter()
            .filter(|c| c.kind != "Instruction")
            .map(|c| (c.level, c.size_bytes))
            .collect()
    }

    pub fn last_level_cache(&self) -> Option<u64> {
        self.data_caches().last().map(|c| c.1)
    }
}

/// The 1-minute load average.
pub fn load_average() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// The file system a directory is on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DirInfo {
    pub path: String,
    /// `ext4`, `xfs`, `btrfs`, `tmpfs` ... from /proc/self/mountinfo.
    pub fs_type: String,
    /// The device or source (`/dev/loop3`, `tmpfs`).
    pub source: String,
    pub mount_point: String,
    /// Per-mount and per-superblock options, as the kernel lists them.
    pub mount_options: String,
    pub free_bytes: u64,
    pub block_size: u64,
}

impl DirInfo {
    /// Describes `dir`, which must exist and be a directory.
    pub fn of(dir: &Path) -> std::io::Result<DirInfo> {
        let canon = dir.canonicalize()?;
        let vfs = statvfs(&canon)?;
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let m = mount_of(&mountinfo, &canon.to_string_lossy()).unwrap_or_default();
        Ok(DirInfo {
            path: canon.to_string_lossy().into_owned(),
            fs_type: m.fs_type,
            source: m.source,
            mount_point: m.mount_point,
            mount_options: m.options,
            free_bytes: vfs.f_bavail as u64 * vfs.f_frsize as u64,
            block_size: vfs.f_frsize as u64,
        })
    }

    /// Whether the file system keeps file data in memory only (no device
    /// behind it, so there is no cold state to reach).
    pub fn is_memory_fs(&self) -> bool {
        matches!(self.fs_type.as_str(), "tmpfs" | "ramfs" | "shm")
    }
}

fn statvfs(p: &Path) -> std::io::Result<libc::statvfs> {
    let c = CString::new(p.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: statvfs is plain data the call fills in.
    let mut out: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a valid out-pointer.
    if unsafe { libc::statvfs(c.as_ptr(), &mut out) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(out)
}

#[derive(Default, Debug, PartialEq)]
struct Mount {
    mount_point: String,
    fs_type: String,
    source: String,
    options: String,
}

/// The mountinfo line whose mount point is the longest prefix of `path`
/// (the last such line: later mounts hide earlier ones at the same point).
fn mount_of(mountinfo: &str, path: &str) -> Option<Mount> {
    let mut best: Option<Mount> = None;
    for m in fsprof_sys::mountinfo::parse(mountinfo) {
        let mp = m.mount_point.to_string_lossy().into_owned();
        let inside = path == mp
            || mp == "/"
            || (path.starts_with(&mp) && path.as_bytes().get(mp.len()) == Some(&b'/'));
        if !inside {
            continue;
        }
        if best
            .as_ref()
            .is_some_and(|b| b.mount_point.len() > mp.len())
        {
            continue;
        }
        best = Some(Mount {
            mount_point: mp,
            fs_type: m.fs_type,
            source: m.source,
            options: format!("{},{}", m.options, m.super_options),
        });
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deepest_mount_holding_the_path_wins() {
        let info = "\
22 1 254:0 / / rw,relatime - ext4 /dev/vda rw,errors=remount-ro
30 22 0:25 / /dev/shm rw,nosuid,nodev - tmpfs tmpfs rw,size=24684092k
41 22 7:3 / /mnt/with\\040space rw,relatime - xfs /dev/loop3 rw,attr2,inode64
";
        let m = mount_of(info, "/dev/shm/x").unwrap();
        assert_eq!(
            (m.fs_type.as_str(), m.mount_point.as_str()),
            ("tmpfs", "/dev/shm")
        );
        assert_eq!(m.options, "rw,nosuid,nodev,rw,size=24684092k");
        let m = mount_of(info, "/mnt/with space/d").unwrap();
        assert_eq!(
            (m.fs_type.as_str(), m.source.as_str()),
            ("xfs", "/dev/loop3")
        );
        // A sibling whose name merely starts with the mount point is not in it.
        assert_eq!(mount_of(info, "/dev/shmem").unwrap().fs_type, "ext4");
    }

    #[test]
    fn a_real_directory_is_described() {
        let d = DirInfo::of(Path::new("/dev/shm")).unwrap();
        assert_eq!(d.fs_type, "tmpfs");
        assert!(d.is_memory_fs() && d.free_bytes > 0 && d.block_size > 0);
        let m = Machine::read();
        assert!(m.cpus >= 1 && m.memory_total > 0);
        assert!(DirInfo::of(Path::new("/nonexistent/dir")).is_err());
    }
}
