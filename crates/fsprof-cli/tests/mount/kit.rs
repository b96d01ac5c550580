//! Real `fsprof mount`s for the tests: mounted as a daemon (the default),
//! unmounted with `fsprof umount`, and torn down on panic (lazy unmount,
//! daemon killed) so a failed test leaves no mount behind. A test that
//! starts a mount another way holds a [`Detach`] from the moment the
//! mount may exist.

#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use fsprof_core::format::read_profile;
use fsprof_core::{OpStats, Profile};

pub use fsprof_testkit::fsprof;

/// A test's scratch directory holding empty `lower/` and `mnt/`, and
/// where its profile goes (`p.json`). Asks for root first: these tests are
/// `#[ignore = "needs root"]` and run by `scripts/test-all`; run without
/// root they fail saying so (`fsprof_testkit::need`).
pub struct Dirs {
    tmp: tempfile::TempDir,
    pub lower: PathBuf,
    pub mp: PathBuf,
    pub out: PathBuf,
}

pub fn dirs() -> Dirs {
    fsprof_testkit::need_root("a FUSE mount");
    dirs_in(tempfile::tempdir().unwrap())
}

/// [`dirs`] on the disk the build is on, for tests whose daemon must
/// reach a block device: /tmp may be a tmpfs, where evicted data is not
/// read back from any device.
pub fn dirs_on_disk() -> Dirs {
    fsprof_testkit::need_root("a FUSE mount");
    dirs_in(fsprof_testkit::disk_tempdir())
}

fn dirs_in(tmp: tempfile::TempDir) -> Dirs {
    let (lower, mp) = (tmp.path().join("lower"), tmp.path().join("mnt"));
    std::fs::create_dir_all(&lower).unwrap();
    std::fs::create_dir_all(&mp).unwrap();
    let out = tmp.path().join("p.json");
    Dirs {
        tmp,
        lower,
        mp,
        out,
    }
}

impl Dirs {
    /// The scratch directory itself.
    pub fn path(&self) -> &Path {
        self.tmp.path()
    }

    /// The arguments of `fsprof mount lower mnt -o p.json`.
    pub fn mount_args(&self) -> [&OsStr; 5] {
        [
            os("mount"),
            self.lower.as_os_str(),
            self.mp.as_os_str(),
            os("-o"),
            self.out.as_os_str(),
        ]
    }

    /// `fsprof mount [extra] lower mnt -o p.json`.
    pub fn mount(&self, extra: &[&str]) -> Mount {
        Mount::start(&self.lower, &self.mp, &self.out, extra)
    }
}

pub struct Mount {
    pub lower: PathBuf,
    pub mp: PathBuf,
    pub out: PathBuf,
    pub pid: i32,
    done: bool,
    _detach: Detach,
}

/// Detaches (lazily) the fsprof mount at a mount point when dropped, if
/// one is still there: a test's failure between starting a mount and
/// holding its [`Mount`] (or with no `Mount` at all) leaves none behind.
/// Its daemon sees the unmount and exits.
pub struct Detach(pub PathBuf);

