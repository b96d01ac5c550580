//! The user-layer preload shim.
//!
//! The shim itself is C (`shim/`): interposing variadic libc functions,
//! keeping errno intact and using initial-exec TLS are all natural there, and
//! the traced program does not get a Rust runtime injected into it. This
//! crate compiles it, embeds the resulting shared object, installs it where
//! the dynamic linker can load it, and describes the files it shares with
//! `fsprof run` ([`abi`]).

pub mod abi;
mod install;
mod selftest;
pub mod trace_abi;

pub use install::install;
pub use selftest::{selftest_in_process, LoadedShim, SelfTest};

/// The user layer's op names in the order that indexes the shim's
/// counters: [`fsprof_core::ops::libc::OPS`], from which the build writes
/// the shim's `ops.def`.
pub use fsprof_core::ops::libc::OPS;
include!(concat!(env!("OUT_DIR"), "/shim_hash.rs"));

/// The shim's shared object, built from `shim/*.c` at compile time.
pub static SHIM_SO: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libfsprof_shim.so"));

/// The self-test runner (`runner/selftest.c`): a glibc program that loads
/// the shim and runs its self-test, for an fsprof that cannot load it.
pub static SELFTEST_RUNNER: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/fsprof-selftest"));
