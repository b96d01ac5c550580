//! Real `fsprof mount`s for the tests: mounted as a daemon (the default),
//! unmounted with `fsprof umount`, and torn down on panic (lazy unmount,
//! daemon killed) so a failed test leaves no mount behind.

#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use fsprof_core::format::read_profile;
use fsprof_core::{OpStats, Profile};

pub use fsprof_testkit::fsprof;

/// Root, for a FUSE mount: these tests are `#[ignore = "needs root"]` and run by
/// `scripts/test-all`; run without root they fail saying so
/// (`fsprof_testkit::need`).
pub fn root_or_skip(what: &str) -> bool {
    fsprof_testkit::need_root(&format!("a FUSE mount, {what}"));
    true
}

pub struct Mount {
    pub lower: PathBuf,
    pub mp: PathBuf,
    pub out: PathBuf,
    pub pid: i32,
    done: bool,
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

/// `fsprof stat MP --format json`.
pub fn stat_json(mp: &Path) -> Profile {
    let o = fsprof()
        .args(["stat", "--format", "json"])
        .arg(mp)
        .output()
        .expect("run fsprof stat");
    assert!(
        o.status.success(),
        "fsprof stat: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    fsprof_core::format::parse_profile(&o.stdout, Path::new("stat")).expect("stat output parses")
}

pub fn op<'a>(p: &'a Profile, name: &str) -> Option<&'a OpStats> {
    p.layer("fusefs")?.op(name)
}

pub fn calls(p: &Profile, name: &str) -> u64 {
    op(p, name).map(|o| o.post).unwrap_or(0)
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
