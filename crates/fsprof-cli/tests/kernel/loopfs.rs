//! Loop-mounted file systems for tests that hold fsprof's block layer
//! against the kernel's own accounting (`/sys/block/loopN/stat`), set up so
//! that nothing but the workload touches the device while it is measured:
//! mounted `noatime`; ext4 made without lazy initialisation and mounted
//! without the background prefetch of block bitmaps (which reads the
//! device some time after the mount, later still on a loaded machine).
//! Where the count of flushes matters, use xfs: a `sync(2)` by any other
//! process sends an empty preflush to every ext4 device even when it has
//! nothing to write, while a clean xfs sends nothing.
#![allow(dead_code)]

use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn sh(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        o.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A loop device holding a fresh ext4, mounted; torn down on drop (also
/// when a test panics).
pub struct LoopFs {
    dir: tempfile::TempDir,
    pub dev: String,
    mounted: bool,
}

/// The counters of `/sys/block/X/stat` (Documentation/block/stat.rst):
/// completed requests per kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskStat {
    pub reads: u64,
    pub writes: u64,
    pub discards: u64,
    pub flushes: u64,
}

impl DiskStat {
    pub fn since(&self, before: &DiskStat) -> DiskStat {
        DiskStat {
            reads: self.reads - before.reads,
            writes: self.writes - before.writes,
            discards: self.discards - before.discards,
            flushes: self.flushes - before.flushes,
        }
    }
}

impl LoopFs {
    pub fn ext4(size_mib: u64) -> LoopFs {
        fsprof_testkit::need_program("mkfs.ext4", "e2fsprogs");
        Self::make(
            size_mib,
            &[
                "mkfs.ext4",
                "-q",
                "-F",
                "-E",
                "lazy_itable_init=0,lazy_journal_init=0",
            ],
            "noatime,no_prefetch_block_bitmaps",
        )
    }

    /// At least 300 MiB (mkfs.xfs's minimum); the image is sparse.
    pub fn xfs(size_mib: u64) -> LoopFs {
        fsprof_testkit::need_program("mkfs.xfs", "xfsprogs");
        Self::make(size_mib.max(300), &["mkfs.xfs", "-q", "-f"], "noatime")
    }

    fn make(size_mib: u64, mkfs: &[&str], options: &str) -> LoopFs {
        fsprof_testkit::need_root("a loop mount");
        let (dir, dev) = attach(size_mib, |img| {
            sh(Command::new(mkfs[0]).args(&mkfs[1..]).arg(img));
        });
        let mut me = LoopFs {
            dir,
            dev,
            mounted: false,
        };
        std::fs::create_dir(me.mnt()).unwrap();
        sh(Command::new("mount")
            .args(["-o", options])
            .arg(&me.dev)
            .arg(me.mnt()));
        me.mounted = true;
        me
    }

    pub fn mnt(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }

    /// `loopN`.
    pub fn name(&self) -> String {
        self.dev.trim_start_matches("/dev/").to_string()
    }

    /// Writes back everything dirty on this file system, so the device is
    /// idle until the workload starts.
    pub fn settle(&self) {
        sh(Command::new("sync").arg("-f").arg(self.mnt()));
    }

    /// Freezes the file system (FIFREEZE: everything written back, the
    /// xfs log covered, its background worker stopped), so that the device
    /// sees no request until it is thawed; thawed when the guard drops
    /// (also when a test panics). Lets a test read `/sys/block/X/stat` at
    /// moments of its choosing with no background write or flush in between.
    pub fn freeze(&self) -> Frozen<'_> {
        fsprof_testkit::need_program("fsfreeze", "util-linux");
        sh(Command::new("fsfreeze").arg("-f").arg(self.mnt()));
        Frozen(self)
    }

    /// 512-byte sectors the device has read so far (`/sys/block/X/stat`
    /// field 3).
    pub fn sectors_read(&self) -> u64 {
        let text = std::fs::read_to_string(Path::new("/sys/block").join(self.name()).join("stat"))
            .unwrap();
        text.split_whitespace().nth(2).unwrap().parse().unwrap()
    }

    pub fn stat(&self) -> DiskStat {
        let text = std::fs::read_to_string(Path::new("/sys/block").join(self.name()).join("stat"))
            .unwrap();
        let f: Vec<u64> = text
            .split_whitespace()
            .map(|w| w.parse().unwrap())
            .collect();
        assert!(f.len() >= 17, "/sys/block/{}/stat: {text}", self.name());
        DiskStat {
            reads: f[0],
            writes: f[4],
            discards: f[11],
            flushes: f[15],
        }
    }
}

