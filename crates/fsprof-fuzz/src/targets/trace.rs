//! Trace files (`docs/trace-format.md`): opened, read to the end in time
//! order, printed in every `trace show` format, and compiled for replay
//! (whose file is then read back), as `fsprof trace show` and `fsprof
//! compile` would.

use fsprof_trace::compile::compile;
use fsprof_trace::replayfile::Compiled;
use fsprof_trace::show::{Format, Printer};
use fsprof_trace::TraceReader;

use super::{clean_error, file_with};
use crate::engine::Target;
use crate::seeds;

#[rustfmt::skip]
const TOKENS: &[&[u8]] = &[b"fsprtrc\0", b"\x02\0\0\0", b"\x01\0\0\0", b"\x03\0\0\0", b"\x05\0\0\0", b"\"ops\":[", b"\"origin_ns\":", b"\"records\":", b"\"format_version\":", b"\"data\":\"full\""];

pub const TARGET: Target = Target::new("trace", seeds::trace_files, TOKENS, check, 400);

/// Records a case reads at most: enough for any seed, a bound on time for
/// a block that decompresses to many.
const MAX_RECORDS: usize = 20_000;

pub fn check(bytes: &[u8]) {
    let path = file_with(bytes);
    let mut reader = match TraceReader::open(&path) {
        Ok(r) => r,
        Err(e) => return clean_error(&e),
    };
    let header = reader.header.clone();
    let mut printers: Vec<_> = [Format::Text, Format::Jsonl, Format::Csv]
        .into_iter()
        .map(|f| Printer::new(std::io::sink(), f, &header))
        .collect();
    for _ in 0..MAX_RECORDS {
        match reader.next_record() {
            Ok(Some(r)) => {
                for p in &mut printers {
                    p.record(&r).expect("printing to a sink");
                }
            }
            Ok(None) => break,
            Err(e) => return clean_error(&e),
        }
    }
    drop(reader);
    let out = path.with_extension("replay");
    match compile(&path, &out, true) {
        Ok(_) => match Compiled::read(&out) {
            Ok(_) => {}
            Err(e) => panic!("fsprof compile wrote a file it cannot read: {e}"),
        },
        Err(e) => clean_error(&e),
    }
}
