//! `fsprof run` (crates/fsprof-user and the preload shim,
//! crates/fsprof-shim): exact counts, a program that behaves as without
//! fsprof, faults and signals around it, hostile run directories, and the
//! self-overhead figure.

mod counts;
mod faults;
mod intervals;
mod killed;
mod nonfile;
mod rundir_attacks;
mod self_overhead;
mod shim_dir;
mod signals;
mod transparency;
