//! The inodes the kernel knows: node id → an `O_PATH` descriptor of the
//! lower inode, with the kernel's lookup count.
//!
//! Node ids are the lower inode numbers (fuser makes a node id and the
//! `st_ino` the kernel shows one and the same), so `ls -i` through the
//! mount agrees with LOWER and hard links share their number. A lower
//! inode is keyed by (device, inode): one node id per lower inode, however
//! many names lead to it. Holding the descriptor keeps the lower inode
//! alive, so its number cannot be reused while the kernel may still use the
//! node id. Where the number cannot be the node id — 0, 1 (the FUSE root),
//! the root's own number, or a number already taken by an inode of another
//! device under LOWER — a synthetic id is used instead (stable while the
//! kernel keeps the inode).

use std::collections::HashMap;
use std::ffi::CStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};

use fuser::{BackingId, Errno};

use crate::sys::{self, Res};

/// The FUSE root's node id.
pub const ROOT: u64 = 1;
/// Synthetic node ids have this bit set (lower inode numbers never do on
/// the file systems Linux has: they are at most 2^48 or so).
const SYNTHETIC: u64 = 1 << 62;

pub type Key = (u64, u64);

pub fn key(st: &libc::stat) -> Key {
    (st.st_dev, st.st_ino)
}

pub struct Inode {
    pub fd: OwnedFd,
    pub key: Key,
    pub id: u64,
    /// File type bits (`S_IFMT`) of the lower inode.
    pub kind: u32,
    nlookup: AtomicU64,
    /// The kernel passthrough backing file (`--fast`): one per inode, as
    /// the kernel requires, shared by its open handles.
    pub backing: Mutex<Backing>,
}

#[derive(Default)]
pub struct Backing {
    pub id: Option<BackingId>,
    /// Open handles using `id`; it is closed with the last.
    pub users: u64,
}

impl Inode {
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    pub fn is_symlink(&self) -> bool {
        self.kind == libc::S_IFLNK
    }
}

struct Table {
    by_id: HashMap<u64, Arc<Inode>>,
    by_key: HashMap<Key, u64>,
}

pub struct Inodes {
    table: RwLock<Table>,
    root: Arc<Inode>,
    next_synthetic: AtomicU64,
}

impl Inodes {
    /// `root` is LOWER, opened before the mount (it may be the mount point).
    pub fn new(root: OwnedFd) -> Res<Inodes> {
        let st = sys::stat_fd(root.as_fd())?;
        let root = Arc::new(Inode {
            fd: root,
            key: key(&st),
            id: ROOT,
            kind: st.st_mode & libc::S_IFMT,
            nlookup: AtomicU64::new(1),
            backing: Mutex::default(),
        });
        let mut by_id = HashMap::new();
        by_id.insert(ROOT, root.clone());
        let mut by_key = HashMap::new();
        by_key.insert(root.key, ROOT);
        Ok(Inodes {
            table: RwLock::new(Table { by_id, by_key }),
            root,
            next_synthetic: AtomicU64::new(SYNTHETIC),
        })
    }

    #[cfg(test)]
    pub fn root(&self) -> &Arc<Inode> {
        &self.root
    }

    /// The inode of a node id the kernel holds; ESTALE for one it does not.
    pub fn get(&self, id: u64) -> Res<Arc<Inode>> {
        if id == ROOT {
            return Ok(self.root.clone());
        }
        let t = self.table.read().unwrap_or_else(|e| e.into_inner());
        t.by_id.get(&id).cloned().ok_or(Errno::ESTALE)
    }

    /// Looks `name` up in `parent` and counts one more kernel reference to
    /// the inode found. Returns the inode and its attributes.
    pub fn lookup(&self, parent: &Inode, name: &CStr) -> Res<(Arc<Inode>, libc::stat)> {
        let st = sys::stat_at(parent.fd(), name, libc::AT_SYMLINK_NOFOLLOW)?;
        if let Some(ino) = self.find(key(&st)) {
            return Ok((ino, st));
        }
        let fd = sys::open_at(parent.fd(), name, libc::O_PATH | libc::O_NOFOLLOW, 0)?;
        // The name may have moved on between the stat and the open: the
        // descriptor is what we keep, so its attributes are the answer.
        let st = sys::stat_fd(fd.as_fd())?;
        Ok((self.insert(fd, &st), st))
    }

