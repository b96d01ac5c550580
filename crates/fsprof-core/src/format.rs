//! Reading and writing profile files (versioned JSON, see
//! `docs/profile-format.md`).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::buckets::MIN_INDEX;
pub use crate::output::write_atomic;
use crate::profile::{Layer, Profile, FORMAT_NAME, FORMAT_VERSION};

#[derive(Debug, Error)]
pub enum FormatError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
    #[error("{path} already exists; pass --force to overwrite it or choose another name")]
    Exists { path: PathBuf },
    #[error("cannot write {path}: {what}")]
    NotWritable { path: PathBuf, what: String },
    #[error("{path} is not a valid profile: {detail}")]
    Corrupt { path: PathBuf, detail: String },
    #[error("{path} is not an fsprof profile (no \"format\": \"{FORMAT_NAME}\" field)")]
    NotAProfile { path: PathBuf },
    #[error("{path} has profile format version {found}; this fsprof reads version {FORMAT_VERSION} (upgrade fsprof to read it)")]
    UnsupportedVersion { path: PathBuf, found: u64 },
}

/// Reads, version-checks and validates a profile file.
pub fn read_profile(path: &Path) -> Result<Profile, FormatError> {
    let bytes = fs::read(path).map_err(|source| FormatError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse_profile(&bytes, path)
}

/// The two fields that say what a file is; the rest is skipped unparsed.
#[derive(serde::Deserialize)]
struct Envelope {
    format: Option<serde_json::Value>,
    format_version: Option<serde_json::Value>,
}

/// Parses profile bytes; `path` only names the input in errors.
pub fn parse_profile(bytes: &[u8], path: &Path) -> Result<Profile, FormatError> {
    let corrupt = |detail: String| FormatError::Corrupt {
        path: path.to_owned(),
        detail,
    };
    // Look at the envelope before the body, so a newer or foreign file gets
    // a message about its version or kind rather than a missing-field error.
    // Two passes over the bytes, the first skipping all but two fields: a
    // `serde_json::Value` of the whole file first took 14 times its size.
    let envelope: Envelope = match serde_json::from_slice(bytes) {
        Ok(e) => e,
        Err(e) if e.is_eof() => return Err(corrupt(format!("truncated JSON ({e})"))),
        Err(e) if e.is_data() => {
            return Err(FormatError::NotAProfile {
                path: path.to_owned(),
            })
        }
        Err(e) => return Err(corrupt(format!("malformed JSON ({e})"))),
    };
    if envelope.format.as_ref().and_then(|f| f.as_str()) != Some(FORMAT_NAME) {
        return Err(FormatError::NotAProfile {
            path: path.to_owned(),
        });
    }
    match envelope.format_version.as_ref().and_then(|v| v.as_u64()) {
        Some(v) if v == FORMAT_VERSION as u64 => {}
        Some(found) => {
            return Err(FormatError::UnsupportedVersion {
                path: path.to_owned(),
                found,
            })
        }
        None => return Err(corrupt("missing or non-numeric \"format_version\"".into())),
    }
    let profile: Profile = serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
    validate(&profile).map_err(corrupt)?;
    Ok(profile)
}

/// Longest layer or op name a profile may hold, in bytes. The longest
/// fsprof writes is a kernel function's (KSYM_NAME_LEN, 512); a name
/// beyond this is refused, not cut: two cut names could become one op
/// and mix their latencies, and a table column as wide as 65,536 bytes
/// is past what Rust's formatting widths take (it panicked).
pub const MAX_NAME: usize = 1024;

/// `name` (a layer's or an op's) within [`MAX_NAME`]; else why not, with
/// only its start.
fn bounded(what: &str, name: &str) -> Result<(), String> {
    if name.len() <= MAX_NAME {
        return Ok(());
    }
    let start: String = name.chars().take(32).collect();
    Err(format!(
        "{what} name of {} bytes (\"{}...\"); names are at most {MAX_NAME} bytes",
        name.len(),
        crate::printable::field(&start)
    ))
}

/// Structural checks that serde cannot express. Counter consistency is the
/// business of `check`, not of loading.
fn validate(p: &Profile) -> Result<(), String> {
    let max = p.resolution().max_index();
    let check_layers = |layers: &[Layer], what: &str| -> Result<(), String> {
        for layer in layers {
            if layer.name.is_empty() {
                return Err(format!("{what}: a layer has an empty name"));
            }
            bounded("a layer", &layer.name).map_err(|e| format!("{what}: {e}"))?;
            for op in &layer.ops {
                if op.name.is_empty() {
                    return Err(format!(
                        "{what}: layer {} has an op with an empty name",
                        layer.name
                    ));
                }
                bounded(&format!("layer {} has an op", layer.name), &op.name)
                    .map_err(|e| format!("{what}: {e}"))?;
                let h = &op.histogram;
                let last = h.offset as i64 + h.counts.len() as i64 - 1;
                if !h.counts.is_empty() && (h.offset < MIN_INDEX || last > max as i64) {
                    return Err(format!(
                        "{what}: {}/{} has buckets {}..={} outside {}..={} for resolution {}",
                        layer.name,
                        op.name,
                        h.offset,
                        last,
                        MIN_INDEX,
                        max,
                        p.resolution()
                    ));
                }
            }
        }
        Ok(())
    };
    check_layers(&p.layers, "layers")?;
    for (k, iv) in p.intervals.iter().enumerate() {
        if iv.end_ns < iv.start_ns {
            return Err(format!("interval {k} ends before it starts"));
        }
        check_layers(&iv.layers, &format!("interval {k}"))?;
    }
    for pr in &p.processes {
        check_layers(&pr.layers, &format!("process {}", pr.pid))?;
    }
    Ok(())
}

/// Processes from which a profile's are written by more than one thread.
const SPLIT_PROCESSES: usize = 256;

/// The text of `profile`, in one string ([`to_json_parts`]).
pub fn to_json(profile: &Profile) -> String {
    let parts = to_json_parts(profile);
    if parts.len() == 1 {
        return parts.into_iter().next().expect("one part");
    }
    let mut out = String::with_capacity(parts.iter().map(String::len).sum());
    for part in &parts {
        out.push_str(part);
    }
    out
}

/// The text of `profile`, in parts to be written one after the other:
/// serde_json's pretty text, but for the processes, each of which is one
/// line of compact JSON. A profile of many processes (a build, a shell
/// loop) is mostly their detail, written at the end of the run while the
/// user waits; pretty, a histogram's every bucket took a line of its own,
/// and a loop of 3,000 `cat`s wrote 15.9 MB (2.7 times the compact text),
/// the kernel's copy of it an eighth of fsprof's main thread over the
/// whole run. A line a process also reads well with grep. Many processes
/// are written in parts on as many threads as there are CPUs, byte for
/// byte what one thread writes; kept apart, the parts are not copied again
/// into one string on their way to the file.
pub fn to_json_parts(profile: &Profile) -> Vec<String> {
    if profile.processes.is_empty() {
        return vec![pretty(profile, 64 * 1024)];
    }
    // Every field but the processes, which come last (and are left out
    // when empty): the text ends in "\n}".
    let head = Profile {
        format: profile.format.clone(),
        format_version: profile.format_version,
        meta: profile.meta.clone(),
        layers: profile.layers.clone(),
        intervals: profile.intervals.clone(),
        processes: Vec::new(),
    };
    let mut head = pretty(&head, 64 * 1024);
    let body = head
        .strip_suffix("\n}")
        .expect("a profile's text ends its object")
        .len();
    head.truncate(body);
    head.push_str(",\n  \"processes\": [");
    let mut parts = vec![head];
    // The process count first: asking for the CPUs reads the cgroup's
    // quota files (eight system calls, ~30 µs of every short run's end).
    let threads = match profile.processes.len() < SPLIT_PROCESSES {
        true => 1,
        false => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    if threads < 2 {
        parts.push(processes_text(&profile.processes, true));
    } else {
        let per = profile.processes.len().div_ceil(threads);
        std::thread::scope(|s| {
            let workers: Vec<_> = profile
                .processes
                .chunks(per)
                .enumerate()
                .map(|(k, chunk)| s.spawn(move || processes_text(chunk, k == 0)))
                .collect();
            parts.extend(
                workers
                    .into_iter()
                    .map(|w| w.join().expect("writing processes does not panic")),
            );
        });
    }
    parts.push("\n  ]\n}".to_owned());
    parts
}

fn pretty<T: serde::Serialize>(value: &T, capacity: usize) -> String {
    // Sized for a typical profile (~25 KB for `grep -r`): growing from
    // serde_json's 128 bytes copied the text eight times over, ~40% of
    // writing it at the end of a run (docs/benchmarks.md, "Start-up,
    // fourth session").
    let mut out = Vec::with_capacity(capacity);
    serde_json::to_writer_pretty(&mut out, value).expect("a profile always serializes");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// The elements of the processes array, each on a line of its own two
/// levels in, separated by commas (one before the first too unless
/// `first`).
fn processes_text(processes: &[crate::profile::Process], first: bool) -> String {
    // About 900 bytes a short process (a `cat`: five ops).
    let mut out = Vec::with_capacity(processes.len() * 1024);
    for (k, p) in processes.iter().enumerate() {
        if k > 0 || !first {
            out.push(b',');
        }
        out.extend_from_slice(b"\n    ");
        serde_json::to_writer(&mut out, p).expect("a process always serializes");
    }
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// Writes `profile` to `path` atomically: readers never see a half-written
/// file and a failed write leaves nothing behind. Without `overwrite`, an
/// existing file is never replaced, even if it appears while we write.
pub fn write_profile(path: &Path, profile: &Profile, overwrite: bool) -> Result<(), FormatError> {
    let parts = to_json_parts(profile);
    let parts: Vec<&[u8]> = parts.iter().map(|p| p.as_bytes()).collect();
    crate::output::write_atomic_parts(path, &parts, overwrite)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Clock, Meta};
    use crate::{OpStats, Resolution};

    fn sample() -> Profile {
        let mut p = Profile::new(Meta {
            fsprof_version: "0.1.0".into(),
            tool: "test".into(),
            clock: Clock {
                source: "monotonic".into(),
                tsc_hz: None,
            },
            resolution: Resolution::new(2).unwrap(),
            ..Default::default()
        });
        let mut op = OpStats::new("read");
        op.pre = 3;
        op.post = 3;
        op.total_ns = 3000;
        op.min_ns = Some(500);
        op.max_ns = Some(1500);
        op.histogram.add_to(Some(18), 2);
        op.histogram.add_to(Some(21), 1);
        p.layer_mut("user").ops.push(op);
        p
    }

    /// A profile without processes is serde_json's pretty text, byte for
    /// byte, bigger than the first allocation too.
    #[test]
    fn to_json_is_serde_jsons_pretty_text() {
        let mut p = sample();
        for k in 0..2000u64 {
            let mut op = OpStats::new(format!("op{k}"));
            op.pre = k;
            op.histogram.add_to(Some(18), k);
            p.layer_mut("user").ops.push(op);
        }
        let text = to_json(&p);
        assert!(text.len() > 64 * 1024, "{}", text.len());
        assert_eq!(text, serde_json::to_string_pretty(&p).unwrap());
        let small = sample();
        assert_eq!(
            to_json(&small),
            serde_json::to_string_pretty(&small).unwrap()
        );
    }

    /// A profile's processes are each a line of compact JSON after the
    /// pretty text of the rest; many of them, written in parts on several
    /// threads, are the bytes one thread writes; the text, in one string
    /// or written to a file, reads back as the profile.
    #[test]
    fn processes_are_written_a_line_each() {
        let mut p = sample();
        p.intervals.push(crate::profile::Interval {
            start_ns: 0,
            end_ns: 5,
            layers: p.layers.clone(),
        });
        for k in 0..(2 * SPLIT_PROCESSES as i32 + 3) {
            p.processes.push(crate::profile::Process {
                pid: k,
                ppid: 1,
                exe: "/bin/\"odd\"\nname".into(),
                argv: vec!["a b".into(), String::new()],
                start_ns: k as u64,
                layers: if k % 3 == 0 {
                    Vec::new()
                } else {
                    p.layers.clone()
                },
            });
        }
        let check = |p: &Profile| {
            let text = to_json(p);
            assert_eq!(parse_profile(text.as_bytes(), Path::new("x")).unwrap(), *p);
            let mut rest = p.clone();
            rest.processes.clear();
            let head = serde_json::to_string_pretty(&rest).unwrap();
            let head = head.strip_suffix("\n}").unwrap();
            assert!(text.starts_with(head), "{text}");
            let lines: Vec<&str> = text[head.len()..].lines().collect();
            assert_eq!(lines.len(), p.processes.len() + 4, "{text}");
            for (line, want) in lines[2..].iter().zip(&p.processes) {
                let line = line.strip_prefix("    ").unwrap();
                let line = line.strip_suffix(',').unwrap_or(line);
                let got: crate::profile::Process = serde_json::from_str(line).unwrap();
                assert_eq!(got, *want);
            }
            text
        };
        let whole = check(&p);
        let parts = to_json_parts(&p);
        assert!(parts.len() > 3, "written on one thread");
        let one = processes_text(&p.processes, true);
        assert_eq!(parts[1..parts.len() - 1].concat(), one);
        // Written to a file part after part: the same bytes.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.json");
        write_profile(&path, &p, false).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), whole);
        p.processes.truncate(SPLIT_PROCESSES - 1);
        check(&p);
        p.processes.truncate(1);
        check(&p);
    }

    #[test]
    fn round_trip() {
        let p = sample();
        let back = parse_profile(to_json(&p).as_bytes(), Path::new("x")).unwrap();
        assert_eq!(p, back);
    }

    #[test]
    fn truncated_file_is_reported_as_truncated() {
        let json = to_json(&sample());
        let err =
            parse_profile(&json.as_bytes()[..json.len() / 2], Path::new("p.json")).unwrap_err();
        assert!(err.to_string().contains("truncated"), "{err}");
    }

    #[test]
    fn newer_version_names_both_versions() {
        let json = to_json(&sample()).replace("\"format_version\": 1", "\"format_version\": 7");
        let err = parse_profile(json.as_bytes(), Path::new("p.json")).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("version 7") && msg.contains("version 1"),
            "{msg}"
        );
    }

    #[test]
    fn foreign_json_is_not_a_profile() {
        let err = parse_profile(br#"{"hello": 1}"#, Path::new("p.json")).unwrap_err();
        assert!(matches!(err, FormatError::NotAProfile { .. }));
    }

    #[test]
    fn out_of_range_buckets_are_rejected() {
        let mut p = sample();
        p.layers[0].ops[0].histogram.offset = 200; // > 64*2-1
        let err = parse_profile(to_json(&p).as_bytes(), Path::new("p.json")).unwrap_err();
        assert!(err.to_string().contains("outside"), "{err}");
    }

    /// Names up to MAX_NAME bytes load, one byte more is refused, in an
    /// interval and a process too; the message shows only the start.
    #[test]
    fn names_are_bounded() {
        let at = |n: usize| {
            let mut p = sample();
            p.layers[0].ops[0].name = "é".repeat(n / 2) + &"x".repeat(n % 2);
            p
        };
        parse_profile(to_json(&at(MAX_NAME)).as_bytes(), Path::new("p")).unwrap();
        let err = parse_profile(to_json(&at(MAX_NAME + 1)).as_bytes(), Path::new("p"));
        let msg = err.unwrap_err().to_string();
        assert!(msg.contains("op name of 1025 bytes"), "{msg}");
        assert!(msg.len() < 200, "{msg}");
        let mut p = sample();
        let mut layer = p.layers[0].clone();
        layer.name = "l".repeat(MAX_NAME + 1);
        p.processes.push(crate::profile::Process {
            layers: vec![layer],
            ..Default::default()
        });
        let err = parse_profile(to_json(&p).as_bytes(), Path::new("p")).unwrap_err();
        assert!(
            err.to_string()
                .contains("process 0: a layer name of 1025 bytes"),
            "{err}"
        );
    }

    #[test]
    fn bad_resolution_is_rejected() {
        let json = to_json(&sample()).replace("\"resolution\": 2", "\"resolution\": 3");
        let err = parse_profile(json.as_bytes(), Path::new("p.json")).unwrap_err();
        assert!(err.to_string().contains("resolution 3"), "{err}");
    }

    proptest::proptest! {
        #[test]
        fn any_profile_round_trips(
            ri in 0usize..5,
            ops in proptest::collection::vec(("[a-z_]{1,12}", proptest::collection::vec(0u64..1 << 45, 0..50), 0u64..3), 0..8),
        ) {
            let res = Resolution::new(Resolution::ALLOWED[ri]).unwrap();
            let layout = crate::BucketLayout::new(res);
            let mut p = sample();
            p.meta.resolution = res;
            p.layers.clear();
            let layer = p.layer_mut("user");
            for (name, lats, extra_pre) in ops {
                let op = layer.op_mut(&name);
                for l in lats {
                    op.record(&layout, l, false);
                }
                op.pre += extra_pre;
            }
            let back = parse_profile(to_json(&p).as_bytes(), Path::new("x")).unwrap();
            proptest::prop_assert_eq!(p, back);
        }
    }

    proptest::proptest! {
        /// Whatever the bytes, parsing answers with a profile or an error,
        /// never a panic: damaged files are a normal input.
        #[test]
        fn damaged_files_never_panic(cut in 0usize..4000, flips in proptest::collection::vec((0usize..4000, 0u8..255), 0..6)) {
            let mut bytes = to_json(&sample()).into_bytes();
            for (at, b) in flips {
                let n = bytes.len();
                bytes[at % n] = b;
            }
            bytes.truncate(cut.min(bytes.len()));
            let _ = parse_profile(&bytes, Path::new("x"));
        }
    }

    #[test]
    fn write_refuses_to_clobber() {
        let dir = std::env::temp_dir().join(format!("fsprof-fmt-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p.json");
        fs::write(&path, "precious").unwrap();
        let err = write_profile(&path, &sample(), false).unwrap_err();
        assert!(matches!(err, FormatError::Exists { .. }));
        assert_eq!(fs::read_to_string(&path).unwrap(), "precious");
        write_profile(&path, &sample(), true).unwrap();
        assert!(read_profile(&path).is_ok());
        assert_eq!(
            fs::read_dir(&dir).unwrap().count(),
            1,
            "no temporary file left"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
