//! The state a trace expects before its first call, inferred from the
//! calls themselves (Replayfs §2.7: a snapshot is better, but the trace is
//! what there is). Each path's first observation decides: a successful
//! open without O_CREAT, a stat, an unlink say it existed (a stat says as
//! what, how large and with which mode); an ENOENT or a successful
//! exclusive create say it did not; creations need their parent
//! directories. Reads of a pre-existing file not yet written tell its
//! minimum size (its exact size when a read stops short), and with
//! `--data full` its contents. Later observations of a path follow the
//! trace's own changes (creations, removals, renames) and decide nothing.

use std::collections::{BTreeMap, HashMap};

use crate::compile::parent;
use crate::event::Call;
use crate::replayfile::{InitEntry, InitKind};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cur {
    Absent,
    Present,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    Unknown,
    File,
    Dir,
    Symlink(Vec<u8>),
}

#[derive(Debug)]
struct Pre {
    kind: Kind,
    size_min: u64,
    size_exact: Option<u64>,
    mode: Option<u32>,
    content: Vec<(u64, u32)>,
    /// Not yet changed by the trace: what it shows is the initial state.
    intact: bool,
}

#[derive(Default)]
pub struct Initial {
    cur: HashMap<Vec<u8>, Cur>,
    pre: BTreeMap<Vec<u8>, Pre>,
}

/// What one call shows: the call, the path of its file (resolved path or
/// the file its fd was opened on) and, for fd calls, the file position.
pub struct Observation<'a> {
    call: &'a Call,
    path: Option<Vec<u8>>,
    pos: Option<u64>,
    /// The call's path ended in a slash: it resolves only to a directory.
    dir: bool,
}

impl<'a> Observation<'a> {
    pub fn of(call: &'a Call, path: Option<Vec<u8>>, pos: Option<u64>) -> Self {
        Observation {
            call,
            path,
            pos,
            dir: false,
        }
    }

    pub fn naming_a_directory(mut self, dir: bool) -> Self {
        self.dir = dir;
        self
    }
}

fn kind_of_mode(m: u32) -> Kind {
    match m & libc::S_IFMT {
        libc::S_IFDIR => Kind::Dir,
        libc::S_IFLNK => Kind::Symlink(Vec::new()),
        libc::S_IFREG => Kind::File,
        _ => Kind::Unknown,
    }
}

impl Initial {
    fn known(&self, p: &[u8]) -> bool {
        p == b"/" || self.cur.contains_key(p)
    }

    fn dirs_above(&mut self, p: &[u8]) {
        let mut chain = Vec::new();
        let mut a = parent(p);
        // Above a `..` the lexical parent is not the real one: stop there.
        while a != b"/" && !self.known(a) && !a.ends_with(b"/..") {
            chain.push(a.to_vec());
            a = parent(a);
        }
        for d in chain {
            self.cur.insert(d.clone(), Cur::Present);
            self.pre.insert(d, pre(Kind::Dir));
        }
    }

    fn exists(&mut self, p: &[u8], kind: Kind) {
        if !self.known(p) {
            self.dirs_above(p);
            self.cur.insert(p.to_vec(), Cur::Present);
            self.pre.insert(p.to_vec(), pre(kind));
        } else if kind != Kind::Unknown {
            if let Some(e) = self.pre.get_mut(p).filter(|e| e.intact) {
                if e.kind == Kind::Unknown
                    || matches!((&e.kind, &kind), (Kind::Symlink(t), Kind::Symlink(_)) if t.is_empty())
                {
                    e.kind = kind;
                }
            }
        }
    }

    fn absent(&mut self, p: &[u8]) {
        if !self.known(p) {
            self.cur.insert(p.to_vec(), Cur::Absent);
        }
    }

    fn created(&mut self, p: &[u8]) {
        self.dirs_above(p);
        self.cur.insert(p.to_vec(), Cur::Present);
    }

    fn removed(&mut self, p: &[u8]) {
        self.cur.insert(p.to_vec(), Cur::Absent);
        let mut prefix = p.to_vec();
        prefix.push(b'/');
        for (k, v) in self.cur.iter_mut() {
            if k.starts_with(&prefix) {
                *v = Cur::Absent;
            }
        }
        self.changed(p);
    }

    fn renamed(&mut self, from: &[u8], to: &[u8]) {
        let mut prefix = from.to_vec();
        prefix.push(b'/');
        let moved: Vec<(Vec<u8>, Cur)> = self
            .cur
            .iter()
            .filter(|(k, _)| k.starts_with(&prefix))
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        for (k, v) in moved {
            let mut nk = to.to_vec();
            nk.extend_from_slice(&k[from.len()..]);
            self.cur.insert(nk, v);
            self.cur.insert(k, Cur::Absent);
        }
        self.created(to);
        self.changed(to);
        self.cur.insert(from.to_vec(), Cur::Absent);
        self.changed(from);
    }

