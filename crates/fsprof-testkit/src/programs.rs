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

/// `programs/followed_tree.c` compiled into `dir`, and the data file it
/// maps (`dir/data`): (program, data file).
pub fn followed_tree(dir: &Path) -> (PathBuf, PathBuf) {
    let exe = compile("followed_tree", dir, &["-pthread"]);
    let file = dir.join("data");
    std::fs::write(&file, "fsprof-f".repeat(512)).expect("writing the data file");
    (exe, file)
}

/// `fsprof SUB -f -o OUT -- followed_tree MODE N DATA` in `dir`, with room
/// for `map` processes in the map of followed processes (the test knob
/// `FSPROF_TEST_FOLLOWED_MAX`): fsprof's standard error. It must succeed.
pub fn under_followed_tree(
    dir: &Path,
    sub: &[&str],
    out: &Path,
    (mode, n): (&str, u32),
    map: u32,
) -> String {
    let (exe, file) = followed_tree(dir);
    let o = crate::fsprof()
        .args(sub)
        .args(["-f", "-o"])
        .arg(out)
        .arg("--")
        .arg(&exe)
        .args([mode, &n.to_string()])
        .arg(&file)
        .env("FSPROF_TEST_FOLLOWED_MAX", map.to_string())
        .output()
        .expect("running fsprof");
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{mode} {n}: {:?}: {err}", o.status);
    err
}

/// The lines of fsprof's standard error that warn of processes of a
/// followed tree not followed.
pub fn unfollowed_warnings(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("fsprof: warning: ") && l.contains("were not followed"))
        .collect()
}
