//! The bounded run of one target: every file of its corpus directory
//! (`corpus/<target>/`, inputs that once broke it) as it is, then a fixed
//! number of cases, each a seed with a few [`mutate`] edits, from a seed
//! fixed per target. A failure is shrunk to the fewest edits, saved under
//! `<target dir>/fuzz-failures/`, and can be replayed alone with
//! `FSPROF_FUZZ_REPLAY=FILE`.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestError, TestRunner};

use crate::alloc;
use crate::mutate::{self, Edit};

/// One reader under test.
pub struct Target {
    /// Also the name of its corpus directory and cargo-fuzz target.
    pub name: &'static str,
    /// Well-formed inputs, made by fsprof's own writers where it has one.
    pub seeds: fn() -> Vec<Vec<u8>>,
    /// Tokens of the input's language that random edits would not find.
    pub tokens: &'static [&'static [u8]],
    /// Panics when the reader breaks a property on `input`.
    pub check: fn(&[u8]),
    /// Cases of a test-suite run: a few seconds' worth in a debug build.
    pub cases: u32,
}

impl Target {
    pub const fn new(
        name: &'static str,
        seeds: fn() -> Vec<Vec<u8>>,
        tokens: &'static [&'static [u8]],
        check: fn(&[u8]),
        cases: u32,
    ) -> Target {
        Target {
            name,
            seeds,
            tokens,
            check,
            cases,
        }
    }
}

/// The most bytes a target may hold at once for an input of `len` bytes:
/// generous for any honest reader (a parsed JSON tree is ~14× its text),
/// far below what a length field taken on trust costs.
pub fn memory_budget(len: usize) -> usize {
    (64 << 20) + 256 * len
}

/// The input of one case.
pub fn input(seeds: &[Vec<u8>], tokens: &[&[u8]], seed: usize, edits: &[Edit]) -> Vec<u8> {
    let mut b = seeds[seed % seeds.len()].clone();
    mutate::apply(&mut b, edits, tokens, seeds);
    b
}

/// Runs `check` on `input` with memory counted; an error says what broke
/// (a panic propagates).
fn one(t: &Target, input: &[u8]) -> Result<(), String> {
    let ((), peak) = alloc::measure(|| (t.check)(input));
    if peak > memory_budget(input.len()) {
        return Err(format!(
            "{}: {peak} bytes live at once for an input of {} bytes (budget {})",
            t.name,
            input.len(),
            memory_budget(input.len())
        ));
    }
    Ok(())
}

/// The corpus directory of a target in the source tree.
pub fn corpus_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(name)
}

fn corpus(name: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out: Vec<_> = std::fs::read_dir(corpus_dir(name))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .map(|p| {
            let b = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, b)
        })
        .collect();
    out.sort();
    out
}

/// Cases to run: the target's own count, or `FSPROF_FUZZ_CASES`.
fn cases(t: &Target) -> u32 {
    std::env::var("FSPROF_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(t.cases)
}

/// A stable seed per target name (FNV-1a), so that runs repeat.
fn rng_seed(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// Runs the target's corpus and its budget of cases; panics with the
/// smallest failing input found.
pub fn run(t: &Target) {
    assert!(
        alloc::counting(),
        "the test binary does not install fsprof_fuzz::alloc::Counting"
    );
    if let Some(file) = std::env::var_os("FSPROF_FUZZ_REPLAY") {
        let b = std::fs::read(&file).unwrap_or_else(|e| panic!("{file:?}: {e}"));
        if let Err(e) = one(t, &b) {
            panic!("{e}");
        }
        return;
    }
    let mut seeds = (t.seeds)();
    for (path, b) in corpus(t.name) {
        if let Err(e) = one(t, &b) {
            panic!("{}: {e}", path.display());
        }
        seeds.push(b);
    }
    assert!(!seeds.is_empty(), "{}: no seeds", t.name);
    for (k, s) in seeds.iter().enumerate() {
        if let Err(e) = one(t, s) {
            panic!("{}: seed {k}: {e}", t.name);
        }
    }
    let mut runner = TestRunner::new(Config {
        cases: cases(t),
        rng_seed: RngSeed::Fixed(rng_seed(t.name)),
        failure_persistence: None,
        max_shrink_iters: 4096,
        ..Config::default()
    });
    let strategy = (any::<usize>(), prop::collection::vec(mutate::edit(), 0..6));
    let result = quietly(|| {
        runner.run(&strategy, |(seed, edits)| {
            let b = input(&seeds, t.tokens, seed, &edits);
            one(t, &b).map_err(TestCaseError::fail)
        })
    });
    match result {
        Ok(()) => {}
        Err(TestError::Abort(why)) => panic!("{}: aborted: {why}", t.name),
        Err(TestError::Fail(why, (seed, edits))) => {
            let b = input(&seeds, t.tokens, seed, &edits);
            let saved = save(t.name, &b);
            let (name, len, saved) = (t.name, b.len(), saved.display());
            let (filter, keep) = (test_filter(t.name), corpus_dir(t.name));
            let (preview, seed) = (preview(&b), seed % seeds.len());
            let at = LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let at = if at.is_empty() {
                String::new()
            } else {
                format!(" (last panic at {at})")
            };
            panic!(
                "{name}: {why}{at}\ninput ({len} bytes, saved as {saved}; replay it with \
                 FSPROF_FUZZ_REPLAY={saved} cargo nextest run -p fsprof-fuzz {filter}, \
                 and keep it in {} once fixed): {preview}\nedits of seed {seed}: {edits:?}",
                keep.display()
            );
        }
    }
}

/// The test of `tests/fuzz.rs` that runs the target, as a nextest filter.
fn test_filter(name: &str) -> String {
    let test = match name {
        "profile" => "profile_files_load_and_render",
        "trace" => "trace_files_read_print_and_compile",
        "codec" => "trace_records_decode",
        "chunks" => "shim_chunk_files_parse",
        "counters" => "shim_counter_files_read",
        "strace" => "strace_logs_import",
        "fio" => "fio_iologs_import",
        "btf" => "kernel_btf_parses",
        "replay" => "replay_files_read",
        "calibration" => "calibration_files_load_and_label",
        "mountinfo" => "mountinfo_parses",
        other => other,
    };
    format!("-E 'test(={test})'")
}

/// Runs `f` with panics kept quiet (proptest turns each into a failed
/// case, and shrinking one makes hundreds), except for where the last one
/// was, which a failure's message names.
fn quietly<T>(f: impl FnOnce() -> T) -> T {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(|info| {
        if let Some(l) = info.location() {
            *LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()) = l.to_string();
        }
    }));
    let out = f();
    std::panic::set_hook(previous);
    out
}

static LAST_PANIC: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

/// Writes a failing input where it can be found again.
fn save(name: &str, b: &[u8]) -> PathBuf {
    let dir = fsprof_testkit::target_dir().join("fuzz-failures");
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!(
        "{name}-{:016x}",
        rng_seed(&String::from_utf8_lossy(b))
    ));
    let _ = std::fs::write(&path, b);
    path
}

/// The first bytes of an input, escaped.
fn preview(b: &[u8]) -> String {
    let head: String = b
        .iter()
        .take(400)
        .flat_map(|&c| std::ascii::escape_default(c))
        .map(char::from)
        .collect();
    if b.len() > 400 {
        format!("{head}...")
    } else {
        head
    }
}