    /// The trace changed the file: what it shows later is not initial.
    fn changed(&mut self, p: &[u8]) {
        if let Some(e) = self.pre.get_mut(p) {
            e.intact = false;
        }
    }

    fn stat_evidence(&mut self, p: &[u8], c: &Call) {
        let Some(e) = self.pre.get_mut(p).filter(|e| e.intact) else {
            return;
        };
        if let Some(m) = c.st_mode {
            let k = kind_of_mode(m);
            if k != Kind::Unknown && !matches!(e.kind, Kind::Symlink(ref t) if !t.is_empty()) {
                e.kind = k;
            }
            e.mode.get_or_insert(m & 0o7777);
        }
        if let (Some(s), Kind::File | Kind::Unknown) = (c.size, &e.kind) {
            e.size_exact = Some(s);
        }
    }

    fn read_evidence(&mut self, p: &[u8], off: u64, got: u64, asked: u64, content: Option<u32>) {
        let Some(e) = self.pre.get_mut(p).filter(|e| e.intact) else {
            return;
        };
        e.size_min = e.size_min.max(off + got);
        if got < asked {
            e.size_exact.get_or_insert(off + got);
        }
        if let Some(b) = content {
            e.content.push((off, b));
        }
    }

    /// A page of `p` at `off` touched through a mapping: the file reached
    /// past `off` (a touch beyond its end is SIGBUS); a store through a
    /// shared mapping changes it.
    pub fn mapped(&mut self, p: &[u8], off: u64, store: bool) {
        self.read_evidence(p, off, 1, 1, None);
        if store {
            self.changed(p);
        }
    }

    /// Takes in one call (before its effects are followed elsewhere);
    /// `content` is the buffer of bytes it read, when captured.
    pub fn observe(&mut self, o: &Observation, content: Option<u32>) {
        let c = o.call;
        let Some(p) = o.path.as_deref() else { return };
        let ok = !c.failed();
        let enoent = c.errno == libc::ENOENT;
        let op = c.op.name();
        match op {
            "open" | "openat" | "creat" | "fopen" => self.observe_open(p, c, o.dir),
            "opendir" | "chdir" if ok => self.exists(p, Kind::Dir),
            "stat" | "lstat" | "fstatat" | "statx" | "access" | "faccessat" | "statfs"
            | "statvfs" => self.observe_stat(p, c),
            // mmap: the shim's fstat of the mapped file.
            "fstat" | "mmap" if ok => self.stat_evidence(p, c),
            "readlink" | "readlinkat" => {
                if ok {
                    let target = c.result.clone().unwrap_or_default();
                    self.exists(p, Kind::Symlink(target));
                } else if c.errno == libc::EINVAL {
                    self.exists(p, Kind::Unknown);
                } else if enoent {
                    self.absent(p);
                }
            }
            "mkdir" | "mkdirat" | "mknod" | "mknodat" | "symlink" | "symlinkat" | "rmdir"
            | "unlink" | "unlinkat" | "rename" | "renameat" | "renameat2" | "link" | "linkat" => {
                self.observe_namespace(p, c)
            }
            "truncate" | "chmod" | "fchmodat" | "chown" | "lchown" | "fchownat" | "utimensat"
            | "utime" | "utimes" | "lutimes" => {
                if ok {
                    self.exists(p, Kind::Unknown);
                    if op == "truncate" {
                        self.changed(p);
                    }
                } else if enoent {
                    self.absent(p);
                }
            }
            "read" | "pread" | "readv" | "preadv" | "preadv2" | "fread" if ok => {
                self.observe_read(p, c, o.pos, content)
            }
            // The file copied from reaches what was copied (`cat file >out`
            // copies this way). Not its exact size: a copy may stop short
            // of the end (the kernel copies in pieces), and the trace does
            // not say whether the caller gave an offset of its own, so the
            // position is the descriptor's.
            "sendfile" | "copy_file_range" if ok => {
                if let Some(off) = o.pos {
                    let got = c.ret.max(0) as u64;
                    self.read_evidence(p, off, got, got, None);
                }
            }
            "getdents64" | "readdir" => self.exists(p, Kind::Dir),
            "write" | "pwrite" | "writev" | "pwritev" | "pwritev2" | "fwrite" | "fputs"
            | "fprintf" | "puts" | "fputc" | "dprintf" | "ftruncate" | "fallocate"
            | "posix_fallocate" => self.changed(p),
            _ => {}
        }
    }