    /// Counts one more reference to the inode an `O_PATH` descriptor of a
    /// just created file refers to (registering it if new).
    pub fn adopt(&self, fd: OwnedFd) -> Res<(Arc<Inode>, libc::stat)> {
        let st = sys::stat_fd(fd.as_fd())?;
        Ok((self.insert(fd, &st), st))
    }

    /// Counts one more reference to an inode already known by key.
    fn find(&self, k: Key) -> Option<Arc<Inode>> {
        let t = self.table.read().unwrap_or_else(|e| e.into_inner());
        let ino = t.by_id.get(t.by_key.get(&k)?)?;
        // Under the read lock: `forget` removes inodes under the write lock
        // only, so this one cannot be dropped between the find and the count.
        ino.nlookup.fetch_add(1, Relaxed);
        Some(ino.clone())
    }

    /// Registers a newly opened inode (or counts a reference to the one
    /// another thread registered meanwhile, dropping `fd`).
    fn insert(&self, fd: OwnedFd, st: &libc::stat) -> Arc<Inode> {
        let k = key(st);
        let mut t = self.table.write().unwrap_or_else(|e| e.into_inner());
        if let Some(ino) = t.by_key.get(&k).and_then(|id| t.by_id.get(id)) {
            ino.nlookup.fetch_add(1, Relaxed);
            return ino.clone();
        }
        let id = self.choose_id(&t, st.st_ino);
        let ino = Arc::new(Inode {
            fd,
            key: k,
            id,
            kind: st.st_mode & libc::S_IFMT,
            nlookup: AtomicU64::new(1),
            backing: Mutex::default(),
        });
        t.by_id.insert(id, ino.clone());
        t.by_key.insert(k, id);
        ino
    }

    fn choose_id(&self, t: &Table, st_ino: u64) -> u64 {
        let usable = st_ino > ROOT
            && st_ino & SYNTHETIC == 0
            && st_ino != self.root.key.1
            && !t.by_id.contains_key(&st_ino);
        if usable {
            st_ino
        } else {
            self.next_synthetic.fetch_add(1, Relaxed)
        }
    }

    /// The kernel dropped `n` references; the inode goes with the last.
    pub fn forget(&self, id: u64, n: u64) {
        if id == ROOT {
            return;
        }
        let mut t = self.table.write().unwrap_or_else(|e| e.into_inner());
        let Some(ino) = t.by_id.get(&id) else {
            return;
        };
        let left = ino.nlookup.load(Relaxed).saturating_sub(n);
        ino.nlookup.store(left, Relaxed);
        if left == 0 {
            let k = ino.key;
            t.by_id.remove(&id);
            t.by_key.remove(&k);
        }
    }

    /// Inodes the kernel holds (the root included).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.table
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .by_id
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::cname;
    use std::ffi::OsStr;
    use std::os::unix::fs::MetadataExt;

    fn open_dir(p: &std::path::Path) -> OwnedFd {
        let c = cname(p.as_os_str()).unwrap();
        // SAFETY: a NUL-terminated path.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_DIRECTORY) };
        assert!(fd >= 0);
        // SAFETY: a new descriptor nothing else owns.
        unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) }
    }

    #[test]
    fn hard_links_share_one_node_id_which_is_the_lower_inode_number() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a"), "x").unwrap();
        std::fs::hard_link(d.path().join("a"), d.path().join("b")).unwrap();
        let inodes = Inodes::new(open_dir(d.path())).unwrap();
        let root = inodes.root().clone();
        let (a, _) = inodes
            .lookup(&root, &cname(OsStr::new("a")).unwrap())
            .unwrap();
        let (b, _) = inodes
            .lookup(&root, &cname(OsStr::new("b")).unwrap())
            .unwrap();
        assert_eq!(a.id, b.id);
        assert_eq!(a.id, std::fs::metadata(d.path().join("a")).unwrap().ino());
        assert_eq!(inodes.len(), 2);
        inodes.forget(a.id, 1);
        assert!(inodes.get(a.id).is_ok(), "one reference left");
        inodes.forget(a.id, 1);
        assert_eq!(inodes.get(a.id).err(), Some(Errno::ESTALE));
        assert_eq!(
            inodes
                .lookup(&root, &cname(OsStr::new("zz")).unwrap())
                .err(),
            Some(Errno::ENOENT)
        );
    }
}