impl Drop for Detach {
    fn drop(&mut self) {
        if fsprof_mounted(&self.0) {
            let c = std::ffi::CString::new(self.0.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a NUL-terminated path.
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

/// Whether an fsprof mount is at `mp`, from the mount table (never a
/// request to the mount): type `fuse` and source `fsprof` when root
/// mounted it, `fuse.fsprof` through fusermount3.
pub fn fsprof_mounted(mp: &Path) -> bool {
    let mi = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mp = mp.display().to_string();
    mi.lines().any(|l| {
        let (left, right) = l.split_once(" - ").unwrap_or((l, ""));
        left.split(' ').nth(4) == Some(mp.as_str())
            && (right.starts_with("fuse.fsprof ") || right.starts_with("fuse fsprof "))
    })
}

impl Mount {
    /// `fsprof mount [extra] LOWER MP -o OUT`; returns once mounted.
    pub fn start(lower: &Path, mp: &Path, out: &Path, extra: &[&str]) -> Mount {
        let o = fsprof()
            .arg("mount")
            .args(extra)
            .arg(lower)
            .arg(mp)
            .arg("-o")
            .arg(out)
            .output()
            .expect("run fsprof mount");
        let detach = Detach(mp.into());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "fsprof mount failed: {err}");
        assert!(err.contains("profiling"), "{err}");
        let p = stat_json(mp);
        let pid = p.meta.settings["daemon pid"].parse().expect("daemon pid");
        Mount {
            lower: lower.into(),
            mp: mp.into(),
            out: out.into(),
            pid,
            done: false,
            _detach: detach,
        }
    }

    /// A mount started some other way, known by its live profile.
    pub fn adopt(lower: &Path, mp: &Path, out: &Path, live: &Profile) -> Mount {
        Mount {
            lower: lower.into(),
            mp: mp.into(),
            out: out.into(),
            pid: live.meta.settings["daemon pid"]
                .parse()
                .expect("daemon pid"),
            done: false,
            _detach: Detach(mp.into()),
        }
    }

    pub fn path(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.mp.join(rel)
    }

    /// `fsprof umount MP`; the written profile.
    pub fn umount(mut self) -> Profile {
        let o = fsprof()
            .arg("umount")
            .arg(&self.mp)
            .output()
            .expect("run fsprof umount");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "fsprof umount failed: {err}");
        assert!(err.contains(&self.out.display().to_string()), "{err}");
        self.done = true;
        read_profile(&self.out).unwrap_or_else(|e| panic!("{e}"))
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if !self.done {
            let c = std::ffi::CString::new(self.mp.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a NUL-terminated path; a pid we started.
            unsafe {
                libc::umount2(c.as_ptr(), libc::MNT_DETACH);
                libc::kill(self.pid, libc::SIGKILL);
            }
        }
    }
}

/// Waits up to 20 s for `f`; fails the test naming `what`.
#[track_caller]
pub fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let t = std::time::Instant::now();
    while !f() {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `fsprof umount MP`, which must succeed; what it said.
#[track_caller]
pub fn umount_ok(mp: &Path) -> String {
    let o = fsprof().arg("umount").arg(mp).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "fsprof umount: {err}");
    err
}

/// `fsprof stat MP --format json`.
pub fn stat_json(mp: &Path) -> Profile {
    let o = fsprof_testkit::succeeds(fsprof().args(["stat", "--format", "json"]).arg(mp));
    fsprof_core::format::parse_profile(&o.stdout, Path::new("stat")).expect("stat output parses")
}

pub fn op<'a>(p: &'a Profile, name: &str) -> Option<&'a OpStats> {
    p.layer("fusefs")?.op(name)
}

pub fn calls(p: &Profile, name: &str) -> u64 {
    op(p, name).map(|o| o.post).unwrap_or(0)
}

/// Each `(op, n)`: the fusefs layer returned exactly `n` calls of `op`.
#[track_caller]
pub fn assert_calls(p: &Profile, want: &[(&str, u64)]) {
    for &(name, n) in want {
        assert_eq!(calls(p, name), n, "{name}: {:?}", op(p, name));
    }
}

/// `fsprof check FILE` succeeds.
pub fn check_ok(file: &Path) {
    let o = fsprof().arg("check").arg(file).output().unwrap();
    assert!(
        o.status.success(),
        "fsprof check: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A shared read-write mapping of `len` bytes of the file behind `fd`,
/// from `off`, or the error mmap(2) gave.
///
/// # Safety
/// `fd` is an open descriptor; the caller unmaps the mapping and stays
/// within the file's size when it touches it.
pub unsafe fn map_shared(fd: i32, len: usize, off: i64) -> std::io::Result<*mut libc::c_void> {
    let (rw, shared) = (libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED);
    // SAFETY: a new mapping (no address asked for) of a descriptor the
    // caller holds.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), len, rw, shared, fd, off) };
    if p == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    Ok(p)
}

/// A deterministic pseudo-random byte pattern.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// FNV-1a: a checksum to print beside the byte comparison.
pub fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf29ce484222325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    })
}

pub fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}