    /// A call that creates, removes, renames or links a name: what its
    /// success or failure says of the path (and of a second one).
    fn observe_namespace(&mut self, p: &[u8], c: &Call) {
        let ok = !c.failed();
        let enoent = c.errno == libc::ENOENT;
        let op = c.op.name();
        match op {
            "mkdir" | "mkdirat" => {
                if ok {
                    self.absent(p);
                    self.created(p);
                } else if c.errno == libc::EEXIST {
                    self.exists(p, Kind::Unknown);
                }
            }
            "mknod" | "mknodat" | "symlink" | "symlinkat" if ok => {
                self.absent(p);
                self.created(p);
            }
            "rmdir" | "unlink" | "unlinkat" => {
                if ok {
                    let flags = c.flags.unwrap_or(0);
                    let dir = op == "rmdir" || flags & libc::AT_REMOVEDIR as i64 != 0;
                    self.exists(p, if dir { Kind::Dir } else { Kind::Unknown });
                    self.removed(p);
                } else if enoent {
                    self.absent(p);
                }
            }
            "rename" | "renameat" | "renameat2" => {
                if ok {
                    self.exists(p, Kind::Unknown);
                    if let Some(to) = c.resolved2.as_deref() {
                        self.renamed(p, to);
                    }
                } else if enoent {
                    self.absent(p);
                }
            }
            "link" | "linkat" if ok => {
                self.exists(p, Kind::File);
                if let Some(to) = c.resolved2.as_deref() {
                    self.absent(to);
                    self.created(to);
                }
            }
            _ => {}
        }
    }

    /// A read that succeeded: the bytes it got at its offset (the file
    /// position `pos` for reads without one) show the file's size and,
    /// when captured, its content there.
    fn observe_read(&mut self, p: &[u8], c: &Call, pos: Option<u64>, content: Option<u32>) {
        let op = c.op.name();
        let off = match op {
            "pread" | "preadv" | "preadv2" => c.offset.map(|o| o.max(0) as u64),
            _ => pos,
        };
        if let Some(off) = off {
            let asked = c.len.unwrap_or(u64::MAX);
            self.read_evidence(p, off, c.ret.max(0) as u64, asked, content);
        }
    }

    /// An open: what its flags and result say of the path (`dir`: it was
    /// given with a trailing slash).
    fn observe_open(&mut self, p: &[u8], c: &Call, dir: bool) {
        let ok = !c.failed();
        let f = match c.op.name() {
            "fopen" => crate::compile::fopen_flags(c.name.as_deref().unwrap_or(b"r")),
            "creat" => (libc::O_CREAT | libc::O_TRUNC) as i64,
            _ => c.flags.unwrap_or(0),
        };
        let creat = f & libc::O_CREAT as i64 != 0;
        let excl = f & libc::O_EXCL as i64 != 0;
        let trunc = f & libc::O_TRUNC as i64 != 0;
        let dir = dir || f & libc::O_DIRECTORY as i64 != 0;
        if ok {
            if creat && (excl || trunc) {
                self.absent(p);
                self.created(p);
                self.changed(p);
            } else {
                self.exists(p, if dir { Kind::Dir } else { Kind::Unknown });
                if trunc {
                    self.changed(p);
                }
            }
        } else if c.errno == libc::EEXIST {
            self.exists(p, Kind::Unknown);
        } else if c.errno == libc::ENOENT && !creat {
            self.absent(p);
        }
    }

    /// A stat-like call on a path: the entry's kind and sizes.
    fn observe_stat(&mut self, p: &[u8], c: &Call) {
        let op = c.op.name();
        if !c.failed() {
            let nofollow = op == "lstat"
                || (matches!(op, "fstatat" | "statx")
                    && c.flags.unwrap_or(0) & libc::AT_SYMLINK_NOFOLLOW as i64 != 0);
            let kind = match c.st_mode.map(kind_of_mode) {
                Some(Kind::Symlink(_)) if !nofollow => Kind::Unknown,
                Some(k) => k,
                None => Kind::Unknown,
            };
            self.exists(p, kind);
            self.stat_evidence(p, c);
        } else if c.errno == libc::ENOENT {
            self.absent(p);
        }
    }

    /// The entries to create, parents first; `intern` names paths in the
    /// string table.
    pub fn entries(&self, intern: &mut dyn FnMut(&[u8]) -> u32) -> Vec<InitEntry> {
        self.pre
            .iter()
            .filter(|(p, _)| !p.ends_with(b"/..") && p.as_slice() != b"/")
            .map(|(p, e)| InitEntry {
                path: intern(p),
                kind: match &e.kind {
                    Kind::Dir => InitKind::Dir,
                    Kind::Symlink(t) if !t.is_empty() => InitKind::Symlink { target: t.clone() },
                    _ => InitKind::File {
                        size: e.size_exact.unwrap_or(e.size_min).max(e.size_min),
                        exact: e.size_exact.is_some(),
                    },
                },
                mode: e.mode,
                content: e.content.clone(),
            })
            .collect()
    }
}

fn pre(kind: Kind) -> Pre {
    Pre {
        kind,
        size_min: 0,
        size_exact: None,
        mode: None,
        content: Vec::new(),
        intact: true,
    }
}
