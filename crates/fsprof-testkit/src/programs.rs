//! C programs the tests drive (`programs/*.c` in this crate: known calls,
//! signals, static linking, or a test's own source), compiled with the C
//! compiler the shim's build already needs.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Compiles `programs/<name>.c` into `dir/<name>` with `extra` flags.
pub fn compile(name: &str, dir: &Path, extra: &[&str]) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("programs")
        .join(format!("{name}.c"));
    compile_file(&src, dir, extra)
}

/// Writes `code` to `dir/<name>.c` and compiles it into `dir/<name>`.
pub fn compile_source(name: &str, code: &str, dir: &Path, extra: &[&str]) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, code).expect("writing a test program");
    compile_file(&src, dir, extra)
}

fn compile_file(src: &Path, dir: &Path, extra: &[&str]) -> PathBuf {
    let name = src.file_stem().expect("a source file name");
    let exe = dir.join(name);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let st = Command::new(&cc)
        .args(["-O1", "-o"])
        .arg(&exe)
        .arg(src)
        .args(extra)
        .status()
        .unwrap_or_else(|e| panic!("{cc}: {e} (the C compiler that builds fsprof's shim)"));
    assert!(st.success(), "compiling {} failed", src.display());
    exe
}
