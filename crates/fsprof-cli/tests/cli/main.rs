//! What every `fsprof` command shares (crates/fsprof-cli itself): bad
//! input and its errors, where output goes and what it never overwrites,
//! closed and broken standard streams, the binary's start-up, and what it
//! says about itself (version, completions, man pages), and every command
//! the README shows, run as written.

#[path = "../mount/kit.rs"]
mod mount_kit;

mod broken_stderr;
mod closed_stdout;
mod docs;
mod errors;
mod markdown;
mod no_lost_runs;
mod output_symlinks;
mod output_targets;
mod readme;
mod startup;
