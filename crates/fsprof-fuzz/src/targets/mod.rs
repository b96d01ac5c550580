//! One module per reader of outside bytes; each has `check(&[u8])`, the
//! property the fuzzers hold it to, and the [`Target`] that runs it.

pub mod btf;
pub mod chunks;
pub mod codec;
pub mod counters;
pub mod files;
pub mod imports;
pub mod profile;
pub mod replay;
pub mod trace;

use std::fmt::Display;

use crate::engine::Target;
use crate::seeds;

/// Error messages longer than this flood a terminal: a reader quotes a
/// bounded part of what it refuses.
pub const MAX_ERROR_CHARS: usize = 2000;

/// A refusal is one line a user can read: not empty, no line break, no
/// control character (it names the input, which may hold anything), not
/// the whole input quoted back.
#[track_caller]
pub fn clean_error(e: &dyn Display) {
    let msg = e.to_string();
    assert!(!msg.trim().is_empty(), "an empty error message");
    assert!(
        !msg.chars().any(char::is_control),
        "the error message has a line break or control character: {msg:?}"
    );
    let n = msg.chars().count();
    assert!(
        n <= MAX_ERROR_CHARS,
        "an error message of {n} characters: {}...",
        msg.chars().take(200).collect::<String>()
    );
}

/// A file holding `bytes`, for readers that take a path: in a directory
/// of this thread's, reused from case to case.
pub fn file_with(bytes: &[u8]) -> std::path::PathBuf {
    thread_local! {
        static DIR: tempfile::TempDir = tempfile::tempdir().expect("a scratch directory");
    }
    let path = DIR.with(|d| d.path().join("input"));
    std::fs::write(&path, bytes).expect("writing the input");
    path
}

#[rustfmt::skip]
pub const PROFILE: Target = Target::new("profile", seeds::profile_files, profile::TOKENS, profile::check, 300);

/// Every target, in the order the test suite runs them.
pub fn all() -> Vec<Target> {
    vec![
        PROFILE,
        trace::TARGET,
        codec::TARGET,
        chunks::TARGET,
        counters::TARGET,
        imports::STRACE,
        imports::FIO,
        btf::TARGET,
        replay::TARGET,
        files::CALIBRATION,
        files::MOUNTINFO,
    ]
}
