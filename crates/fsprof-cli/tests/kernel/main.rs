//! `fsprof kernel` (crates/fsprof-kernel): the eBPF layers against
//! independent truths (strace's counts, `/sys/block/*/stat`, a tracefs
//! recording of the scheduler) on real programs and loop-mounted file
//! systems.

mod loopfs;

mod attribution;
mod block;
mod command;
mod followed;
mod mapped;
