//! `fsprof trace` and `fsprof import` (crates/fsprof-trace): real
//! programs' calls recorded with their arguments and data, and strace logs
//! and fio iologs read as traces.

use std::path::{Path, PathBuf};
use std::process::Output;

mod capture;
mod followed;
mod forks;
mod held;
mod import;
mod inherited;
mod window;

/// `fsprof trace -f -o dir/t.trace -- PROGRAM` in `dir`, PROGRAM compiled
/// there from `code` first; it succeeded. Its output and the trace.
fn trace_source(name: &str, code: &str, dir: &Path) -> (Output, PathBuf) {
    let exe = fsprof_testkit::compile_source(name, code, dir, &[]);
    let out = dir.join("t.trace");
    let o = fsprof_testkit::capture_in(dir, &["trace", "-f"], &out, &[exe.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (o, out)
}
