//! The pass-through file system: every FUSE request is served by the same
//! operation on LOWER and timed, per opcode, around that work (the time
//! the daemon takes; the kernel's `fuse` layer adds the queueing and the
//! transfer). The reply is sent after the clock stops.
//!
//! This file is the `fuser::Filesystem` face: each handler times one call
//! of an inherent method (in `entries`, `files`, `dirs`) and replies. The
//! control file's requests (see [`crate::control`]) are answered before any
//! timing, so they are never counted. Each handler starts with the busy
//! poll's guard, which polls for the next request once the handler has
//! replied (why there: [`crate::poll`]).

mod dirs;
mod entries;
mod files;

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, CopyFileRangeFlags, Errno, FileAttr, FileHandle, Filesystem, Generation, INodeNo,
    InitFlags, KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyLseek, ReplyOpen, ReplyStatfs,
    ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};

use crate::control::{self, Control};
use crate::inodes::{Inode, Inodes, ROOT};
use crate::live::Live;
use crate::opcodes::op;
use crate::stats::Recorder;
use crate::sys::Res;

/// How much the kernel may cache, and so how much the daemon sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// No entry, attribute or directory caching, page cache dropped at
    /// each open, no kernel passthrough: every operation an application
    /// makes that the kernel cannot answer from an open file's pages
    /// reaches the daemon.
    ObserveAll,
    /// Entries and attributes cached for the TTL, page cache kept across
    /// opens, readdirplus, and files not opened in the daemon (or, with
    /// [`FsConfig::passthrough`], reads and writes handed to the backing
    /// file in the kernel where it allows FUSE passthrough).
    Fast,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::ObserveAll => "observe-all",
            Mode::Fast => "fast",
        }
    }
}

#[derive(Clone, Debug)]
pub struct FsConfig {
    pub mode: Mode,
    /// Entry and attribute TTL in fast mode.
    pub cache_ttl: Duration,
    /// Create inodes as the caller (daemon is root, `allow_other`).
    pub as_caller: bool,
    /// The kernel checks permissions (`default_permissions`): it sends a
    /// getattr of each inode it checks that has no valid attributes.
    pub kernel_checks: bool,
    /// Other users may read the control file (with `kernel_checks`).
    pub stat_allow_other: bool,
    /// Fast mode: open files in the daemon and hand their reads and writes
    /// to the kernel's FUSE passthrough, instead of leaving opens to the
    /// kernel (see `files`).
    pub passthrough: bool,
}

/// A getattr of the mount root that may turn out to be the control
/// file's: who asked, its latency, and the view epoch before it was
/// counted ([`Recorder::quiet_epoch`]).
struct RootGetattr {
    pid: u32,
    ns: u64,
    epoch: u64,
}

pub struct PassFs {
    inodes: Inodes,
    rec: Recorder,
    cfg: FsConfig,
    ttl: Duration,
    /// The kernel agreed to FUSE passthrough and has not refused a backing
    /// file yet.
    passthrough: AtomicBool,
    /// Observe-all opens files for direct I/O (every read and write call
    /// is a request), the kernel having agreed to shared mmap of such files.
    direct_io: bool,
    /// Fast mode without passthrough: open, opendir and flush are answered
    /// ENOSYS, so the kernel stops sending them (see `files`, `dirs`).
    no_open: bool,
    control: Control,
    live: Arc<Live>,
    /// The last getattr of the root where the kernel checks permissions:
    /// opening the control file then begins with its check of the root,
    /// whose getattr is taken back out of the counts (see `lookup`).
    last_root_getattr: Mutex<Option<RootGetattr>>,
}

impl PassFs {
    /// `lower` is LOWER, opened (`O_PATH`) before mounting.
    pub fn new(lower: OwnedFd, cfg: FsConfig, live: Arc<Live>) -> Res<PassFs> {
        let ttl = match cfg.mode {
            Mode::ObserveAll => Duration::ZERO,
            Mode::Fast => cfg.cache_ttl,
        };
        let no_open = cfg.mode == Mode::Fast && !cfg.passthrough;
        let control = Control::new(live.clone(), no_open, cfg.stat_allow_other);
        Ok(PassFs {
            inodes: Inodes::new(lower)?,
            rec: live.rec.clone(),
            cfg,
            ttl,
            passthrough: AtomicBool::new(false),
            direct_io: false,
            no_open,
            control,
            live,
            last_root_getattr: Mutex::new(None),
        })
    }

