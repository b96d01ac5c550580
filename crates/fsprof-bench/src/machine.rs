//! What a result must say about where it was measured: the machine (CPU,
//! caches, memory, kernel), the file system under DIR (type, device, mount
//! options, free space) and how busy the machine was.

use std::path::Path;

use fsprof_measure::target::{Target, TargetError};
use fsprof_sys::host::{self, HostFacts};
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
            cpu_governor: host::cpu_governor(),
            load_average: host::load_average().unwrap_or(0.0),
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

/// The file system a directory is on, as a result records it.
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
    pub fn of(dir: &Path) -> Result<DirInfo, TargetError> {
        Ok(DirInfo::from(&Target::probe(dir)?))
    }

    /// Whether the file system keeps file data in memory only (no device
    /// behind it, so there is no cold state to reach).
    pub fn is_memory_fs(&self) -> bool {
        matches!(self.fs_type.as_str(), "tmpfs" | "ramfs" | "shm")
    }
}

impl From<&Target> for DirInfo {
    fn from(t: &Target) -> DirInfo {
        let m = t.mount.clone();
        DirInfo {
            path: t.dir.to_string_lossy().into_owned(),
            fs_type: t.fs_type.clone(),
            source: m.as_ref().map(|m| m.source.clone()).unwrap_or_default(),
            mount_point: m
                .as_ref()
                .map(|m| m.mount_point.to_string_lossy().into_owned())
                .unwrap_or_default(),
            mount_options: m
                .map(|m| format!("{},{}", m.options, m.super_options))
                .unwrap_or_default(),
            free_bytes: t.free_bytes,
            block_size: t.fragment_size,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_real_directory_is_described() {
        let d = DirInfo::of(Path::new("/dev/shm")).unwrap();
        assert_eq!(d.fs_type, "tmpfs");
        assert_eq!(d.mount_point, "/dev/shm");
        assert!(
            d.mount_options.starts_with("rw") || d.mount_options.starts_with("ro"),
            "{d:?}"
        );
        assert!(d.is_memory_fs() && d.free_bytes > 0 && d.block_size > 0);
        let m = Machine::read();
        assert!(m.cpus >= 1 && m.memory_total > 0);
        assert!(DirInfo::of(Path::new("/nonexistent/dir")).is_err());
    }
}
