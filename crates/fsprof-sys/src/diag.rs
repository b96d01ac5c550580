//! Diagnostics on standard error that can never fail the run: `eprintln!`
//! panics when stderr is a closed pipe or a full device, and a profiler
//! must not turn a broken stderr into exit status 101 (or into a command
//! that never started). [`diag!`](crate::diag!) writes what it can and
//! drops the rest.

use std::io::Write;

/// Writes `text` to standard error, ignoring every error.
pub fn write(text: &str) {
    let mut e = std::io::stderr().lock();
    let _ = e.write_all(text.as_bytes());
    let _ = e.flush();
}

/// `eprintln!` that never panics: a line on standard error, or nothing if
/// standard error cannot take it.
#[macro_export]
macro_rules! diag {
    ($($arg:tt)*) => {
        $crate::diag::write(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprint!` that never panics.
#[macro_export]
macro_rules! diag_nonl {
    ($($arg:tt)*) => {
        $crate::diag::write(&format!($($arg)*))
    };
}

#[cfg(test)]
mod tests {
    /// With stderr a pipe whose reader is gone (EPIPE) or /dev/full
    /// (ENOSPC), a diagnostic is dropped, not a panic. Run in a child
    /// process so the test's own stderr stays usable.
    #[test]
    fn a_broken_stderr_is_not_a_panic() {
        if std::env::var_os("FSPROF_DIAG_CHILD").is_some() {
            crate::diag!("into the void {}", 1);
            crate::diag_nonl!("and again");
            std::process::exit(7);
        }
        let exe = std::env::current_exe().unwrap();
        for target in ["pipe", "full"] {
            let mut c = std::process::Command::new(&exe);
            c.args([
                "diag::tests::a_broken_stderr_is_not_a_panic",
                "--exact",
                "--nocapture",
            ])
            .env("FSPROF_DIAG_CHILD", "1")
            .stdout(std::process::Stdio::null());
            let st = if target == "full" {
                c.stderr(
                    std::fs::File::options()
                        .write(true)
                        .open("/dev/full")
                        .unwrap(),
                )
                .status()
                .unwrap()
            } else {
                let mut child = c.stderr(std::process::Stdio::piped()).spawn().unwrap();
                drop(child.stderr.take()); // the reader goes away
                child.wait().unwrap()
            };
            assert_eq!(st.code(), Some(7), "stderr to a {target}: {st:?}");
        }
    }
}