    /// The kernel's attributes for an inode: its node id is its number,
    /// except for the root, which shows LOWER's own number.
    fn attr(&self, ino: &Inode, st: &libc::stat) -> FileAttr {
        let shown = if ino.id == ROOT { st.st_ino } else { ino.id };
        crate::attr::from_stat(st, shown)
    }

    fn root_getattr(&self) -> std::sync::MutexGuard<'_, Option<RootGetattr>> {
        self.last_root_getattr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn inode(&self, id: INodeNo) -> Res<Arc<Inode>> {
        self.inodes.get(id.0)
    }

    fn set_setting(&self, key: &str, value: String) {
        self.live.edit_meta(|m| {
            m.settings.insert(key.into(), value);
        });
    }

    /// What this mode keeps from the daemon (the profile and every report
    /// say so).
    fn set_notes(&self, passthrough: bool) {
        let mut notes = Vec::new();
        match self.cfg.mode {
            Mode::ObserveAll => {
                notes.push(if self.direct_io {
                    "observe-all: files are opened for direct I/O, so every read and write call is a request; pages \
                     of shared mappings (mmap) are read and written back by the kernel a page range at a time"
                } else {
                    "observe-all: reads the kernel serves from an open file's page cache (readahead, re-reads \
                     before close) are not seen; each open starts with an empty cache"
                }
                .to_string());
                notes.push(
                    "observe-all: closing a file opened read-only sends no flush (it has nothing to flush); its \
                     release is counted"
                        .to_string(),
                );
            }
            Mode::Fast => {
                notes.push(format!(
                    "fast: entries and attributes are cached for {:?}, pages across opens, and close() sends \
                     no flush: repeated lookups, getattrs, flushes and cached reads are not seen",
                    self.ttl
                ));
                if self.no_open {
                    notes.push(
                        "fast: files and directories are opened by the kernel alone (it sends no open, opendir, \
                         flush, release or releasedir after the first of each, which the daemon declines): opens \
                         and closes are not seen, nor reads of pages and directory entries the kernel holds from \
                         earlier opens"
                            .to_string(),
                    );
                }
                if passthrough {
                    notes.push(
                        "fast: read and write go from the kernel straight to the backing files (FUSE passthrough): \
                         data ops are not seen"
                            .to_string(),
                    );
                }
            }
        }
        self.live.edit_meta(|m| m.notes = notes);
    }

