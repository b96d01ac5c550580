//! Loads the installed shim into this process (without interposing anything:
//! dlopen'ed objects do not join the global symbol scope) to ask it for its
//! layout and to measure its own cost with the run's clock parameters.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::abi::{ControlHeader, Layout};
use crate::trace_abi::TraceLayout;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SelfTest {
    /// Time the bookkeeping adds around one call, ns.
    pub per_call_ns: f64,
    /// Two back-to-back clock reads: the smallest latency that can be seen.
    pub min_recordable_ns: f64,
    /// What a wrapper adds outside the window a sampled call times (saved
    /// registers, one more call level, the sampling itself), ns.
    pub outside_ns: f64,
}

pub struct LoadedShim {
    handle: *mut libc::c_void,
}

type AbiFn = unsafe extern "C" fn(*mut Layout);
type BucketFn = unsafe extern "C" fn(*const u8, usize, u64) -> u32;
type SelfTestFn = unsafe extern "C" fn(*const u8, usize, u32, *mut SelfTest) -> libc::c_int;

impl LoadedShim {
    pub fn load(path: &Path) -> io::Result<Self> {
        let c = CString::new(path.as_os_str().as_bytes())?;
        // SAFETY: `c` is a NUL-terminated path that outlives the call; the
        // shim's constructors only read the environment (no FSPROF_SHM
        // here, so they set nothing up).
        let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            // SAFETY: dlopen just failed, so dlerror returns a valid C
            // string, read before any other dl* call.
            let msg = unsafe { std::ffi::CStr::from_ptr(libc::dlerror()) };
            return Err(io::Error::other(format!(
                "cannot load the preload shim {}: {}",
                path.display(),
                msg.to_string_lossy()
            )));
        }
        Ok(LoadedShim { handle })
    }

    fn symbol(&self, name: &str) -> io::Result<*mut libc::c_void> {
        let c = CString::new(name).unwrap();
        // SAFETY: a handle from a successful dlopen, never closed; `c` is
        // NUL-terminated.
        let p = unsafe { libc::dlsym(self.handle, c.as_ptr()) };
        if p.is_null() {
            return Err(io::Error::other(format!("the preload shim lacks {name}")));
        }
        Ok(p)
    }

    pub fn layout(&self) -> io::Result<Layout> {
        // SAFETY: the shim defines fsprof_shim_abi with exactly AbiFn's C
        // signature (selftest.c), and function and data pointers have one
        // size on every target fsprof builds for.
        let f: AbiFn = unsafe { std::mem::transmute(self.symbol("fsprof_shim_abi")?) };
        let mut out = Layout::default();
        // SAFETY: `out` is a writable repr(C) mirror of the struct the
        // shim fills; the layout test checks the two agree.
        unsafe { f(&mut out) };
        Ok(out)
    }

    pub fn trace_layout(&self) -> io::Result<TraceLayout> {
        type F = unsafe extern "C" fn(*mut TraceLayout);
        // SAFETY: the symbol has this signature (trace.c).
        let f: F = unsafe { std::mem::transmute(self.symbol("fsprof_shim_trace_abi")?) };
        let mut out = TraceLayout::default();
        // SAFETY: a valid out-pointer.
        unsafe { f(&mut out) };
        Ok(out)
    }

    /// The shim's XXH64 of `data`, fed to its streaming hasher `step` bytes
    /// at a time (tests compare it with a reference implementation).
    pub fn xxh64(&self, data: &[u8], step: u64) -> io::Result<u64> {
        type F = unsafe extern "C" fn(*const u8, u64, u64) -> u64;
        // SAFETY: the symbol has this signature (trace.c).
        let f: F = unsafe { std::mem::transmute(self.symbol("fsprof_shim_xxh64")?) };
        // SAFETY: `data` is valid for its length; step > 0.
        Ok(unsafe { f(data.as_ptr(), data.len() as u64, step.max(1)) })
    }

    /// The slot the compiled hot path files a latency of `ns` (> 0) in, for
    /// the parameters of `control` (tests compare it with fsprof-core);
    /// `None` if the shim refuses the control block.
    pub fn bucket_slot(&self, control: &[u8], ns: u64) -> io::Result<Option<u32>> {
        assert!(ns > 0);
        // SAFETY: as in `layout`, for fsprof_shim_bucket_slot's signature.
        let f: BucketFn = unsafe { std::mem::transmute(self.symbol("fsprof_shim_bucket_slot")?) };
        let aligned = aligned_copy(control);
        // SAFETY: an 8-byte aligned copy of a control block of `control.len()`
        // bytes, which the shim validates (size, every field) before use.
        let slot = unsafe { f(aligned.as_ptr() as *const u8, control.len(), ns) };
        Ok((slot != u32::MAX).then_some(slot))
    }

    /// The cell the compiled hot path files a value `v` in on an axis of
    /// `n` cells (tests compare it with [`crate::abi::corr_cell`]).
    pub fn corr_cell(&self, v: u64, n: u32) -> io::Result<u32> {
        type F = unsafe extern "C" fn(u64, u32) -> u32;
        // SAFETY: the symbol has this signature (selftest.c).
        let f: F = unsafe { std::mem::transmute(self.symbol("fsprof_shim_corr_cell")?) };
        // SAFETY: a pure function of two integers.
        Ok(unsafe { f(v, n) })
    }

    /// The latency in ns the compiled hot path files for a call of `ticks`
    /// clock ticks, with the parameters of `control` (tests compare it with
    /// the exact product); `None` if the shim refuses the control block.
    pub fn ticks_to_ns(&self, control: &[u8], ticks: u64) -> io::Result<Option<u64>> {
        type F = unsafe extern "C" fn(*const u8, usize, u64, *mut u64) -> libc::c_int;
        // SAFETY: the symbol has this signature (selftest.c).
        let f: F = unsafe { std::mem::transmute(self.symbol("fsprof_shim_ticks_to_ns")?) };
        let aligned = aligned_copy(control);
        let mut ns = 0u64;
        // SAFETY: as in `bucket_slot`; `ns` is a writable u64.
        let rc = unsafe { f(aligned.as_ptr() as *const u8, control.len(), ticks, &mut ns) };
        Ok((rc == 0).then_some(ns))
    }

    /// `control` is a complete control block (header + thresholds).
    pub fn selftest(&self, control: &[u8], iterations: u32) -> io::Result<SelfTest> {
        assert!(control.len() >= std::mem::size_of::<ControlHeader>());
        // SAFETY: as in `layout`, for fsprof_shim_selftest's signature.
        let f: SelfTestFn = unsafe { std::mem::transmute(self.symbol("fsprof_shim_selftest")?) };
        let aligned = aligned_copy(control);
        let mut out = SelfTest::default();
        // SAFETY: an aligned control block of `control.len()` bytes (at least
        // a header, asserted above), validated by the shim; `out` is a
        // writable SelfTest.
        let rc = unsafe {
            f(
                aligned.as_ptr() as *const u8,
                control.len(),
                iterations,
                &mut out,
            )
        };
        if rc != 0 {
            return Err(io::Error::other(
                "the preload shim rejected the self-test parameters",
            ));
        }
        Ok(out)
    }
}

