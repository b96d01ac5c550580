//! The FUSE round-trip floor through fuser: the same no-work daemon as
//! `bench/fuse_floor.c` (libfuse), written on the crate `fsprof mount`
//! uses, so that `bench/mount_bench.py --floor` can tell what fuser
//! itself costs per request against libfuse under the same load.
//!
//! It serves one directory holding one empty file, `f`, answers every
//! request from constants (entry and attribute timeouts 0), on one worker
//! thread, with the session settings `fsprof mount` uses by default.
//!
//! Run: `fuser_floor MOUNTPOINT` (foreground; unmount with `umount`).

use std::ffi::OsStr;
use std::time::{Duration, UNIX_EPOCH};

use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    LockOwner, MountOption, OpenFlags, ReplyAttr, ReplyData, ReplyEmpty, ReplyEntry, ReplyOpen,
    Request,
};

const FILE_INO: u64 = 2;

fn attr(ino: u64) -> FileAttr {
    let dir = ino == INodeNo::ROOT.0;
    FileAttr {
        ino: INodeNo(ino),
        size: 0,
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind: if dir {
            FileType::Directory
        } else {
            FileType::RegularFile
        },
        perm: if dir { 0o755 } else { 0o644 },
        nlink: if dir { 2 } else { 1 },
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

struct Floor;

impl Filesystem for Floor {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if parent != INodeNo::ROOT || name != "f" {
            return reply.error(Errno::ENOENT);
        }
        reply.entry(&Duration::ZERO, &attr(FILE_INO), Generation(0));
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        reply.attr(&Duration::ZERO, &attr(ino.0));
    }

    fn open(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.opened(FileHandle(0), FopenFlags::empty());
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _offset: u64,
        _size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        reply.data(&[]);
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }
}

fn main() {
    let Some(mp) = std::env::args_os().nth(1) else {
        eprintln!("usage: fuser_floor MOUNTPOINT");
        std::process::exit(2);
    };
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName("fuser_floor".into()),
        MountOption::DefaultPermissions,
    ];
    config.n_threads = Some(1);
    if let Err(e) = fuser::mount(Floor, &mp, &config) {
        eprintln!("fuser_floor: {e}");
        std::process::exit(1);
    }
}
