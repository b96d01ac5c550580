//! Where a capture's profile is written: never over a file that is not
//! ours to replace. `-o FILE` needs `--force` to overwrite; the default
//! name (`fsprof-<kind>-<program>-<start time>.json`) moves on to the next
//! free name.

use std::path::{Path, PathBuf};

use fsprof_core::format::{to_json, write_atomic, FormatError};
use fsprof_core::Profile;

/// Where the user asked the profile to go.
#[derive(Clone, Debug, Default)]
pub struct Output {
    /// `-o FILE`; `None` for the default name in the current directory.
    pub path: Option<PathBuf>,
    /// `--force`: replace FILE if it exists.
    pub force: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum SaveError {
    #[error(transparent)]
    Format(#[from] FormatError),
    #[error("cannot write {file}: directory {dir} does not exist")]
    NoDirectory { file: PathBuf, dir: PathBuf },
    #[error("writing the profile (use -o FILE to put it elsewhere)")]
    Default(#[source] FormatError),
    #[error("could not find a free file name like {0}.json; use -o FILE")]
    NoFreeName(String),
}

/// Most default names tried (`NAME.json`, `NAME-2.json`, ...).
const MAX_TRIES: u32 = 1000;

impl Output {
    /// Refuses, before anything runs (a capture may be long), an `-o` that
    /// exists without `--force`, that is not a file fsprof may write (a
    /// directory, a socket...), or whose directory does not exist.
    pub fn check(&self) -> Result<(), SaveError> {
        let Some(out) = &self.path else {
            return Ok(());
        };
        fsprof_core::output::check_output(out, self.force)?;
        let dir = match out.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if !dir.is_dir() {
            return Err(SaveError::NoDirectory {
                file: out.clone(),
                dir: dir.to_path_buf(),
            });
        }
        Ok(())
    }
}

/// Writes the profile; returns where. `kind` names the capture in the
/// default name (empty for `fsprof run`'s), `program` the profiled program
/// (`all` without one).
pub fn save(
    p: &Profile,
    out: &Output,
    kind: &str,
    program: Option<&str>,
) -> Result<PathBuf, SaveError> {
    let json = to_json(p);
    if let Some(path) = &out.path {
        write_atomic(path, json.as_bytes(), out.force)?;
        return Ok(path.clone());
    }
    let base = default_name(p, kind, program);
    for n in 1..MAX_TRIES {
        let path = if n == 1 {
            PathBuf::from(format!("{base}.json"))
        } else {
            PathBuf::from(format!("{base}-{n}.json"))
        };
        match write_atomic(&path, json.as_bytes(), false) {
            Ok(()) => return Ok(path),
            Err(FormatError::Exists { .. }) => continue,
            Err(e) => return Err(SaveError::Default(e)),
        }
    }
    Err(SaveError::NoFreeName(base))
}

fn default_name(p: &Profile, kind: &str, program: Option<&str>) -> String {
    let prog: String = program
        .and_then(|c| Path::new(c).file_name())
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| "all".into())
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    // 2026-11-21T23:59:07.123Z -> 20261121T235907
    let stamp: String = p
        .meta
        .start_time
        .chars()
        .take(19)
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    let kind = if kind.is_empty() {
        String::new()
    } else {
        format!("{kind}-")
    };
    format!("fsprof-{kind}{prog}-{stamp}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsprof_core::Meta;

    fn profile() -> Profile {
        Profile::new(Meta {
            start_time: "2026-11-21T23:59:07.123Z".into(),
            ..Default::default()
        })
    }

    #[test]
    fn default_names_say_kind_program_and_time() {
        let p = profile();
        assert_eq!(
            default_name(&p, "kernel", Some("/usr/bin/cc1 plus")),
            "fsprof-kernel-cc1_plus-20261121T235907"
        );
        assert_eq!(default_name(&p, "", None), "fsprof-all-20261121T235907");
    }

    #[test]
    fn nothing_is_overwritten_without_force() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("p.json");
        std::fs::write(&file, "mine").unwrap();
        let out = Output {
            path: Some(file.clone()),
            force: false,
        };
        let e = out.check().unwrap_err();
        assert!(e.to_string().contains("already exists"), "{e}");
        assert!(save(&profile(), &out, "", None).is_err());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
        let forced = Output { force: true, ..out };
        forced.check().unwrap();
        assert_eq!(save(&profile(), &forced, "", None).unwrap(), file);
        assert!(std::fs::read_to_string(&file).unwrap().contains("fsprof"));
        let nodir = Output {
            path: Some(d.path().join("no/such/p.json")),
            force: false,
        };
        let e = nodir.check().unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
    }
}