/// A loop device over a sparse image of `size_mib` in a fresh directory,
/// after `prepare` has been given the image: the directory (which holds
/// the image) and `/dev/loopN`. The caller detaches it.
pub fn attach(size_mib: u64, prepare: impl FnOnce(&Path)) -> (tempfile::TempDir, String) {
    fsprof_testkit::need_program("losetup", "mount");
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(size_mib << 20)
        .unwrap();
    prepare(&img);
    let dev = sh(Command::new("losetup").args(["--find", "--show"]).arg(&img))
        .trim()
        .to_string();
    (dir, dev)
}

/// See [`LoopFs::freeze`].
pub struct Frozen<'a>(&'a LoopFs);

impl Drop for Frozen<'_> {
    fn drop(&mut self) {
        // Whoever holds the guard may have thawed it already.
        let _ = Command::new("fsfreeze")
            .arg("-u")
            .arg(self.0.mnt())
            .stderr(std::process::Stdio::null())
            .status();
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg(self.mnt()).status();
        }
        let _ = Command::new("losetup").arg("-d").arg(&self.dev).status();
    }
}

/// A block I/O cgroup that holds reads or writes on one device to `bps`
/// bytes a second (cgroup v2 `io.max`, else v1 `blkio.throttle.*`),
/// removed on drop. The throttled bios wait in the block layer and are
/// sent on later by a kernel worker, so a task that waits for them (a
/// direct write, a reader of the pages they fill) sleeps for as long as
/// the limit says, however fast the machine: below 640 KiB/s not even the
/// first 64 KiB bio fits in the throttle's first 100 ms slice.
pub struct Throttle {
    dir: PathBuf,
}

impl Throttle {
    pub fn reads(dev: &str, bps: u64) -> Throttle {
        Self::new(dev, "rbps", "read", bps)
    }

    pub fn writes(dev: &str, bps: u64) -> Throttle {
        Self::new(dev, "wbps", "write", bps)
    }

    fn new(dev: &str, v2_key: &str, v1_kind: &str, bps: u64) -> Throttle {
        let devno = std::fs::read_to_string(Path::new("/sys/block").join(dev).join("dev"))
            .unwrap()
            .trim()
            .to_string();
        let name = format!("fsprof_throttle_{}_{v2_key}", std::process::id());
        let v2 = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| {
                std::fs::read_to_string(p.join("cgroup.controllers"))
                    .is_ok_and(|c| c.split_whitespace().any(|w| w == "io"))
            });
        let (dir, file, line) = if let Some(root) = v2 {
            let _ = std::fs::write(root.join("cgroup.subtree_control"), "+io");
            (
                root.join(&name),
                "io.max".to_string(),
                format!("{devno} {v2_key}={bps}"),
            )
        } else {
            let root = PathBuf::from("/sys/fs/cgroup/blkio");
            let file = format!("blkio.throttle.{v1_kind}_bps_device");
            if !root.join(&file).exists() {
                fsprof_testkit::missing(
                    "a block I/O cgroup controller (cgroup v2 `io` or v1 `blkio` with throttling)",
                    "boot a kernel with CONFIG_BLK_DEV_THROTTLING and mount the io/blkio controller",
                );
            }
            (root.join(&name), file, format!("{devno} {bps}"))
        };
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let t = Throttle { dir };
        if !t.dir.join(&file).exists() {
            // cgroup v2 where `+io` could not be enabled above (a
            // delegated root that holds processes refuses it).
            fsprof_testkit::missing(
                &format!("{file} in {}", t.dir.display()),
                "enable the io controller for the cgroup's parent (`echo +io > cgroup.subtree_control`)",
            );
        }
        std::fs::write(t.dir.join(&file), line).unwrap_or_else(|e| panic!("{file}: {e}"));
        t
    }

    pub fn add(&self, pid: u32) {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string()).unwrap();
    }

    /// `cmd` joins the cgroup between fork and exec, so that it and all it
    /// starts are throttled from their first I/O on. The returned file must
    /// outlive the spawn.
    pub fn join_on_spawn(&self, cmd: &mut Command) -> std::fs::File {
        let procs = std::fs::OpenOptions::new()
            .write(true)
            .open(self.dir.join("cgroup.procs"))
            .unwrap();
        let fd = procs.as_raw_fd();
        // SAFETY: write(2) is async-signal-safe; `fd` stays open in the
        // child until exec (the caller holds `procs` across the spawn).
        unsafe {
            cmd.pre_exec(move || {
                // "0" moves the writing process (cgroup v1 and v2).
                if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
        };
        procs
    }
}

impl Drop for Throttle {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}
