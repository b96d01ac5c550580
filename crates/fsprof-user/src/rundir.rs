//! The run directory shared with the profiled processes: the control file
//! `fsprof run` writes, and one counter file per process the shim creates.
//! Kept on tmpfs when there is one (and room on it), so counters never
//! touch a disk.
//!
//! The directory is private (0700) and the profiled processes find it by an
//! identity, not just a name: `FSPROF_SHM` carries its device, inode and
//! owner, which the shim checks on the directory it opens (a process that
//! outlives the run must not follow the name into someone else's
//! directory). When the run ends the control file says so before the
//! directory goes, and the shim leaves the run alone from then on.

use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use fsprof_core::BucketLayout;
use fsprof_shim::abi::{self, ControlHeader, Lost};

use crate::arena::Arena;
use crate::clock::ClockParams;

pub struct RunDir {
    path: PathBuf,
    /// Shared with the arena.
    control: Option<Rc<File>>,
    /// None where the arena could not be mapped: processes make files.
    arena: Option<Arena>,
    env: OsString,
    /// The process ends right after this value's drop: the mapping and
    /// the control file are left to its exit ([`RunDir::leave_to_exit`]).
    left_to_exit: bool,
}

/// A process the run could not profile, as the shim recorded it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LostProcess {
    pub pid: i32,
    pub ppid: i32,
    /// What it runs, or (for an exec) the program it started.
    pub exe: String,
    pub why: LostWhy,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LostWhy {
    /// Its counters could not be set up (errno).
    Setup(i32),
    /// It runs as another user, who cannot open the run directory.
    Uid(u32),
    /// It exec'd `exe` as another user: started without the shim.
    Exec(u32),
}

