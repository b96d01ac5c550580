//! `fsprof trace` and `fsprof import` (crates/fsprof-trace): real
//! programs' calls recorded with their arguments and data, and strace logs
//! and fio iologs read as traces.

mod capture;
mod followed;
mod forks;
mod import;
mod inherited;
