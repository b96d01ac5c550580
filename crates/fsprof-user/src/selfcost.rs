//! The profiler's own cost per call (FSprof §4.2), measured by the shim
//! itself with the run's clock parameters. The figure depends on the CPU,
//! the shim build, the clock and the resolution, none of which change
//! within a boot, so it is measured once per boot (on the other core while
//! the first command runs) and kept beside the installed shim.

use std::io;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use fsprof_shim::{LoadedShim, SelfTest, SHIM_HASH};

use fsprof_sys::clock::boot_id;

pub enum SelfCost {
    Known(SelfTest),
    Measuring {
        job: JoinHandle<io::Result<SelfTest>>,
        save_to: Option<PathBuf>,
    },
}

impl SelfCost {
    pub fn start(
        cache: Option<&Path>,
        shim: &Path,
        control: impl FnOnce() -> Vec<u8>,
        clock_kind: u32,
        resolution: u32,
    ) -> Self {
        let file = cache.and_then(|c| {
            Some(c.join(format!(
                "selfcost-{}-{SHIM_HASH:016x}-c{clock_kind}-r{resolution}",
                boot_id()?
            )))
        });
        if let Some(known) = file.as_deref().and_then(read) {
            return SelfCost::Known(known);
        }
        // Made only here: a self-test is rare (once a boot), and the
        // control block is 12 KB built.
        let (path, control) = (shim.to_path_buf(), control());
        SelfCost::Measuring {
            job: std::thread::spawn(move || measure(&path, &control)),
            save_to: file,
        }
    }

    pub fn finish(self) -> io::Result<SelfTest> {
        match self {
            SelfCost::Known(st) => Ok(st),
            SelfCost::Measuring { job, save_to } => {
                let st = job
                    .join()
                    .map_err(|_| io::Error::other("the self-test thread panicked"))??;
                if let Some(f) = save_to {
                    let _ = std::fs::write(
                        f,
                        format!(
                            "{} {} {}\n",
                            st.per_call_ns, st.min_recordable_ns, st.outside_ns
                        ),
                    );
                }
                Ok(st)
            }
        }
    }
}

/// In fsprof itself where it can load the shim; a static musl build has
/// no `dlopen`, so the shim is loaded in a process of its own there.
fn measure(shim: &Path, control: &[u8]) -> io::Result<SelfTest> {
    const ITERATIONS: u32 = 2000;
    if cfg!(target_env = "musl") {
        fsprof_shim::selftest_in_process(shim, control, ITERATIONS)
    } else {
        LoadedShim::load(shim)?.selftest(control, ITERATIONS)
    }
}

fn read(file: &Path) -> Option<SelfTest> {
    let text = fsprof_sys::small_file(file)?;
    let mut it = text.split_whitespace().map(|w| w.parse::<f64>().ok());
    let (per_call_ns, min_recordable_ns, outside_ns) = (it.next()??, it.next()??, it.next()??);
    let sane = |v: f64| v.is_finite() && (0.0..1e6).contains(&v);
    (sane(per_call_ns) && sane(min_recordable_ns) && sane(outside_ns)).then_some(SelfTest {
        per_call_ns,
        min_recordable_ns,
        outside_ns,
    })
}