impl RunDir {
    /// A new run directory with its control file, on /dev/shm when it is
    /// writable and has room, else in the temporary directory.
    pub fn create(clock: &ClockParams, layout: &BucketLayout) -> io::Result<Self> {
        let bytes = control_bytes(clock, layout);
        // Tried, not asked first (no stat, no access: the mkdir says).
        let bases = [PathBuf::from("/dev/shm"), std::env::temp_dir()];
        let mut last = None;
        for base in bases {
            match RunDir::create_in(&base, &bytes) {
                Ok(d) => return Ok(d),
                // No /dev/shm, not ours to write, a full tmpfs: try the
                // next place rather than run blind.
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no place for the run directory")))
    }

    fn create_in(base: &Path, control: &[u8]) -> io::Result<Self> {
        let path = unique_dir(base)?;
        let mut d = RunDir {
            path,
            control: None,
            arena: None,
            env: OsString::new(),
            left_to_exit: false,
        };
        let meta = fs::symlink_metadata(&d.path)?;
        if meta.mode() & 0o7777 != 0o700 {
            // The shim insists on exactly 0700, whatever the umask did
            // (fsprof's usual 022 or 077 leaves it so: no chmod then).
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&d.path, fs::Permissions::from_mode(0o700))?;
        }
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(d.path.join(abi::CTL_NAME))?;
        (&file).write_all(control)?;
        let file = Rc::new(file);
        d.arena = Arena::new(&file, arena_blocks()).ok();
        if let Some(a) = &mut d.arena {
            // The command's first processes find blocks on offer, their
            // pages made at the first refill; a process that takes one
            // before makes the pages it writes as it writes them
            // (shim/pool.c, make_below).
            a.offer_first(fsprof_sys::clock::mono_ns());
            // Tests: never made by fsprof, every process makes its own.
            if fsprof_sys::test_knob("FSPROF_TEST_UNREADY_BLOCKS") == Some(1) {
                a.hold_first();
            }
        }
        let ctl_ino = file.metadata()?.ino();
        d.control = Some(file);
        d.env = abi::env_value(meta.dev(), meta.ino(), meta.uid(), ctl_ino, &d.path);
        Ok(d)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// For a process that exits right after dropping this: the drop then
    /// removes the directory but leaves the mapping and the control file
    /// to the process's exit (an `munmap` of the arena and a last
    /// `close`, which frees the file's pages, were ~40 and ~30 µs of
    /// every `fsprof run`'s end), where a keeper (fsprof_sys::keeper)
    /// takes both off the exit's path too.
    pub fn leave_to_exit(&mut self) {
        self.left_to_exit = true;
    }

    /// The control file's descriptor.
    pub fn control_fd(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        self.control.as_ref().map(|f| f.as_raw_fd())
    }

    pub fn arena(&self) -> Option<&Arena> {
        self.arena.as_ref()
    }

    pub fn arena_mut(&mut self) -> Option<&mut Arena> {
        self.arena.as_mut()
    }

    /// Removes the directories of runs killed before they could clean up
    /// from where this one is. Called once the command runs: the scan is
    /// off the start-up's path there.
    pub fn remove_stale_beside(&self) {
        if let Some(base) = self.path.parent() {
            remove_stale(base);
        }
    }

    /// The value of `FSPROF_SHM` for the profiled command.
    pub fn env_value(&self) -> &OsString {
        &self.env
    }

    /// Marks the run as over: processes that start from now on (a daemon's
    /// children after the command exited) stay unprofiled.
    pub fn end(&self) {
        if let Some(a) = &self.arena {
            // Through the mapping: no system call (twice: here and when
            // the run directory goes).
            a.end();
        } else if let Some(f) = &self.control {
            let at = std::mem::offset_of!(ControlHeader, state) as u64;
            let _ = f.write_all_at(&abi::RUN_ENDED.to_ne_bytes(), at);
        }
    }

    /// Processes the shim recorded as not profiled, and how many there
    /// were in all (the table keeps the first [`abi::LOST_MAX`]).
    pub fn lost(&self) -> (Vec<LostProcess>, u64) {
        // Most runs lose no process: the count read where the shim keeps
        // it, rather than a copy of the 12 KB header (a system call and
        // three fresh heap pages at the run's end).
        if self.arena.as_ref().is_some_and(|a| a.lost_count() == 0) {
            return (Vec::new(), 0);
        }
        let Some(f) = &self.control else {
            return (Vec::new(), 0);
        };
        let mut hdr = vec![0u8; std::mem::size_of::<ControlHeader>()];
        if f.read_exact_at(&mut hdr, 0).is_err() {
            return (Vec::new(), 0);
        }
        let count_at = std::mem::offset_of!(ControlHeader, lost_count);
        let count = u64::from_ne_bytes(hdr[count_at..count_at + 8].try_into().unwrap());
        let table = std::mem::offset_of!(ControlHeader, lost);
        let size = std::mem::size_of::<Lost>();
        let lost = (0..(count as usize).min(abi::LOST_MAX))
            .filter_map(|k| parse_lost(&hdr[table + k * size..table + (k + 1) * size]))
            .collect();
        (lost, count)
    }

    /// Whether a process may have made a counter file of its own (the
    /// shim counts them before it makes one): if not, the directory holds
    /// none to read. A process of the run that zeroes the count hides its
    /// own files from the profile, as it could zero its own counters.
    pub fn may_hold_files(&self) -> bool {
        self.arena.as_ref().is_none_or(Arena::files_made)
    }

    /// Counter files of the processes seen so far, with their sequence
    /// numbers, in creation order.
    pub fn process_files(&self) -> io::Result<Vec<(u64, PathBuf)>> {
        let mut files: Vec<(u64, PathBuf)> = fs::read_dir(&self.path)?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name();
                let seq = name.to_str()?.strip_prefix('p')?.parse().ok()?;
                Some((seq, e.path()))
            })
            .collect();
        files.sort();
        Ok(files)
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        self.end();
        // The control file is all the directory holds unless a process
        // made a counter file of its own (no block was on offer) or a
        // trace wrote chunks: two system calls, where walking the
        // directory takes ten (~30 µs of every run's end). Anything else
        // left, the whole tree.
        let _ = fs::remove_file(self.path.join(abi::CTL_NAME));
        if fs::remove_dir(&self.path).is_err() {
            let _ = fs::remove_dir_all(&self.path);
        }
        if self.left_to_exit {
            std::mem::forget(self.arena.take());
            std::mem::forget(self.control.take());
        }
    }
}

fn parse_lost(b: &[u8]) -> Option<LostProcess> {
    let word = |at: usize| u32::from_ne_bytes(b[at..at + 4].try_into().unwrap());
    use std::mem::offset_of;
    let what = word(offset_of!(Lost, what));
    let uid = word(offset_of!(Lost, uid));
    let why = match what {
        abi::LOST_SETUP => LostWhy::Setup(word(offset_of!(Lost, err)) as i32),
        abi::LOST_UID => LostWhy::Uid(uid),
        abi::LOST_EXEC => LostWhy::Exec(uid),
        _ => return None,
    };
    let len = (word(offset_of!(Lost, exe_len)) as usize).min(abi::LOST_EXE);
    let exe_at = offset_of!(Lost, exe);
    Some(LostProcess {
        pid: word(offset_of!(Lost, pid)) as i32,
        ppid: word(offset_of!(Lost, ppid)) as i32,
        exe: String::from_utf8_lossy(&b[exe_at..exe_at + len]).into_owned(),
        why,
    })
}