/// The block may be unaligned in a Vec<u8>; the C side reads it as u64s.
fn aligned_copy(control: &[u8]) -> Vec<u64> {
    let mut aligned = vec![0u64; control.len().div_ceil(8)];
    // SAFETY: `aligned` holds at least control.len() bytes and is a
    // different allocation from `control`.
    unsafe {
        std::ptr::copy_nonoverlapping(
            control.as_ptr(),
            aligned.as_mut_ptr() as *mut u8,
            control.len(),
        );
    }
    aligned
}

// Deliberately no dlclose: the shim registers nothing, but unloading code
// that a thread-local destructor or atfork list might point to is never
// worth the few kilobytes.

/// The self-test of [`LoadedShim::selftest`], run in a process of its own
/// ([`crate::SELFTEST_RUNNER`], executed from an unnamed memory file, so no name in a shared
/// directory is involved):
/// for an fsprof that cannot load a shared object into itself (a static
/// musl build has no `dlopen`). The runner loads the shim the same way,
/// with an empty environment so that no `LD_PRELOAD` or `LD_LIBRARY_PATH`
/// of the caller's reaches the loader of a program run as root.
pub fn selftest_in_process(shim: &Path, control: &[u8], iterations: u32) -> io::Result<SelfTest> {
    use std::io::Write;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::process::{Command, Stdio};

    assert!(control.len() >= std::mem::size_of::<ControlHeader>());
    // SAFETY: a constant NUL-terminated name; the flag asks for a
    // close-on-exec descriptor, which exec through /proc/self/fd still
    // opens (an ELF program is opened before the descriptors are closed).
    let fd = unsafe { libc::memfd_create(c"fsprof-selftest".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor memfd_create just returned, owned only here.
    let file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    (&file).write_all(crate::SELFTEST_RUNNER)?;
    let mut child = Command::new(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .arg(shim)
        .arg(iterations.to_string())
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot start the self-test runner: {e}")))?;
    drop(file);
    let fed = child.stdin.take().expect("piped").write_all(control);
    let out = child.wait_with_output()?;
    let bytes: [u8; 24] = match out.stdout.as_slice().try_into() {
        Ok(b) if out.status.success() => b,
        _ => {
            let why = String::from_utf8_lossy(&out.stderr);
            let why = why.lines().next().unwrap_or("no result");
            return Err(io::Error::other(format!(
                "the self-test runner failed ({}): {why}",
                out.status
            )));
        }
    };
    fed?;
    let f = |i: usize| f64::from_ne_bytes(bytes[i * 8..i * 8 + 8].try_into().unwrap());
    Ok(SelfTest {
        per_call_ns: f(0),
        min_recordable_ns: f(1),
        outside_ns: f(2),
    })
}
