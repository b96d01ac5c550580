//! `MountSource`: the mount as an [`fsprof_capture::Source`], so that
//! `--interval`, the stop signals, the metadata and the saving of the
//! profile are those of every other capture. The daemon model fits the
//! loop as a capture without a command: `start` mounts, the capture ends
//! when the mount goes away (`fsprof umount`, `fusermount3 -u`), at a
//! stop signal (which unmounts), and `finish` hands over the counts.

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fsprof_capture::{Caps, Ended, Finish, Source, SourceError};
use fsprof_core::profile::{Layer, Meta};
use fsprof_core::Resolution;
use fuser::{BackgroundSession, Config, MountOption, Session, SessionACL};

use crate::fs::{FsConfig, Mode, PassFs};
use crate::live::Live;
use crate::mountinfo;
use crate::poll::BusyPoll;
use crate::stats::{Recorder, Ticks};

/// The mount's read-ahead in `--fast` (see `MountSource::raise_readahead`).
pub const READ_AHEAD_KB: u32 = 1024;

#[derive(Clone, Debug)]
pub struct MountOptions {
    pub lower: PathBuf,
    pub mountpoint: PathBuf,
    pub mode: Mode,
    /// Fast mode: kernel passthrough for reads and writes (files opened in
    /// the daemon) instead of no opens at all.
    pub passthrough: bool,
    /// Worker threads serving requests.
    pub threads: usize,
    pub allow_other: bool,
    /// With `allow_other`: other users may read the statistics too
    /// (`.fsprof`, mode 0644 instead of 0600).
    pub stat_allow_other: bool,
    pub resolution: Resolution,
    /// Entry and attribute TTL in fast mode.
    pub cache_ttl: Duration,
    /// Where the profile will be written (recorded for `fsprof umount`).
    pub output: Option<PathBuf>,
    /// How long a worker polls for the next request after replying
    /// (zero: never; see `poll`).
    pub busy_poll: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum MountError {
    #[error("LOWER {0} does not exist")]
    NoLower(PathBuf),
    #[error("LOWER {0} is not a directory")]
    LowerNotDir(PathBuf),
    #[error("cannot open LOWER {0}: {1}")]
    Lower(PathBuf, std::io::Error),
    #[error("mount point {0} does not exist")]
    NoMountpoint(PathBuf),
    #[error("mount point {0} is not a directory")]
    MountpointNotDir(PathBuf),
    #[error("{0} is already an fsprof mount (daemon pid {1}): `fsprof umount {0}` first")]
    AlreadyOurs(PathBuf, String),
    #[error("{0} is a FUSE mount whose daemon is gone: recover with `fsprof umount {0}` (or `fusermount3 -uz {0}`, `umount -l {0}`)")]
    DeadMount(PathBuf),
    #[error("no /dev/fuse: load the FUSE module (`modprobe fuse`)")]
    NoDevFuse,
    #[error("not permitted to open /dev/fuse: run as root, or as a user who may (group fuse)")]
    DevFuseDenied,
    #[error("not permitted to mount on {0}: run as root, or install fusermount3 setuid root for unprivileged mounts (Debian's fuse3 package does)")]
    NotPermitted(PathBuf),
    #[error("not permitted to mount on {0} ({1}): run as root, or use a FUSE helper that is setuid root (Debian's fuse3 installs fusermount3 so)")]
    HelperNotPermitted(PathBuf, String),
    #[error("mounting on {0}: {1}")]
    Mount(PathBuf, std::io::Error),
}

/// Checks LOWER and MOUNTPOINT before anything else happens (a daemon
/// could no longer say so on the terminal).
pub fn check_paths(lower: &Path, mountpoint: &Path) -> Result<(), MountError> {
    match std::fs::metadata(lower) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(MountError::NoLower(lower.into()))
        }
        Err(e) => return Err(MountError::Lower(lower.into(), e)),
        Ok(m) if !m.is_dir() => return Err(MountError::LowerNotDir(lower.into())),
        Ok(_) => {}
    }
    match std::fs::metadata(mountpoint) {
        Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => {
            return Err(MountError::DeadMount(mountpoint.into()))
        }
        Err(_) => return Err(MountError::NoMountpoint(mountpoint.into())),
        Ok(m) if !m.is_dir() => return Err(MountError::MountpointNotDir(mountpoint.into())),
        Ok(_) => {}
    }
    if let Ok(p) = crate::remote::read_profile(mountpoint) {
        let pid = p
            .meta
            .settings
            .get("daemon pid")
            .cloned()
            .unwrap_or_default();
        return Err(MountError::AlreadyOurs(mountpoint.into(), pid));
    }
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
    {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(MountError::NoDevFuse),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            Err(MountError::DevFuseDenied)
        }
        _ => Ok(()),
    }
}

