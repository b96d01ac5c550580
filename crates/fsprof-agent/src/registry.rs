//! Which cgroup an id is, learned while the cgroup exists: from the
//! kernel's `cgroup_mkdir` events as they happen, from a walk of the v2
//! hierarchy at start, and by walking it again when an id turns up that
//! neither named. An id that no walk finds (its cgroup came and went
//! between two reads without a `cgroup_mkdir` event reaching the agent)
//! is never a label: its events go to `other` and it is counted as
//! unresolved.
//!
//! Memory is bounded by the cgroups that exist plus those gone less than
//! the TTL ago: [`Registry::expire`] drops the rest, and the agent then
//! deletes their counters from the kernel maps.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::{DirEntryExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::labels::Labeler;

/// Walks of the hierarchy for unknown ids, at most one per this long.
const RESCAN_EVERY: Duration = Duration::from_secs(1);
/// statfs f_type of a cgroup v2 mount.
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// One cgroup the agent knows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cgroup {
    /// Below the v2 root, `/` for the root.
    pub path: String,
    pub label: String,
    /// When it was removed.
    pub gone: Option<Instant>,
}

pub struct Registry {
    /// The v2 hierarchy's mount point; `None` where there is none (every
    /// event is then the root's, `/`).
    root: Option<PathBuf>,
    labeler: Labeler,
    cgroups: HashMap<u64, Cgroup>,
    /// Ids no walk found, since when.
    unresolved: HashMap<u64, Instant>,
    /// Unresolved ids seen in all, for the agent's counter.
    pub unresolved_total: u64,
    last_scan: Option<Instant>,
}

/// Where the cgroup v2 hierarchy is mounted: /sys/fs/cgroup on unified
/// hosts, /sys/fs/cgroup/unified on hybrid ones.
pub fn find_root() -> Option<PathBuf> {
    ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
        .iter()
        .map(PathBuf::from)
        .find(|p| is_cgroup2(p))
}

/// Whether `p` is the root of a cgroup v2 mount.
pub fn is_cgroup2(p: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: statfs is plain data, filled by the kernel; c is a valid
    // NUL-terminated path.
    unsafe {
        let mut s: libc::statfs = std::mem::zeroed();
        libc::statfs(c.as_ptr(), &mut s) == 0 && s.f_type as i64 == CGROUP2_SUPER_MAGIC
    }
}

impl Registry {
    /// Knows every cgroup under `root` as it is now.
    pub fn new(root: Option<PathBuf>, labeler: Labeler, now: Instant) -> Registry {
        let mut r = Registry {
            root,
            labeler,
            cgroups: HashMap::new(),
            unresolved: HashMap::new(),
            unresolved_total: 0,
            last_scan: None,
        };
        r.rescan(now);
        r
    }

    /// A cgroup the kernel says was created (`path` below the v2 root).
    pub fn created(&mut self, id: u64, path: &str) {
        self.unresolved.remove(&id);
        let label = self.labeler.label(path);
        self.cgroups.insert(
            id,
            Cgroup {
                path: path.to_string(),
                label,
                gone: None,
            },
        );
    }

    /// A cgroup the kernel says was removed.
    pub fn removed(&mut self, id: u64, at: Instant) {
        if let Some(c) = self.cgroups.get_mut(&id) {
            c.gone.get_or_insert(at);
        }
    }

    /// The label of cgroup `id`, if it is known.
    pub fn known(&self, id: u64) -> Option<&str> {
        match &self.root {
            None => Some("/"),
            Some(_) => self.cgroups.get(&id).map(|c| &c.label[..]),
        }
    }

    /// The label of `id`, walking the hierarchy for an id first seen now
    /// (at most once per [`RESCAN_EVERY`]); `None` for an id no walk
    /// finds, which is then counted as unresolved.
    pub fn resolve(&mut self, id: u64, now: Instant) -> Option<String> {
        if let Some(l) = self.known(id) {
            return Some(l.to_string());
        }
        if id == 0 || self.unresolved.contains_key(&id) {
            return None;
        }
        if self
            .last_scan
            .is_none_or(|t| now.duration_since(t) >= RESCAN_EVERY)
        {
            self.rescan(now);
            if let Some(l) = self.known(id) {
                return Some(l.to_string());
            }
        }
        self.unresolved.insert(id, now);
        self.unresolved_total += 1;
        None
    }

    /// Walks the hierarchy: adds the cgroups it finds, and marks gone the
    /// known ones it no longer has (for hosts where no `cgroup_rmdir`
    /// event says so).
    pub fn rescan(&mut self, now: Instant) {
        let Some(root) = self.root.clone() else {
            return;
        };
        self.last_scan = Some(now);
        let mut found = HashMap::new();
        if let Ok(md) = std::fs::metadata(&root) {
            found.insert(md.ino(), "/".to_string());
        }
        walk(&root, "", &mut found);
        for (id, path) in &found {
            if self.cgroups.get(id).is_none_or(|c| c.gone.is_some()) {
                self.created(*id, path);
            }
        }
        for (id, c) in self.cgroups.iter_mut() {
            if c.gone.is_none() && !found.contains_key(id) {
                c.gone = Some(now);
            }
        }
    }

