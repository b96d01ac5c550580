//! The records of one trace block after decompression (`codec`): decoded
//! one after another until the block ends or a record is refused, each
//! printed as `trace show` prints it.

use fsprof_trace::codec::{decode, Reader};
use fsprof_trace::event::{Op, Record};
use fsprof_trace::show::{json_record, text_call};

use super::clean_error;
use crate::engine::Target;
use crate::seeds;

const TOKENS: &[&[u8]] = &[b"\x01", b"\x02", b"\xff\xff\x03"];

pub const TARGET: Target = Target::new("codec", seeds::record_blocks, TOKENS, check, 3000);

pub fn check(bytes: &[u8]) {
    let mut r = Reader::new(bytes);
    let mut prev = 0;
    while !r.is_empty() {
        match decode(&mut r, &mut prev, Op::count()) {
            Ok(rec) => {
                if let Record::Call(c) = &rec {
                    let _ = text_call(c, 0);
                }
                let _ = json_record(&rec).to_string();
            }
            Err(e) => return clean_error(&e),
        }
    }
}
