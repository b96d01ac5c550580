//! Compiled replay files (`fsprof compile`'s output, `fsprof replay`'s
//! input): read and validated, so that every index the replayer follows
//! is in its table.

use fsprof_trace::replayfile::Compiled;

use super::{clean_error, file_with};
use crate::engine::Target;
use crate::seeds;

#[rustfmt::skip]
const TOKENS: &[&[u8]] = &[b"fsprrpl\0", b"\x01\0\0\0", b"\"threads\":", b"\"slots\":", b"\"thread_map\":[[[1,1]]]", b"\"ops\":["];

pub const TARGET: Target = Target::new("replay", seeds::replay_files, TOKENS, check, 1500);

pub fn check(bytes: &[u8]) {
    match Compiled::read(&file_with(bytes)) {
        Ok(c) => c
            .validate()
            .unwrap_or_else(|e| panic!("a file read as valid fails validation: {e}")),
        Err(e) => clean_error(&e),
    }
}
