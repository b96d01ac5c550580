//! Where a capture's profile is written, so that a run is never lost and
//! nothing the user had is overwritten.
//!
//! - `-o FILE` needs `--force` to replace FILE; [`Output::prepare`] refuses,
//!   before anything runs, a FILE that exists, whose directory does not
//!   exist or cannot be written (tried for real: root may not create files
//!   in `/proc` or on a read-only mount whatever the mode bits say), and
//!   makes FILE's file then, unnamed until the profile is in it (see
//!   [`fsprof_core::output::OutputFile::create_ahead`]): the capture's end
//!   only writes it.
//! - `-o -` writes the profile to standard output.
//! - Without `-o`, the profile goes to the current directory under the
//!   one default name, `fsprof-<kind>-<program>-<UTC start>.json`
//!   ([`default_name`]), moving on to `-2`, `-3`, ... when taken.
//! - When the chosen place cannot be written after all (the directory is
//!   read-only, was removed during the run, the disk is full), the profile
//!   goes to `$TMPDIR` (else `/tmp`) under the default name, and [`Saved`]
//!   says where and why. Only when that fails too is it lost.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use fsprof_core::format::{to_json_parts, FormatError};
use fsprof_core::output::{write_atomic_parts, OutputFile};
use fsprof_core::unnamed::Unnamed;
use fsprof_core::Profile;

/// Where the user asked the profile to go.
#[derive(Clone, Debug, Default)]
pub struct Output {
    /// `-o FILE`; `-` for standard output; `None` for the default name in
    /// the current directory.
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
    #[error("cannot write {file}: cannot create files in {dir}: {source}")]
    NotWritable {
        file: PathBuf,
        dir: PathBuf,
        source: io::Error,
    },
    #[error("could not find a free file name like {0}.json; use -o FILE")]
    NoFreeName(String),
    #[error("cannot write the profile to standard output: {0}")]
    Stdout(io::Error),
    #[error("the profile is lost: {first}; and in {fallback_dir}: {second}")]
    Lost {
        first: String,
        fallback_dir: PathBuf,
        second: String,
    },
}

/// The profile's file, made before the capture; see [`save_into`].
#[derive(Default)]
pub enum Made {
    /// Nothing made: the file is made when the profile is written.
    #[default]
    Nothing,
    /// For the default name in the current directory, made while the
    /// command started ([`fsprof_core::unnamed`]).
    Default(Unnamed),
    /// `-o FILE`'s file, made by [`Output::prepare`].
    File(OutputFile),
}

/// Most default names tried (`NAME.json`, `NAME-2.json`, ...).
const MAX_TRIES: u32 = 1000;

impl Output {
    /// `-o -`: the profile goes to standard output.
    pub fn is_stdout(&self) -> bool {
        self.path.as_deref().is_some_and(is_stdio)
    }

