//! A memory cgroup of a known limit, for the page-cache method: fsprof
//! creates it, moves itself in while it reads, moves back and removes it
//! (also when the measurement fails or panics: [`MemCgroup`] undoes all of
//! it on drop).
//!
//! cgroup v2 (`memory.max`) is used where the memory controller is on the
//! unified hierarchy: the new group goes under the nearest ancestor of
//! fsprof's own group that delegates `memory` to its children (a group
//! with processes cannot). cgroup v1 (`memory.limit_in_bytes`) puts it
//! under fsprof's own memory group, so it stays inside whatever limits
//! that group already has.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

/// A memory cgroup fsprof made.
#[derive(Debug)]
pub struct MemCgroup {
    pub path: PathBuf,
    pub version: Version,
    pub limit: u64,
    /// The group fsprof was in, to return to.
    home: PathBuf,
    entered: bool,
}

/// fsprof's own group in a hierarchy: the v2 line (`0::/path`) or the v1
/// line whose controllers include `memory`.
fn own_group(version: Version) -> Option<String> {
    let text = fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (id, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
        let ok = match version {
            Version::V2 => id == "0" && ctrls.is_empty(),
            Version::V1 => ctrls.split(',').any(|c| c == "memory"),
        };
        ok.then(|| path.trim_start_matches('/').to_string())
    })
}

fn has_word(path: &Path, word: &str) -> bool {
    fs::read_to_string(path)
        .map(|s| s.split_whitespace().any(|w| w == word))
        .unwrap_or(false)
}

/// Why no memory cgroup could be made; each says what would let it be.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("no memory cgroup controller is mounted (mount cgroup2 with the memory controller, or cgroup v1's memory hierarchy)")]
    NoController,
    #[error("fsprof's own cgroup {0} group is unknown (/proc/self/cgroup has no line for it)")]
    UnknownOwnGroup(&'static str),
    #[error("no cgroup v2 group above fsprof's delegates the memory controller (add +memory to an ancestor's cgroup.subtree_control, or run fsprof in a group that has it)")]
    NotDelegated,
    #[error("cannot create a cgroup under {}: {source}", parent.display())]
    Create { parent: PathBuf, source: io::Error },
    #[error("cannot set {}: {source}", path.display())]
    SetLimit { path: PathBuf, source: io::Error },
}

/// Where to make the group, where fsprof is now, and which version.
fn locate() -> Result<(PathBuf, PathBuf, Version), CgroupError> {
    let ms = fsprof_sys::mountinfo::read();
    if let Some(m) = ms.iter().find(|m| {
        m.fs_type == "cgroup2" && has_word(&m.mount_point.join("cgroup.controllers"), "memory")
    }) {
        let own = own_group(Version::V2).ok_or(CgroupError::UnknownOwnGroup("v2"))?;
        let home = m.mount_point.join(&own);
        let mut parent = home.parent().map(Path::to_path_buf);
        while let Some(p) = parent {
            if !p.starts_with(&m.mount_point) {
                break;
            }
            if has_word(&p.join("cgroup.subtree_control"), "memory") {
                return Ok((p, home, Version::V2));
            }
            parent = p.parent().map(Path::to_path_buf);
        }
        return Err(CgroupError::NotDelegated);
    }
    if let Some(m) = ms
        .iter()
        .find(|m| m.fs_type == "cgroup" && m.super_options.split(',').any(|o| o == "memory"))
    {
        let own = own_group(Version::V1).ok_or(CgroupError::UnknownOwnGroup("v1 memory"))?;
        let home = m.mount_point.join(own);
        return Ok((home.clone(), home, Version::V1));
    }
    Err(CgroupError::NoController)
}

impl MemCgroup {
    /// Creates a group limited to `limit` bytes (not yet entered).
    pub fn create(limit: u64) -> Result<MemCgroup, CgroupError> {
        let (parent, home, version) = locate()?;
        let mut last = io::Error::from(io::ErrorKind::AlreadyExists);
        let mut made = None;
        for n in 0..100 {
            let p = parent.join(format!("fsprof-discover-{}-{n}", std::process::id()));
            match fs::create_dir(&p) {
                Ok(()) => {
                    made = Some(p);
                    break;
                }
                Err(e) => last = e,
            }
        }
        let path = made.ok_or(CgroupError::Create {
            parent,
            source: last,
        })?;
        let cg = MemCgroup {
            path,
            version,
            limit,
            home,
            entered: false,
        };
        fs::write(cg.limit_file(), limit.to_string()).map_err(|source| CgroupError::SetLimit {
            path: cg.limit_file(),
            source,
        })?;
        Ok(cg)
    }

    /// The file that holds the limit.
    pub fn limit_file(&self) -> PathBuf {
        self.path.join(match self.version {
            Version::V2 => "memory.max",
            Version::V1 => "memory.limit_in_bytes",
        })
    }

    /// The limit as the kernel now states it.
    pub fn stated_limit(&self) -> Option<u64> {
        fs::read_to_string(self.limit_file())
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// The most the group has held (v2 `memory.peak`, v1 `max_usage_in_bytes`).
    pub fn peak(&self) -> Option<u64> {
        let f = match self.version {
            Version::V2 => "memory.peak",
            Version::V1 => "memory.max_usage_in_bytes",
        };
        fs::read_to_string(self.path.join(f))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Moves this process (all its threads) into the group.
    pub fn enter(&mut self) -> io::Result<()> {
        fs::write(self.path.join("cgroup.procs"), "0")?;
        self.entered = true;
        Ok(())
    }

    /// Moves this process back where it was.
    pub fn leave(&mut self) -> io::Result<()> {
        if self.entered {
            fs::write(self.home.join("cgroup.procs"), "0")?;
            self.entered = false;
        }
        Ok(())
    }
}

impl Drop for MemCgroup {
    fn drop(&mut self) {
        let _ = self.leave();
        // The kernel may take a moment to see the group empty.
        for _ in 0..50 {
            if fs::remove_dir(&self.path).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[ignore = "needs root"]
    fn a_group_is_made_entered_left_and_removed() {
        fsprof_testkit::need_root("a memory cgroup");
        let mut cg = MemCgroup::create(256 << 20).expect("a memory cgroup");
        assert_eq!(cg.stated_limit(), Some(256 << 20));
        let path = cg.path.clone();
        cg.enter().unwrap();
        let procs = fs::read_to_string(path.join("cgroup.procs")).unwrap();
        assert!(
            procs.lines().any(|l| l == std::process::id().to_string()),
            "{procs}"
        );
        cg.leave().unwrap();
        drop(cg);
        assert!(!path.exists(), "{} was not removed", path.display());
    }
}