    /// Ids gone (or unresolved) for at least `ttl`: forgotten here, and
    /// the caller deletes their counters.
    pub fn expire(&mut self, now: Instant, ttl: Duration) -> HashSet<u64> {
        let old = |t: Instant| now.saturating_duration_since(t) >= ttl;
        let mut out: HashSet<u64> = self
            .cgroups
            .iter()
            .filter(|(_, c)| c.gone.is_some_and(old))
            .map(|(&id, _)| id)
            .collect();
        out.extend(
            self.unresolved
                .iter()
                .filter(|(_, &t)| old(t))
                .map(|(&id, _)| id),
        );
        for id in &out {
            self.cgroups.remove(id);
            self.unresolved.remove(id);
        }
        out
    }

    /// Labels of the cgroups that exist.
    pub fn live_labels(&self) -> HashSet<&str> {
        match &self.root {
            None => HashSet::from(["/"]),
            Some(_) => self
                .cgroups
                .values()
                .filter(|c| c.gone.is_none())
                .map(|c| &c.label[..])
                .collect(),
        }
    }

    /// Labels every cgroup anew (the labelling settings changed).
    pub fn relabel(&mut self, labeler: Labeler) {
        self.labeler = labeler;
        for c in self.cgroups.values_mut() {
            c.label = labeler.label(&c.path);
        }
    }

    /// Cgroups known (live and recently gone) and unresolved ids held.
    pub fn sizes(&self) -> (usize, usize) {
        (self.cgroups.len(), self.unresolved.len())
    }

    /// Cgroups that exist.
    pub fn live(&self) -> usize {
        self.cgroups.values().filter(|c| c.gone.is_none()).count()
    }
}

/// Adds every cgroup directory below `dir` (path `prefix`) by inode
/// number, which is the cgroup's id; kernfs reports it in the directory
/// entry, so no stat is needed.
fn walk(dir: &Path, prefix: &str, found: &mut HashMap<u64, String>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return; // removed while we walked
    };
    for e in rd.flatten() {
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let name = e.file_name();
        let path = format!("{prefix}/{}", name.to_string_lossy());
        found.insert(e.ino(), path.clone());
        walk(&e.path(), &path, found);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory tree stands in for the hierarchy: inode numbers are
    /// ids there too.
    #[test]
    fn ids_are_named_from_the_walk_and_expire_after_the_ttl() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("system.slice/a.service")).unwrap();
        let ino = |p: &str| std::fs::metadata(dir.path().join(p)).unwrap().ino();
        let t0 = Instant::now();
        let mut r = Registry::new(Some(dir.path().into()), Labeler::default(), t0);
        let a = ino("system.slice/a.service");
        assert_eq!(r.known(a), Some("a.service"));
        assert_eq!(r.known(ino("")), Some("/"));

        // Created after the walk: found on first sight.
        std::fs::create_dir(dir.path().join("b")).unwrap();
        let b = ino("b");
        let t1 = t0 + RESCAN_EVERY;
        assert_eq!(r.resolve(b, t1).as_deref(), Some("/b"));

        // Gone before it was seen: never a label, counted.
        assert_eq!(r.resolve(123_456_789, t1), None);
        assert_eq!(r.unresolved_total, 1);
        assert_eq!(r.resolve(123_456_789, t1), None);
        assert_eq!(r.unresolved_total, 1, "counted once");

        // Removed: kept for the TTL, then expired.
        std::fs::remove_dir(dir.path().join("b")).unwrap();
        r.rescan(t1);
        assert!(r.live_labels().contains("a.service"));
        assert!(!r.live_labels().contains("/b"));
        let ttl = Duration::from_secs(5);
        assert!(r.expire(t1 + Duration::from_secs(4), ttl).is_empty());
        let gone = r.expire(t1 + ttl, ttl);
        assert_eq!(gone, HashSet::from([b, 123_456_789]));
        assert_eq!(r.known(b), None);
        assert_eq!(r.sizes(), (3, 0));
    }

    #[test]
    fn kernel_events_name_and_retire_cgroups() {
        let t0 = Instant::now();
        let dir = tempfile::tempdir().unwrap();
        let mut r = Registry::new(Some(dir.path().into()), Labeler::default(), t0);
        r.created(77, "/system.slice/x.service");
        assert_eq!(r.resolve(77, t0).as_deref(), Some("x.service"));
        r.removed(77, t0);
        assert_eq!(r.live(), 1, "only the root");
        r.relabel(Labeler {
            mode: crate::labels::Mode::Path,
            depth: 1,
        });
        assert_eq!(r.known(77), Some("/system.slice"));
    }

    #[test]
    fn without_a_v2_hierarchy_everything_is_the_root() {
        let mut r = Registry::new(None, Labeler::default(), Instant::now());
        assert_eq!(r.resolve(42, Instant::now()).as_deref(), Some("/"));
    }
}
