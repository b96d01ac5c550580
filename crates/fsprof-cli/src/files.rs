//! Where commands read profiles and write what they make: a path, or `-`
//! for standard input or output, as cat, tar and perf take it — for every
//! command that reads a profile or writes a file.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use fsprof_bench::result::BenchResult;
use fsprof_capture::is_stdio;
use fsprof_core::format::{parse_profile, write_atomic, FormatError};
use fsprof_core::Profile;

/// Reads a profile from a file, or from standard input for `-`.
pub fn read_input(path: &Path) -> Result<Profile> {
    let bytes = read_bytes(path)?;
    Ok(parse_profile(&bytes, Path::new(&name(path)))?)
}

/// A file a command reads: the profile every fsprof file holds, and the
/// bench result when it is one (`fsprof bench -o`).
pub struct Document {
    pub profile: Profile,
    pub bench: Option<BenchResult>,
}

/// Reads a file once and says what it holds, so no command opens a file
/// again to find out what kind it is.
pub fn read_document(path: &Path) -> Result<Document> {
    let bytes = read_bytes(path)?;
    let shown = name(path);
    Ok(Document {
        profile: parse_profile(&bytes, Path::new(&shown))?,
        bench: fsprof_bench::result::parse_section(&bytes, &shown)?,
    })
}

fn read_bytes(path: &Path) -> Result<Vec<u8>> {
    let read = || {
        if !is_stdio(path) {
            return std::fs::read(path);
        }
        let mut bytes = Vec::new();
        std::io::stdin()
            .lock()
            .read_to_end(&mut bytes)
            .map(|_| bytes)
    };
    read().map_err(|source| {
        FormatError::Read {
            path: PathBuf::from(name(path)),
            source,
        }
        .into()
    })
}

/// How an input is named in messages: its path, or "standard input".
pub fn name(path: &Path) -> String {
    if is_stdio(path) {
        "standard input".into()
    } else {
        path.display().to_string()
    }
}

/// Reads several files, at most one of them from standard input.
pub fn read_documents(paths: &[&PathBuf]) -> Result<Vec<Document>> {
    one_stdin_at_most(paths)?;
    paths.iter().map(|p| read_document(p)).collect()
}

/// Reads several profiles, at most one of them from standard input.
pub fn read_inputs<'a>(paths: impl IntoIterator<Item = &'a PathBuf>) -> Result<Vec<Profile>> {
    let paths: Vec<&PathBuf> = paths.into_iter().collect();
    one_stdin_at_most(&paths)?;
    paths.into_iter().map(|p| read_input(p)).collect()
}

fn one_stdin_at_most(paths: &[&PathBuf]) -> Result<()> {
    if paths.iter().filter(|p| is_stdio(p)).count() > 1 {
        bail!("only one input can be standard input (-)");
    }
    Ok(())
}

/// Refuses, before the work, an `-o FILE` that exists without `--force`
/// or that fsprof may not write (fsprof-core's output rules), and
/// standard output when it was closed at start.
pub fn check_output(output: Option<&Path>, force: bool) -> Result<()> {
    match output.filter(|p| !is_stdio(p)) {
        Some(p) => fsprof_core::output::check_output(p, force).map(drop),
        None => fsprof_core::output::check_std(1),
    }
    .map_err(Into::into)
}

/// Writes to `-o FILE` (atomically: no partial file on failure) or, with
/// no `-o` or `-o -`, to standard output. Says which file it wrote.
pub fn write_output(bytes: &[u8], output: Option<&Path>, force: bool) -> Result<()> {
    match output.filter(|p| !is_stdio(p)) {
        Some(path) => {
            write_atomic(path, bytes, force)?;
            fsprof_sys::diag!("fsprof: wrote {}", path.display());
            Ok(())
        }
        None => {
            fsprof_core::output::check_std(1)?;
            write_stdout(bytes)
        }
    }
}

/// A closed pipe (`fsprof report p.json | head`) is a normal end, not an
/// error.
pub fn write_stdout(bytes: &[u8]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        r => Ok(r?),
    }
}