fn unique_dir(base: &Path) -> io::Result<PathBuf> {
    let mut last = None;
    for attempt in 0..100u32 {
        let path = base.join(format!(
            "fsprof-run-{}-{}-{attempt}",
            std::process::id(),
            nanos()
        ));
        match fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap())
}

/// The control file's bytes: clock parameters, the bucket table, an empty
/// table of lost processes.
pub fn control_bytes(clock: &ClockParams, layout: &BucketLayout) -> Vec<u8> {
    let thresholds = layout.thresholds();
    let hdr = ControlHeader {
        magic: abi::CTL_MAGIC,
        abi_version: abi::ABI_VERSION,
        resolution: layout.resolution().get(),
        nbuckets: thresholds.len() as u32,
        clock: clock.kind,
        tsc_mult: clock.mult,
        tsc_shift: clock.shift,
        max_slots: abi::MAX_SLOTS,
        max_blocks: arena_blocks(),
        ..Default::default()
    };
    let mut out = Vec::with_capacity(std::mem::size_of::<ControlHeader>() + thresholds.len() * 8);
    // SAFETY: ControlHeader is repr(C) plain data; its padding (none the
    // reader looks at) is whatever Default left there.
    out.extend_from_slice(unsafe {
        std::slice::from_raw_parts(
            &hdr as *const ControlHeader as *const u8,
            std::mem::size_of::<ControlHeader>(),
        )
    });
    for t in thresholds {
        out.extend_from_slice(&t.to_ne_bytes());
    }
    out
}

/// The arena's room in blocks: [`abi::MAX_BLOCKS`], or what
/// `FSPROF_TEST_ARENA_BLOCKS` says (for tests: 0 makes every process use a
/// file of its own, a few make the offers run out).
fn arena_blocks() -> u32 {
    fsprof_sys::test_knob("FSPROF_TEST_ARENA_BLOCKS")
        .map_or(abi::MAX_BLOCKS, |n| n.min(abi::MAX_BLOCKS))
}

/// Removes run directories left by `fsprof run`s that were killed before
/// they could clean up (their pid is in the name and no longer alive).
fn remove_stale(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("fsprof-run-")) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        // SAFETY: signal 0 sends nothing; it only asks whether `pid` exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0
            || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        let ours = e.metadata().map(|m| {
            // SAFETY: geteuid has no preconditions and cannot fail.
            m.uid() == unsafe { libc::geteuid() }
        });
        if !alive && ours.unwrap_or(false) {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

fn nanos() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command starts with no block's pages reserved (processes make
    /// theirs, shim/pool.c): the control file holds its header's pages
    /// and nothing more, and the blocks are on offer.
    #[test]
    fn no_block_is_reserved_before_the_command_starts() {
        use std::os::unix::fs::MetadataExt;
        let base = tempfile::tempdir_in("/dev/shm").unwrap();
        let clock = ClockParams::monotonic();
        let layout = BucketLayout::new(fsprof_core::Resolution::DEFAULT);
        let bytes = control_bytes(&clock, &layout);
        let d = RunDir::create_in(base.path(), &bytes).unwrap();
        let meta = d.path().join(abi::CTL_NAME).metadata().unwrap();
        let header = bytes.len().next_multiple_of(4096) as u64;
        assert!(meta.len() > header, "blocks offered");
        assert!(
            meta.blocks() * 512 <= header,
            "{} bytes",
            meta.blocks() * 512
        );
        assert_eq!(d.arena().unwrap().ready(), 0);
    }

    #[test]
    fn only_our_dead_runs_directories_are_removed() {
        let base = tempfile::tempdir().unwrap();
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let dead = gone.id();
        gone.wait().unwrap();
        let mk = |name: String| {
            let d = base.path().join(name);
            fs::create_dir(&d).unwrap();
            fs::write(d.join("p0"), b"counters").unwrap();
            d
        };
        let stale = mk(format!("fsprof-run-{dead}-1-0"));
        let live = mk(format!("fsprof-run-{}-1-0", std::process::id()));
        let init = mk("fsprof-run-1-1-0".into());
        let odd = mk("fsprof-run-x-1-0".into());
        let other = mk(format!("not-fsprof-run-{dead}-1-0"));
        remove_stale(base.path());
        assert!(!stale.exists(), "the dead run's directory stays");
        for kept in [live, init, odd, other] {
            assert!(kept.join("p0").exists(), "{} was removed", kept.display());
        }
    }
}