    fn reply_entry(&self, r: Res<FileAttr>, reply: ReplyEntry) {
        match r {
            Ok(a) => reply.entry(&self.ttl, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn reply_empty(r: Res<()>, reply: ReplyEmpty) {
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}

/// Kernel capabilities asked for in every mode. Not FUSE_ATOMIC_O_TRUNC:
/// see `init`.
const ALWAYS: InitFlags = InitFlags::FUSE_PARALLEL_DIROPS;

impl Filesystem for PassFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let want = |c: &mut KernelConfig, f: InitFlags| c.add_capabilities(f).is_ok();
        want(config, ALWAYS);
        // O_TRUNC carried by the open request rather than a setattr after
        // it; without open requests the truncation would be lost.
        if !self.no_open {
            want(config, InitFlags::FUSE_ATOMIC_O_TRUNC);
        }
        // Direct I/O only where shared mmap keeps working with it (6.6+);
        // else the page cache, dropped at each open, as before.
        if self.cfg.mode == Mode::ObserveAll {
            self.direct_io = want(config, InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP);
        }
        if self.cfg.mode == Mode::Fast {
            want(config, InitFlags::FUSE_DO_READDIRPLUS);
            want(config, InitFlags::FUSE_READDIRPLUS_AUTO);
            want(config, InitFlags::FUSE_CACHE_SYMLINKS);
            // Backing files need CAP_SYS_ADMIN; the first refusal turns
            // passthrough off (see `files::open_passthrough`).
            if self.cfg.passthrough
                && crate::creds::can_switch()
                && want(config, InitFlags::FUSE_PASSTHROUGH)
                && config.set_max_stack_depth(1).is_ok()
            {
                self.passthrough.store(true, Relaxed);
            }
        }
        let pt = self.passthrough.load(Relaxed);
        self.set_setting(
            "data ops",
            match (self.cfg.mode, pt) {
                (Mode::Fast, true) => "kernel passthrough".into(),
                _ => "through the daemon".into(),
            },
        );
        self.set_notes(pt);
        Ok(())
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let _poll = self.live.poll.after_reply();
        if control::is_name(parent.0, name) {
            let last = self.root_getattr().take();
            if let Some(g) = last.filter(|g| g.pid == req.pid()) {
                self.rec.exclude(op!("getattr"), g.ns, g.epoch);
            }
            let a = self.control.looked_up(req.pid());
            return reply.entry(&Duration::ZERO, &a, Generation(0));
        }
        let r = self
            .rec
            .timed(op!("lookup"), || self.lookup_entry(parent, name));
        self.reply_entry(r, reply)
    }

    /// fuser hands each inode of a BATCH_FORGET here one by one (its
    /// batch type is private), so batches are counted as single forgets.
    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        let _poll = self.live.poll.after_reply();
        self.rec
            .timed_quiet(op!("forget"), || self.inodes.forget(ino.0, nlookup));
    }

    fn getattr(&self, req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let _poll = self.live.poll.after_reply();
        if ino.0 == control::ID {
            return reply.attr(&Duration::ZERO, &self.control.attr_for(req.pid()));
        }
        let r = if ino.0 == ROOT && self.cfg.kernel_checks {
            let epoch = self.rec.quiet_epoch();
            let (r, ns) = self.rec.timed_ns(op!("getattr"), || self.getattr_of(ino));
            *self.root_getattr() = match (r.is_ok(), epoch) {
                (true, Some(epoch)) => Some(RootGetattr {
                    pid: req.pid(),
                    ns,
                    epoch,
                }),
                _ => None,
            };
            r
        } else {
            self.rec.timed(op!("getattr"), || self.getattr_of(ino))
        };
        match r {
            Ok(a) => reply.attr(&self.ttl, &a),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let _poll = self.live.poll.after_reply();
        if ino.0 == control::ID {
            // `echo reset > .fsprof` truncates first.
            return reply.attr(&Duration::ZERO, &self.control.truncated());
        }
        let change = entries::Change {
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
            // Without open requests the kernel's handle is 0: none.
            fh: fh.map(|f| f.0).filter(|&f| f != 0),
        };
        match self
            .rec
            .timed(op!("setattr"), || self.set_attr(ino, &change))
        {
            Ok(a) => reply.attr(&self.ttl, &a),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let _poll = self.live.poll.after_reply();
        match self.rec.timed(op!("readlink"), || self.read_link(ino)) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let _poll = self.live.poll.after_reply();
        let r = self.rec.timed(op!("mknod"), || {
            self.make(req, parent, name, entries::Make::Node { mode, rdev })
        });
        self.reply_entry(r, reply)
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let _poll = self.live.poll.after_reply();
        let r = self.rec.timed(op!("mkdir"), || {
            self.make(req, parent, name, entries::Make::Dir { mode })
        });
        self.reply_entry(r, reply)
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let _poll = self.live.poll.after_reply();
        let r = self.rec.timed(op!("symlink"), || {
            self.make(req, parent, link_name, entries::Make::Symlink { target })
        });
        self.reply_entry(r, reply)
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _poll = self.live.poll.after_reply();
        let r = self
            .rec
            .timed(op!("unlink"), || self.remove(parent, name, 0));
        Self::reply_empty(r, reply)
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _poll = self.live.poll.after_reply();
        let r = self.rec.timed(op!("rmdir"), || {
            self.remove(parent, name, libc::AT_REMOVEDIR)
        });
        Self::reply_empty(r, reply)
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let _poll = self.live.poll.after_reply();
        // The kernel sends RENAME2 only when there are flags.
        let op = if flags.is_empty() {
            op!("rename")
        } else {
            op!("rename2")
        };
        let r = self.rec.timed(op, || {
            self.rename_entry(parent, name, newparent, newname, flags.bits())
        });
        Self::reply_empty(r, reply)
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let _poll = self.live.poll.after_reply();
        let r = self
            .rec
            .timed(op!("link"), || self.link_entry(ino, newparent, newname));
        self.reply_entry(r, reply)
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let _poll = self.live.poll.after_reply();
        if ino.0 == control::ID {
            let fh = self.control.open();
            return reply.opened(FileHandle(fh), fuser::FopenFlags::FOPEN_DIRECT_IO);
        }
        if self.no_open {
            return reply.error(Errno::ENOSYS);
        }
        self.open_file(ino, flags.0, reply)
    }

    fn read(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let _poll = self.live.poll.after_reply();
        if Control::is_fh(fh.0) {
            return match self.control.read(fh.0, offset, size) {
                Ok(d) => reply.data(&d),
                Err(e) => reply.error(e),
            };
        }
        if ino.0 == control::ID {
            return match self.control.read_unopened(req.pid(), offset, size) {
                Ok(d) => reply.data(&d),
                Err(e) => reply.error(e),
            };
        }
        self.read_file(ino, fh.0, offset, size, reply)
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let _poll = self.live.poll.after_reply();
        let r = if control::is_control(ino.0, fh.0) {
            self.control.write(data)
        } else {
            let kill = write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID);
            self.rec.timed(op!("write"), || {
                files::write(self.data_fd(ino, fh.0, true)?.raw(), data, offset, kill)
            })
        };
        match r {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        let _poll = self.live.poll.after_reply();
        if control::is_control(ino.0, fh.0) {
            return reply.ok();
        }
        // The kernel sends no flush again. Nothing is lost: the daemon
        // takes no locks for the kernel (no FUSE_POSIX_LOCKS), writes
        // reached LOWER when made (no writeback cache), and a file without
        // a handle has no descriptor of its own to close.
        if self.no_open {
            return reply.error(Errno::ENOSYS);
        }
        Self::reply_empty(self.rec.timed(op!("flush"), || files::flush(fh.0)), reply)
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let _poll = self.live.poll.after_reply();
        if Control::is_fh(fh.0) {
            self.control.release(fh.0);
            return reply.ok();
        }
        // A file created without a handle (kernels that still send its
        // release): nothing to close.
        if fh.0 == 0 {
            return reply.ok();
        }
        let r = self
            .rec
            .timed(op!("release"), || self.release_file(ino, fh.0));
        Self::reply_empty(r, reply)
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        let _poll = self.live.poll.after_reply();
        if control::is_control(ino.0, fh.0) {
            return reply.ok();
        }
        let r = self.rec.timed(op!("fsync"), || {
            files::sync(self.data_fd(ino, fh.0, false)?.raw(), datasync)
        });
        Self::reply_empty(r, reply)
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let _poll = self.live.poll.after_reply();
        if self.no_open {
            return reply.error(Errno::ENOSYS);
        }
        match self.rec.timed(op!("opendir"), || self.open_dir(ino)) {
            Ok(fh) => reply.opened(FileHandle(fh), self.dir_open_flags()),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let _poll = self.live.poll.after_reply();
        let r = self.rec.timed(op!("readdir"), || {
            self.read_dir(ino, fh.0, offset, &mut reply)
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let _poll = self.live.poll.after_reply();
        let r = self.rec.timed(op!("readdirplus"), || {
            self.read_dir_plus(ino, fh.0, offset, &mut reply)
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        let _poll = self.live.poll.after_reply();
        if fh.0 == 0 {
            return reply.ok();
        }
        let r = self
            .rec
            .timed(op!("releasedir"), || crate::sys::close(files::fd_of(fh.0)));
        Self::reply_empty(r, reply)
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        let _poll = self.live.poll.after_reply();
        let r = self.rec.timed(op!("fsyncdir"), || {
            files::sync(self.dir_fd(ino, fh.0)?.raw(), datasync)
        });
        Self::reply_empty(r, reply)
    }

    fn statfs(&self, _req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        let _poll = self.live.poll.after_reply();
        match self.rec.timed(op!("statfs"), || self.stat_fs(ino)) {
            Ok(s) => reply.statfs(
                s.f_blocks,
                s.f_bfree,
                s.f_bavail,
                s.f_files,
                s.f_ffree,
                s.f_bsize as u32,
                s.f_namemax as u32,
                s.f_frsize as u32,
            ),
            Err(e) => reply.error(e),
        }
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let _poll = self.live.poll.after_reply();
        let r = self
            .rec
            .timed(op!("setxattr"), || self.set_xattr(ino, name, value, flags));
        Self::reply_empty(r, reply)
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let _poll = self.live.poll.after_reply();
        // The control file has none (`ls -l` asks for ACLs).
        if ino.0 == control::ID {
            return reply.error(Errno::ENODATA);
        }
        let r = self
            .rec
            .timed(op!("getxattr"), || self.get_xattr(ino, Some(name), size));
        entries::reply_xattr(r, size, reply)
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let _poll = self.live.poll.after_reply();
        if ino.0 == control::ID {
            return entries::reply_xattr(Ok(Vec::new()), size, reply);
        }
        let r = self
            .rec
            .timed(op!("listxattr"), || self.get_xattr(ino, None, size));
        entries::reply_xattr(r, size, reply)
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _poll = self.live.poll.after_reply();
        let r = self
            .rec
            .timed(op!("removexattr"), || self.remove_xattr(ino, name));
        Self::reply_empty(r, reply)
    }

    fn access(&self, _req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        let _poll = self.live.poll.after_reply();
        if ino.0 == control::ID {
            return reply.ok();
        }
        let r = self
            .rec
            .timed(op!("access"), || self.check_access(ino, mask.bits()));
        Self::reply_empty(r, reply)
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let _poll = self.live.poll.after_reply();
        self.create_file(req, parent, name, mode, flags, reply)
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let _poll = self.live.poll.after_reply();
        let r = self.rec.timed(op!("fallocate"), || {
            files::allocate(self.data_fd(ino, fh.0, true)?.raw(), offset, length, mode)
        });
        Self::reply_empty(r, reply)
    }

    fn lseek(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        let _poll = self.live.poll.after_reply();
        match self.rec.timed(op!("lseek"), || {
            files::seek(self.data_fd(ino, fh.0, false)?.raw(), offset, whence)
        }) {
            Ok(o) => reply.offset(o),
            Err(e) => reply.error(e),
        }
    }

    fn copy_file_range(
        &self,
        _req: &Request,
        ino_in: INodeNo,
        fh_in: FileHandle,
        offset_in: u64,
        ino_out: INodeNo,
        fh_out: FileHandle,
        offset_out: u64,
        len: u64,
        flags: CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        let _poll = self.live.poll.after_reply();
        let r = self.rec.timed(op!("copy_file_range"), || {
            let fd_in = self.data_fd(ino_in, fh_in.0, false)?;
            let fd_out = self.data_fd(ino_out, fh_out.0, true)?;
            files::copy_range(
                fd_in.raw(),
                offset_in,
                fd_out.raw(),
                offset_out,
                len,
                flags.bits(),
            )
        });
        match r {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(e),
        }
    }
}

/// EPERM for namespace changes that would touch the control file's name.
fn not_control(parent: INodeNo, name: &OsStr) -> Res<()> {
    if control::is_name(parent.0, name) {
        Err(Errno::EPERM)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    /// Every request handler (each `&self` method of the `Filesystem`
    /// impl) takes the busy poll's guard first: one left out would send
    /// its worker to sleep after that op's reply.
    #[test]
    fn every_handler_polls_after_its_reply() {
        const GUARD: &str = "let _poll = self.live.poll.after_reply();";
        let src = include_str!("mod.rs");
        let start = src.find("impl Filesystem for PassFs {").unwrap();
        let end = start + src[start..].find("\n}\n").unwrap();
        let mut handlers = 0;
        for item in src[start..end].split("\n    fn ").skip(1) {
            let name = &item[..item.find('(').unwrap()];
            let (sig, body) = item.split_once(" {\n").unwrap();
            if !sig.contains("&self") {
                assert!(["init", "destroy"].contains(&name), "{name}");
                continue;
            }
            handlers += 1;
            assert_eq!(body.lines().next().map(str::trim), Some(GUARD), "{name}");
        }
        assert!(handlers >= 33, "{handlers} handlers found");
    }
}
