//! Fuzz targets for every reader of bytes fsprof did not write itself in
//! this process: profile files (then every rendering of them), trace files
//! and their record codec, the shim's chunk and counter files (shared with
//! the traced program), strace and fio imports, kernel BTF, compiled replay
//! files, calibration files, bench results and the mount table.
//!
//! Each target ([`targets`]) is one function from bytes to `()` that
//! panics when a property breaks: the reader must answer with a value or a
//! one-line error, never a panic, an overflow, a hang, or an allocation far
//! beyond its input (a length field that claims gigabytes must cost
//! nothing until the bytes are there). Two drivers share those functions:
//!
//! - the test suite (`tests/fuzz.rs`, run by `cargo nextest` and so by
//!   `scripts/test-all`): [`engine::run`] mutates seed inputs that the
//!   writers themselves produce ([`seeds`]) with structure-blind edits and
//!   target-specific tokens ([`mutate`]), for a fixed number of cases from a
//!   fixed seed, so a run is reproducible and bounded in time; a failure is
//!   shrunk and saved for replay. `FSPROF_FUZZ_CASES` runs more.
//! - cargo-fuzz (`fuzz/`, coverage-guided, for long local runs): each
//!   fuzz target calls the same function.
//!
//! Memory is measured by the counting allocator [`alloc::Counting`], which
//! the test binary installs.
//!
//! Hand-written rather than a fuzzing crate's engine: cargo-fuzz needs a
//! nightly compiler's sanitizer flags, which CI does not have; proptest
//! (already the workspace's property-test crate) brings the fixed seed,
//! the case budget and the shrinking.

pub mod alloc;
pub mod engine;
pub mod mutate;
pub mod seeds;
pub mod targets;

pub use engine::{run, Target};