    /// Refuses, before anything runs (a capture may be long), an `-o FILE`
    /// that exists without `--force`, that is not a file fsprof may write
    /// (a directory, a socket...), or whose directory does not exist or
    /// does not let us create a file; `-o -` when standard output was
    /// closed at start. The default name needs no check: it falls back to
    /// `$TMPDIR`. The file FILE will be, made by trying (root may not make
    /// files in /proc or on a read-only mount whatever the mode bits say),
    /// is kept for [`save_into`] (`Made::File`): the end of a capture
    /// then only writes. A device, a FIFO or one of fsprof's descriptors
    /// is written into when the profile is: nothing is made for them.
    pub fn prepare(&self) -> Result<Made, SaveError> {
        let Some(out) = self.path.as_deref() else {
            return Ok(Made::Nothing);
        };
        if is_stdio(out) {
            fsprof_core::output::check_std(1)?;
            return Ok(Made::Nothing);
        }
        let dir = parent_dir(out);
        if !dir.is_dir() {
            return Err(SaveError::NoDirectory {
                file: out.to_path_buf(),
                dir: dir.to_path_buf(),
            });
        }
        match OutputFile::create_ahead(out, self.force) {
            Ok(Some(file)) => Ok(Made::File(file)),
            Ok(None) => Ok(Made::Nothing),
            Err(FormatError::Write { source, .. }) => Err(SaveError::NotWritable {
                file: out.to_path_buf(),
                dir: dir.to_path_buf(),
                source,
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// [`Output::prepare`]'s checks, for a command that writes its
    /// profile soon (nothing is kept: a file made is removed, or was
    /// never named).
    pub fn check(&self) -> Result<(), SaveError> {
        self.prepare().map(drop)
    }
}

/// Where a profile went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Saved {
    /// The file written; `None` for standard output.
    pub path: Option<PathBuf>,
    /// When the profile could not go where it was meant to: what failed.
    pub fallback_from: Option<String>,
}

impl Saved {
    /// The file's path, or "standard output".
    pub fn display(&self) -> impl std::fmt::Display + '_ {
        match &self.path {
            Some(p) => p.display().to_string(),
            None => "standard output".to_string(),
        }
    }
}

/// Writes the profile; says where. `kind` names the capture in the
/// default name (`run`, `kernel`, ...), `program` the profiled program
/// (`all` without one).
pub fn save(
    p: &Profile,
    out: &Output,
    kind: &str,
    program: Option<&str>,
) -> Result<Saved, SaveError> {
    save_into(p, out, kind, program, Made::Nothing)
}

/// [`save`], into `made` when it was made for where the profile goes:
/// `-o FILE`'s file ([`Output::prepare`]) or the default name's (while
/// the command started: [`fsprof_core::unnamed`]).
pub fn save_into(
    p: &Profile,
    out: &Output,
    kind: &str,
    program: Option<&str>,
    made: Made,
) -> Result<Saved, SaveError> {
    // In parts, each written in turn: a profile of thousands of processes
    // is megabytes, not copied once more into one string.
    let parts = to_json_parts(p);
    let json: Vec<&[u8]> = parts.iter().map(|s| s.as_bytes()).collect();
    let base = default_name(kind, program, &p.meta.run.start_time);
    let first = match &out.path {
        Some(path) if is_stdio(path) => {
            fsprof_core::output::check_std(1)?;
            let mut stdout = io::stdout().lock();
            json.iter()
                .try_for_each(|b| stdout.write_all(b))
                .and_then(|()| stdout.flush())
                .map_err(SaveError::Stdout)?;
            return Ok(Saved {
                path: None,
                fallback_from: None,
            });
        }
        Some(path) => match write_parts(made, path, &json, out.force) {
            Ok(()) => return Ok(saved(path.clone())),
            // Never replace a file the user did not let us replace.
            Err(e @ FormatError::Exists { .. }) => return Err(e.into()),
            Err(e) => e.to_string(),
        },
        None => {
            let linked = match made {
                Made::Default(u) => Some(u.link_first_free(&json, names(&base, "json"))),
                _ => None,
            };
            if let Some(Ok(Some(name))) = linked {
                return Ok(saved(PathBuf::from(name)));
            }
            // Not made, no name free, or an error: the usual way says which.
            match write_free(Path::new("."), &base, &json) {
                Ok(path) => return Ok(saved(path)),
                Err(e) => here_failed(e),
            }
        }
    };
    fall_back(&fallback_dir(), &base, &json, first)
}

/// `json` into `-o FILE`'s file made ahead, else by the usual way.
fn write_parts(made: Made, path: &Path, json: &[&[u8]], force: bool) -> Result<(), FormatError> {
    match made {
        Made::File(f) => f.write_and_commit(json),
        _ => write_atomic_parts(path, json, force),
    }
}

/// Why the profile could not go under the default name in the current
/// directory, for the line that says where it went instead.
fn here_failed(e: SaveError) -> String {
    match e {
        SaveError::Format(FormatError::Write { path, source }) => {
            let cwd = std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_else(|_| ".".into());
            format!("cannot write {} in {cwd}: {source}", path.display())
        }
        e => e.to_string(),
    }
}

/// The free names tried in turn: `stem.ext`, `stem-2.ext`, ...
fn names<'a>(stem: &'a str, ext: &'a str) -> impl Iterator<Item = String> + 'a {
    (1..MAX_TRIES).map(move |n| match n {
        1 => format!("{stem}.{ext}"),
        n => format!("{stem}-{n}.{ext}"),
    })
}

/// The default name in `dir`, after `first` went wrong.
fn fall_back(dir: &Path, base: &str, bytes: &[&[u8]], first: String) -> Result<Saved, SaveError> {
    match write_free(dir, base, bytes) {
        Ok(path) => Ok(Saved {
            path: Some(path),
            fallback_from: Some(first),
        }),
        Err(e) => Err(SaveError::Lost {
            first,
            fallback_dir: dir.to_path_buf(),
            second: e.to_string(),
        }),
    }
}

fn saved(path: PathBuf) -> Saved {
    Saved {
        path: Some(path),
        fallback_from: None,
    }
}

/// `base.json` in `dir`, or the first free `base-N.json`; never replaces.
fn write_free(dir: &Path, base: &str, bytes: &[&[u8]]) -> Result<PathBuf, SaveError> {
    for name in names(base, "json") {
        let path = if dir == Path::new(".") {
            PathBuf::from(name)
        } else {
            dir.join(name)
        };
        match write_atomic_parts(&path, bytes, false) {
            Ok(()) => return Ok(path),
            Err(FormatError::Exists { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(SaveError::NoFreeName(base.into()))
}

/// `$TMPDIR` when it names a directory by an absolute path, else `/tmp`.
fn fallback_dir() -> PathBuf {
    std::env::var_os("TMPDIR")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute() && d.is_dir())
        .unwrap_or_else(|| PathBuf::from("/tmp"))
}

/// `-` names standard input or output, as for cat, tar and perf.
pub fn is_stdio(path: &Path) -> bool {
    path.as_os_str() == "-"
}

fn parent_dir(file: &Path) -> &Path {
    match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// The one default name of what a capture writes:
/// `fsprof-<kind>-<program>-<UTC start, YYYYMMDDTHHMMSS>` (plus `.json`),
/// the program's file name with anything but letters, digits, `-` and `_`
/// replaced by `_`. `.gitignore` and docs/commands.md state the same rule.
pub fn default_name(kind: &str, program: Option<&str>, start_time: &str) -> String {
    let prog = name_part(program.map(Path::new), "all");
    let stamp = name_stamp(start_time);
    let kind = if kind.is_empty() { "run" } else { kind };
    format!("fsprof-{kind}-{prog}-{stamp}")
}

/// `path`'s file name as it stands in a default name (of a profile, a
/// trace, a mount's profile): anything but letters, digits, `-` and `_`
/// replaced by `_`; `fallback` when there is no file name.
pub fn name_part(path: Option<&Path>, fallback: &str) -> String {
    path.and_then(Path::file_name)
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| fallback.into())
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A start time as it stands in a default name:
/// 2026-11-21T23:59:07.123Z -> 20261121T235907.
pub fn name_stamp(start_time: &str) -> String {
    start_time
        .chars()
        .take(19)
        .filter(|c| c.is_ascii_alphanumeric())
        .collect()
}

/// `STEM.EXT`, or the first of `STEM-2.EXT`, `STEM-3.EXT`, ... that
/// `taken` says is free; `None` when all are taken. For files written
/// later than they are named (a trace, a mount's profile), where
/// [`save`]'s create-if-absent cannot be used.
pub fn first_free(stem: &str, ext: &str, taken: impl Fn(&Path) -> bool) -> Option<PathBuf> {
    names(stem, ext).map(PathBuf::from).find(|p| !taken(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsprof_core::Meta;

    fn profile() -> Profile {
        Profile::new(Meta {
            run: fsprof_core::profile::RunInfo {
                start_time: "2026-11-21T23:59:07.123Z".into(),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    #[test]
    fn default_name_parts_and_the_first_free_name() {
        assert_eq!(name_part(Some(Path::new("/x/a b.c")), "cmd"), "a_b_c");
        assert_eq!(name_part(Some(Path::new("/")), "root"), "root");
        assert_eq!(name_part(None, "all"), "all");
        assert_eq!(name_stamp("2026-11-21T23:59:07.123Z"), "20261121T235907");
        let taken = [PathBuf::from("s.trace"), PathBuf::from("s-2.trace")];
        assert_eq!(
            first_free("s", "trace", |p| taken.iter().any(|t| t == p)),
            Some(PathBuf::from("s-3.trace"))
        );
        assert_eq!(first_free("s", "json", |_| true), None);
    }

    #[test]
    fn default_names_say_kind_program_and_time() {
        let t = "2026-11-21T23:59:07.123Z";
        assert_eq!(
            default_name("kernel", Some("/usr/bin/cc1 plus"), t),
            "fsprof-kernel-cc1_plus-20261121T235907"
        );
        assert_eq!(
            default_name("run", Some("sh"), t),
            "fsprof-run-sh-20261121T235907"
        );
        assert_eq!(default_name("", None, t), "fsprof-run-all-20261121T235907");
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
        assert_eq!(
            save(&profile(), &forced, "", None).unwrap(),
            saved(file.clone())
        );
        assert!(std::fs::read_to_string(&file).unwrap().contains("fsprof"));
        let nodir = Output {
            path: Some(d.path().join("no/such/p.json")),
            force: false,
        };
        let e = nodir.check().unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
    }

    /// A directory that exists but where no file can be created (/sys,
    /// even for root) is refused before the run, naming the reason; so is
    /// any name in /proc but fsprof's own descriptors.
    #[test]
    fn an_unwritable_directory_is_refused_up_front() {
        let out = Output {
            path: Some("/sys/p.json".into()),
            force: false,
        };
        let e = out.check().unwrap_err().to_string();
        assert!(
            e.starts_with("cannot write /sys/p.json: cannot create files in /sys: "),
            "{e}"
        );
        let out = Output {
            path: Some("/proc/p.json".into()),
            force: false,
        };
        let e = out.check().unwrap_err().to_string();
        assert!(e.contains("it is in /proc"), "{e}");
        let stdout = Output {
            path: Some("-".into()),
            force: false,
        };
        assert!(stdout.is_stdout());
        stdout.check().unwrap();
    }

    /// A FILE that cannot be written when the capture ends (its directory
    /// removed during the run) falls back to $TMPDIR under the default name.
    #[test]
    fn a_profile_that_cannot_go_where_asked_goes_to_the_temp_dir() {
        let d = tempfile::tempdir().unwrap();
        let gone = d.path().join("gone");
        std::fs::create_dir(&gone).unwrap();
        let out = Output {
            path: Some(gone.join("p.json")),
            force: false,
        };
        out.check().unwrap();
        std::fs::remove_dir(&gone).unwrap();
        // The fallback directory comes from the environment, which tests
        // share: use a path under the same temp dir only via the result.
        let s = save(&profile(), &out, "run", Some("sh")).unwrap();
        let path = s.path.clone().unwrap();
        assert!(path.starts_with(fallback_dir()), "{path:?}");
        assert!(path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("fsprof-run-sh-20261121T235907"));
        let why = s.fallback_from.unwrap();
        assert!(
            why.contains("p.json") && why.contains("No such file"),
            "{why}"
        );
        std::fs::remove_file(path).unwrap();
    }

    /// When the fallback cannot be written either, the error names both
    /// failures (the profile is lost; callers keep the command's status).
    #[test]
    fn a_profile_that_cannot_be_written_anywhere_says_both_whys() {
        let e = fall_back(
            Path::new("/proc"),
            "fsprof-run-x",
            &[b"{}"],
            "first why".into(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("the profile is lost: first why; and in /proc: cannot write /proc/"),
            "{e}"
        );
    }
}
