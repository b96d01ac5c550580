//! `fsprof run` (crates/fsprof-user and the preload shim,
//! crates/fsprof-shim): exact counts, a program that behaves as without
//! fsprof, faults and signals around it, hostile run directories, files
//! made cold before the command (`--cold`), and the self-overhead figure.

#[path = "../kernel/loopfs.rs"]
mod loopfs;

mod cold;
mod counts;
mod faults;
mod intervals;
mod keeper;
mod killed;
mod launch;
mod layout;
mod names;
mod nonfile;
mod pool_layout;
mod rundir_attacks;
mod self_overhead;
mod shim_dir;
mod signals;
mod transparency;
