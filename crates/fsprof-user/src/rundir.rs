//! The run directory shared with the profiled processes: the control file
//! `fsprof run` writes, and one counter file per process the shim creates.
//! Kept on tmpfs when there is one, so counters never touch a disk.

use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use fsprof_core::BucketLayout;
use fsprof_shim::abi::{self, ControlHeader};

use crate::clock::ClockParams;

pub struct RunDir {
    path: PathBuf,
}

impl RunDir {
    pub fn create() -> io::Result<Self> {
        let shm = Path::new("/dev/shm");
        let base = if shm.is_dir() && writable(shm) {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        remove_stale(&base);
        let mut last = None;
        for attempt in 0..100u32 {
            let path = base.join(format!(
                "fsprof-run-{}-{}-{attempt}",
                std::process::id(),
                nanos()
            ));
            match fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(RunDir { path }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the control file: clock parameters and the bucket table.
    pub fn write_control(&self, clock: &ClockParams, layout: &BucketLayout) -> io::Result<Vec<u8>> {
        let bytes = control_bytes(clock, layout);
        fs::write(self.path.join(abi::CTL_NAME), &bytes)?;
        Ok(bytes)
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
        let _ = fs::remove_dir_all(&self.path);
    }
}

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
        next_seq: 0,
    };
    let mut out = Vec::with_capacity(std::mem::size_of::<ControlHeader>() + thresholds.len() * 8);
    // SAFETY: ControlHeader is repr(C) plain data without padding holes
    // that matter to the reader (all fields are written).
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
            use std::os::unix::fs::MetadataExt;
            // SAFETY: geteuid has no preconditions and cannot fail.
            m.uid() == unsafe { libc::geteuid() }
        });
        if !alive && ours.unwrap_or(false) {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

fn writable(p: &Path) -> bool {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path that outlives the call.
    unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) == 0 }
}

fn nanos() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0)
}
