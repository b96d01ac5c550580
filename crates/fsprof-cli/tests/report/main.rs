//! `fsprof report`, `compare`, `merge` and `check` (crates/fsprof-report
//! and crates/fsprof-analysis): the formats, peaks and their labels,
//! comparisons of real runs, and what a shared profile may not do to the
//! reader's terminal.

#[path = "../kernel/loopfs.rs"]
mod loopfs;

mod analysis;
mod classify;
mod command;
mod peak_labels;
mod terminal_escapes;
