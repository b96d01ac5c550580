//! `fsprof mount` (crates/fsprof-fuse): real FUSE mounts, through which
//! the tests do what applications do and check the results against LOWER
//! and the counts against the workload.

mod kit;

mod access;
mod concurrency;
mod counts;
mod errors;
mod fsx;
mod layers;
mod live;
mod poll;
mod semantics;
