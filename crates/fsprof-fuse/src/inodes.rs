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

use std::collections::{HashMap, VecDeque};
use std::ffi::CStr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock, Weak};

use fuser::{BackingId, Errno};

use crate::sys::{self, Res};

/// The FUSE root's node id.
pub const ROOT: u64 = 1;
/// Synthetic node ids have this bit set (lower inode numbers never do on
/// the file systems Linux has: they are at most 2^48 or so).
const SYNTHETIC: u64 = 1 << 62;

pub type Key = (u64, u64);

/// How many inodes keep data descriptors ([`Inode::data_fd`]) at once,
/// the least recently opened giving theirs up first. Bounded because each
/// inode the kernel knows already holds an `O_PATH` descriptor, and those
/// grow with the kernel's cache (a `grep -r` over a tree, then 10,000
/// creates) up to the descriptor limit: data descriptors kept for every
/// file read would meet EMFILE first.
const KEEP: usize = 256;

/// Inodes keeping data descriptors, oldest first.
static KEEPING: Mutex<VecDeque<Weak<Inode>>> = Mutex::new(VecDeque::new());

/// A lower descriptor for one data request: a handle's (the kernel keeps
/// the handle open while the request runs), or an inode's, held by the
/// request so that neither a forget nor its eviction from the kept ones
/// closes it under the request.
pub enum DataFd {
    Handle(RawFd),
    Kept(Arc<OwnedFd>),
}

impl DataFd {
    pub fn raw(&self) -> RawFd {
        match self {
            DataFd::Handle(fd) => *fd,
            DataFd::Kept(fd) => fd.as_raw_fd(),
        }
    }
}

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
    /// The kernel passthrough backing file (`--fast --passthrough`): one
    /// per inode, as the kernel requires, shared by its open handles.
    pub backing: Mutex<Backing>,
    /// Descriptors for reads and for writes of requests that come without
    /// a file handle (`--fast` never opens files: see `fs::files`), opened
    /// at the first such request and kept until [`KEEP`] other inodes
    /// opened theirs.
    data: Mutex<DataFds>,
}

#[derive(Default)]
struct DataFds {
    reader: Option<Arc<OwnedFd>>,
    writer: Option<Arc<OwnedFd>>,
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

    fn new(fd: OwnedFd, key: Key, id: u64, kind: u32) -> Inode {
        Inode {
            fd,
            key,
            id,
            kind,
            nlookup: AtomicU64::new(1),
            backing: Mutex::default(),
            data: Mutex::default(),
        }
    }

    /// The inode's descriptor for a data request without a file handle:
    /// read-only for reads (a file without write permission for the
    /// daemon stays readable), read-write for writes and what else changes
    /// the data. The kernel checked the caller's permission to open.
    pub fn data_fd(self: &Arc<Self>, write: bool) -> Res<DataFd> {
        let mut d = self.data.lock().unwrap_or_else(|e| e.into_inner());
        let first = d.reader.is_none() && d.writer.is_none();
        let slot = if write { &mut d.writer } else { &mut d.reader };
        if let Some(fd) = slot {
            return Ok(DataFd::Kept(fd.clone()));
        }
        let flags = if write { libc::O_RDWR } else { libc::O_RDONLY };
        // SAFETY: reopen returns a descriptor nothing else owns.
        let fd = Arc::new(unsafe { OwnedFd::from_raw_fd(sys::reopen(self.fd(), flags)?) });
        *slot = Some(fd.clone());
        drop(d);
        if first {
            self.keep();
        }
        Ok(DataFd::Kept(fd))
    }

    /// Keeps the descriptor a create opened (for writing) as the writer.
    pub fn keep_writer(self: &Arc<Self>, fd: OwnedFd) {
        let mut d = self.data.lock().unwrap_or_else(|e| e.into_inner());
        if d.writer.is_some() {
            return;
        }
        let first = d.reader.is_none();
        d.writer = Some(Arc::new(fd));
        drop(d);
        if first {
            self.keep();
        }
    }

    /// Joins the inodes keeping data descriptors; the oldest beyond
    /// [`KEEP`] closes its own (requests using them hold them on).
    fn keep(self: &Arc<Self>) {
        let old = {
            let mut k = KEEPING.lock().unwrap_or_else(|e| e.into_inner());
            k.push_back(Arc::downgrade(self));
            if k.len() > KEEP {
                k.pop_front()
            } else {
                None
            }
        };
        if let Some(ino) = old.and_then(|w| w.upgrade()) {
            *ino.data.lock().unwrap_or_else(|e| e.into_inner()) = DataFds::default();
        }
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
        let root = Arc::new(Inode::new(root, key(&st), ROOT, st.st_mode & libc::S_IFMT));
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
        let ino = Arc::new(Inode::new(fd, k, id, st.st_mode & libc::S_IFMT));
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

    #[test]
    fn data_descriptors_are_kept_for_a_bounded_number_of_inodes() {
        let d = tempfile::tempdir().unwrap();
        for k in 0..KEEP + 10 {
            std::fs::write(d.path().join(format!("f{k}")), k.to_string()).unwrap();
        }
        let inodes = Inodes::new(open_dir(d.path())).unwrap();
        let root = inodes.root().clone();
        let mut all = Vec::new();
        let mut held = None;
        for k in 0..KEEP + 10 {
            let name = cname(OsStr::new(&format!("f{k}"))).unwrap();
            let (ino, _) = inodes.lookup(&root, &name).unwrap();
            let fd = ino.data_fd(false).unwrap();
            if k == 0 {
                held = Some(fd);
            }
            all.push(ino);
        }
        let kept = |i: &Arc<Inode>| i.data.lock().unwrap().reader.is_some();
        assert_eq!(all.iter().filter(|i| kept(i)).count(), KEEP);
        assert!(!kept(&all[0]), "the oldest gave its descriptor up");
        // ... but not under the request still using it.
        let mut buf = [0u8; 8];
        let n = sys::pread(held.unwrap().raw(), &mut buf, 0).unwrap();
        assert_eq!(&buf[..n], b"0");
        // A request that needs it again opens it again.
        let fd = all[0].data_fd(false).unwrap();
        let n = sys::pread(fd.raw(), &mut buf, 0).unwrap();
        assert_eq!(&buf[..n], b"0");
    }
}
