//! What the `fsprof` binary costs to start, as far as a test can pin it
//! without timing anything (the timings are in `bench/startup.sh`).

use std::path::Path;
use std::process::Command;

use fsprof_testkit::*;

/// The unwinder is linked in from `libgcc_eh.a` wherever the C compiler
/// has that archive, so the binary does not load `libgcc_s.so.1` (whose
/// constructor's CPUID instructions cost ~0.2 ms per start in a VM). The
/// ground truth is the compiler's own answer, asked here.
#[test]
fn binary_does_not_load_libgcc_s_where_libgcc_eh_exists() {
    let archive = Command::new("cc")
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .map(|o| stdout(&o).trim().to_string())
        .unwrap_or_default();
    let has_archive = Path::new(&archive).is_absolute() && Path::new(&archive).is_file();
    assert_eq!(
        env!("FSPROF_STATIC_UNWINDER") == "1",
        has_archive,
        "build.rs's choice does not match `cc -print-file-name=libgcc_eh.a` ({archive})"
    );
    let bin = std::fs::read(fsprof_path()).unwrap();
    // The name is in the binary's dynamic string table only if it is needed.
    let needs_gcc_s = bin.windows(13).any(|w| w == b"libgcc_s.so.1");
    assert_eq!(
        needs_gcc_s, !has_archive,
        "libgcc_s.so.1 needed: {needs_gcc_s}"
    );
    // And it still starts and runs a command.
    let o = fsprof()
        .args(["run", "-q", "-o", "-", "--", "true"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}
