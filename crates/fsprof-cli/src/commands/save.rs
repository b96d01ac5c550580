//! Where capture commands write their profile.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use fsprof_core::format::{to_json, write_atomic, FormatError};
use fsprof_core::Profile;

use crate::cli::OutputArgs;

/// Writes the profile without ever replacing a file that is not ours to
/// replace: `-o` needs `--force` to overwrite, the default name
/// (`fsprof-<kind>-<program>-<start time>.json`) moves on to the next free
/// name.
pub fn save_profile(
    p: &Profile,
    out: &OutputArgs,
    kind: &str,
    program: Option<&str>,
) -> Result<PathBuf> {
    let json = to_json(p);
    if let Some(path) = &out.output {
        write_atomic(path, json.as_bytes(), out.force)?;
        return Ok(path.clone());
    }
    let base = default_name(p, kind, program);
    for n in 1..1000 {
        let path = if n == 1 {
            PathBuf::from(format!("{base}.json"))
        } else {
            PathBuf::from(format!("{base}-{n}.json"))
        };
        match write_atomic(&path, json.as_bytes(), false) {
            Ok(()) => return Ok(path),
            Err(FormatError::Exists { .. }) => continue,
            Err(e) => {
                return Err(e).context("writing the profile (use -o FILE to put it elsewhere)")
            }
        }
    }
    anyhow::bail!("could not find a free file name like {base}.json; use -o FILE")
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
