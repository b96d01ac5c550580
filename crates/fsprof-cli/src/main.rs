//! `fsprof`: see `fsprof --help`. Exit status: what the profiled command
//! returned for `run`; otherwise 0 on success, 1 when `check` finds an
//! inconsistent profile or `compare` finds an op that changed, 2 on any
//! error.

mod cli;
mod commands;
mod files;

use clap::Parser;

fn main() {
    let cli = cli::Cli::parse();
    let code = match commands::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            fsprof_sys::diag!("fsprof: {}", one_line(&e));
            2
        }
    };
    std::process::exit(code);
}

/// The error and its causes on one line: `context: cause: cause`. A
/// cause whose text the line already ends with (an error that prints its
/// source, as `cannot read X: {source}` does) is not repeated.
fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain().map(|c| c.to_string()) {
        if line.is_empty() {
            line = cause;
        } else if !line.ends_with(&cause) {
            line.push_str(": ");
            line.push_str(&cause);
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn causes_are_printed_once() {
        let io = std::io::Error::from_raw_os_error(libc::ENOENT);
        let e = fsprof_core::format::FormatError::Read {
            path: "p.json".into(),
            source: io,
        };
        let e = anyhow::Error::new(e).context("comparing");
        assert_eq!(
            one_line(&e),
            "comparing: cannot read p.json: No such file or directory (os error 2)"
        );
    }
}