pub struct MountSource {
    opts: MountOptions,
    live: Arc<Live>,
    fs: Option<PassFs>,
    session: Option<BackgroundSession>,
    /// The FUSE connection's number (the mount's device minor).
    conn: Option<u32>,
    notes: Vec<String>,
}

impl MountSource {
    /// Opens LOWER (before the mount, which may hide it) and measures the
    /// timing's own cost.
    pub fn new(opts: MountOptions) -> Result<MountSource, MountError> {
        check_paths(&opts.lower, &opts.mountpoint)?;
        let lower = open_dir(&opts.lower).map_err(|e| MountError::Lower(opts.lower.clone(), e))?;
        let fd_limit = crate::sys::raise_fd_limit();
        let rec = Recorder::new(opts.resolution, Ticks::choose());
        let overhead = rec.measure_overhead();
        let mut meta = describe(&opts);
        meta.settings
            .insert("descriptor limit".into(), fd_limit.to_string());
        let poll = BusyPoll::new(opts.busy_poll);
        let live = Arc::new(Live::new(rec, poll, meta, overhead));
        let as_caller = opts.allow_other && crate::creds::can_switch();
        let cfg = FsConfig {
            mode: opts.mode,
            cache_ttl: opts.cache_ttl,
            as_caller,
            kernel_checks: opts.allow_other,
            stat_allow_other: opts.allow_other && opts.stat_allow_other,
            passthrough: opts.passthrough,
        };
        let fs = PassFs::new(lower, cfg, live.clone()).map_err(|e| {
            MountError::Lower(
                opts.lower.clone(),
                std::io::Error::from_raw_os_error(e.code()),
            )
        })?;
        Ok(MountSource {
            opts,
            live,
            fs: Some(fs),
            session: None,
            conn: None,
            notes: Vec::new(),
        })
    }

    /// The live profile (control file, SIGUSR1, metrics endpoint).
    pub fn live(&self) -> Arc<Live> {
        self.live.clone()
    }

    fn mount(&mut self) -> Result<BackgroundSession, MountError> {
        let mp = &self.opts.mountpoint;
        let fs = self.fs.take().expect("mounted once");
        let mut config = Config::default();
        config.mount_options = vec![
            MountOption::FSName("fsprof".into()),
            MountOption::Subtype("fsprof".into()),
        ];
        // Shared with other users, the kernel checks every request with
        // the caller's credentials (see crate::creds). Unshared, only
        // processes with the daemon's uid and gid reach the mount and
        // LOWER checks the daemon's own: the same verdicts without the
        // kernel's GETATTR of each inode it checks, which with attributes
        // never cached was most of the requests (a warm grep -r: 30k of
        // 76k; 10k create+stat+unlink: 100k of 210k) and none of them
        // asked for by the program.
        if self.opts.allow_other {
            config.mount_options.push(MountOption::DefaultPermissions);
            config.acl = SessionACL::All;
        }
        config.n_threads = Some(self.opts.threads.max(1));
        config.clone_fd = self.opts.threads > 1;
        let session = Session::new(fs, mp, &config).map_err(|e| mount_error(mp, e))?;
        self.live.poll.set_fd(session.as_fd().as_raw_fd());
        session
            .spawn()
            .map_err(|e| MountError::Mount(mp.clone(), e))
    }

    /// `--fast` without passthrough reads files the kernel does not hold
    /// through the daemon, in read-ahead-sized requests: the mount's own
    /// read-ahead (128 KiB by default) is raised to the most one request
    /// carries (256 pages, FUSE_MAX_PAGES), 8 times fewer round trips per
    /// sequential read (a 1 GiB `dd` through a fresh mount: 8,192 → 1,024
    /// requests, 614 MB/s → 1.4 GB/s on this VM).
    fn raise_readahead(&self, (major, minor): (u32, u32)) {
        let path = format!("/sys/class/bdi/{major}:{minor}/read_ahead_kb");
        let said = match std::fs::write(&path, READ_AHEAD_KB.to_string()) {
            Ok(()) => format!("{READ_AHEAD_KB} KiB"),
            Err(e) => format!("the kernel's default (raising it in {path}: {e})"),
        };
        self.live.edit_meta(|m| {
            m.settings.insert("read-ahead".into(), said);
        });
    }

    fn ended_now(&self) -> bool {
        self.session.as_ref().is_none_or(|s| s.guard.is_finished())
    }

