//! `fsprof compile` and `fsprof replay` (crates/fsprof-replay): real
//! programs' traces replayed under a root, confined, ordered, verified,
//! and kept within the space the root has.

#[path = "../kernel/loopfs.rs"]
mod loopfs;
#[path = "../mount/kit.rs"]
mod mount_kit;

mod command;
mod descriptors;
mod mmap;
mod output;
mod space;
