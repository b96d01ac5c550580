//! `fsprof agent`: always-on, system-wide capture of the kernel's
//! file-system layers (block per device and op with sizes, the file
//! systems' tracepoint pairs, FUSE; system calls on request), every
//! observation filed under the cgroup v2 of the task that caused it, and
//! served to Prometheus (`--serve-metrics`, native histograms) or pushed to
//! an OpenTelemetry collector (OTLP/HTTP).
//!
//! - [`daemon`]: the life of the process (signals, reload, stop, logging);
//! - [`collector`]: the capture session, the cgroups and the series;
//! - [`registry`]: cgroup ids named while the cgroup exists;
//! - [`labels`]: cgroup paths as systemd units, containers, pods;
//! - [`fold`]: bounded series: top K labels plus `other`, TTL;
//! - [`push`]: OTLP pushes with retry and a bounded buffer;
//! - [`config`]: settings from a file and flags;
//! - [`notify`]: systemd's readiness protocol.

pub mod collector;
pub mod config;
pub mod daemon;
pub mod fold;
pub mod labels;
pub mod notify;
pub mod push;
pub mod registry;

pub use daemon::{run, AgentError, Outcome, RunOptions};
