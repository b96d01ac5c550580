//! Traces of file-system calls, and what fsprof does with them.
//!
//! A trace is every call a program made, in order, with its arguments,
//! result, errno and timing ([`event`]). It is captured through the
//! preload shim ([`capture::TraceSource`], `fsprof trace`), or imported
//! from `strace` and fio iolog files ([`import`]); it is stored in a
//! versioned, zstd-compressed file ([`file`], documented in
//! `docs/trace-format.md`) and printed by [`show`]. [`compile`] turns it
//! into the replayable form of Replayfs (command stream, resource table,
//! de-duplicated buffers, initial state, ordering constraints) that
//! `fsprof-replay` runs.
//!
//! The format lives here rather than in fsprof-core: it needs zstd (a C
//! library), and nothing but the trace commands reads traces, so the crates
//! every profile passes through stay free of it.

pub mod capture;
/// Public for the fuzz targets (fsprof-fuzz); the capture is its one user.
pub mod chunks;
pub mod codec;
pub mod compile;
mod dirwatch;
pub mod event;
pub mod faultword;
pub mod file;
pub mod import;
mod initial;
pub mod mapped;
mod reader;
pub mod replayfile;
pub mod resolve;
pub mod show;

pub use event::{Access, Call, Data, Descriptor, FdInfo, Mapped, Op, ProcessInfo, Record};
pub use file::{StagedTrace, TraceError, TraceHeader, TraceReader, TraceWriter};
