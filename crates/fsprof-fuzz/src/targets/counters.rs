//! The per-process counter files of `fsprof run` (`shim/abi.h`): written
//! by the traced program through the shim, so anything may be in them. A
//! file is read as the collector reads it, and what it gives becomes a
//! profile that renders.

use fsprof_user::reader::read_process;

use super::{clean_error, file_with};
use crate::engine::Target;
use crate::seeds;
use seeds::COUNTER_BUCKETS;

const TOKENS: &[&[u8]] = &[b"FSPRPRC1", b"\x04\0\0\0", b"\0\x20\0\0", b"\x01\0\0\0"];

pub const TARGET: Target = Target::new("counters", seeds::counter_files, TOKENS, check, 800);

pub fn check(bytes: &[u8]) {
    match read_process(&file_with(bytes), COUNTER_BUCKETS) {
        Ok(Some(p)) => {
            let (ops, nonfile) = p.ops();
            let mut profile = fsprof_core::Profile::new(Default::default());
            let layer = profile.layer_mut(fsprof_core::layer::USER);
            layer.ops = ops;
            layer.normalize();
            profile.layer_mut(fsprof_core::layer::USER_NONFILE).ops = nonfile;
            let _ = fsprof_report::after_capture(&profile, 5);
        }
        Ok(None) => {}
        Err(e) => clean_error(&e),
    }
}