    /// Unmounts (lazily when busy, aborting the connection if it still
    /// will not end) and waits for the workers.
    fn unmount(&mut self) {
        let mp = self.opts.mountpoint.clone();
        if !self.ended_now() {
            match mountinfo::umount(&mp, false) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    let _ = mountinfo::umount(&mp, true);
                    self.notes.push(format!(
                        "{} was busy: detached lazily; files still open on it fail from now on",
                        mp.display()
                    ));
                }
                Err(e) => self.notes.push(format!("unmounting {}: {e}", mp.display())),
            }
        }
        if !self.wait_workers(Duration::from_secs(2)) {
            if let Some(c) = self.conn {
                let _ = std::fs::write(format!("/sys/fs/fuse/connections/{c}/abort"), "1");
            }
            self.wait_workers(Duration::from_secs(2));
        }
        if let Some(s) = self.session.take() {
            if s.guard.is_finished() {
                let _ = s.join();
            } else {
                // Still serving a detached mount: the threads end with the
                // process, which closes /dev/fuse.
                std::mem::forget(s);
            }
        }
    }

    fn wait_workers(&self, limit: Duration) -> bool {
        let t = Instant::now();
        while !self.ended_now() {
            if t.elapsed() > limit {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    }
}

fn open_dir(p: &Path) -> std::io::Result<OwnedFd> {
    let c = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(p.as_os_str()))
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: a NUL-terminated path.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The profile's metadata as far as it is known before the mount.
/// A failed mount as the user should hear it. fuser reports a failed
/// fusermount3 as that helper's own words (an error without an errno).
fn mount_error(mp: &Path, e: std::io::Error) -> MountError {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => MountError::NotPermitted(mp.into()),
        Some(_) => MountError::Mount(mp.into(), e),
        None => {
            let text = e.to_string();
            let said = text.lines().next().unwrap_or("").trim().to_string();
            if said.contains("not permitted") || said.contains("Permission denied") {
                MountError::HelperNotPermitted(mp.into(), said)
            } else {
                MountError::Mount(mp.into(), std::io::Error::other(said))
            }
        }
    }
}

fn describe(o: &MountOptions) -> Meta {
    let mut m = fsprof_capture::meta::describe("mount", &[], o.resolution);
    m.command = std::env::args().collect();
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let s = &mut m.settings;
    s.insert("lower".into(), abs(&o.lower).display().to_string());
    s.insert(
        "mountpoint".into(),
        abs(&o.mountpoint).display().to_string(),
    );
    s.insert("mode".into(), o.mode.name().into());
    s.insert("threads".into(), o.threads.to_string());
    s.insert(
        "permission checks".into(),
        if o.allow_other {
            "the kernel's, with each caller's credentials (default_permissions)"
        } else {
            "LOWER's, with the daemon's credentials (only its uid and gid reach the mount)"
        }
        .into(),
    );
    s.insert(
        "statistics readable by".into(),
        if o.allow_other && o.stat_allow_other {
            "every user (--stat-allow-other)"
        } else {
            "the mount's owner and root"
        }
        .into(),
    );
    s.insert("daemon pid".into(), std::process::id().to_string());
    if let Some(out) = &o.output {
        s.insert("output".into(), out.display().to_string());
    }
    m
}

impl Source for MountSource {
    fn caps(&self) -> Caps {
        Caps::default()
    }

    fn start(&mut self, _command: Option<i32>) -> Result<String, SourceError> {
        let s = self.mount()?;
        self.session = Some(s);
        let dev = mountinfo::device_of(&self.opts.mountpoint);
        self.conn = dev.map(|(_, minor)| minor);
        if self.opts.mode == Mode::Fast && !self.opts.passthrough {
            if let Some(dev) = dev {
                self.raise_readahead(dev);
            }
        }
        Ok(format!(
            "{} at {} ({})",
            self.opts.lower.display(),
            self.opts.mountpoint.display(),
            self.opts.mode.name()
        ))
    }

    fn snapshot(&mut self) -> Result<Vec<Layer>, SourceError> {
        Ok(vec![self.live.rec.layer()])
    }

    fn ended(&mut self) -> bool {
        self.ended_now()
    }

    fn finish(&mut self, _how: &Ended) -> Result<Finish, SourceError> {
        self.unmount();
        let layer = self.live.rec.layer();
        let mut overhead = self.live.overhead().clone();
        overhead.estimated_total_ns = (overhead.per_call_ns * layer.total_calls() as f64) as u64;
        Ok(Finish {
            layers: vec![layer],
            processes: Vec::new(),
            clock: self.live.rec.ticks().clock(),
            overhead: Some(overhead),
            notes: std::mem::take(&mut self.notes),
            warnings: Vec::new(),
        })
    }

    fn amend_meta(&mut self, meta: &mut Meta) {
        let live = self.live.meta();
        meta.settings = live.settings;
        meta.notes = live.notes;
        meta.command = live.command;
    }
}
