//! The chunk files the shim writes while `fsprof trace` runs: shared with
//! the traced program, which may write anything into them. The header is
//! opened as the capture opens it, the committed records read and parsed,
//! and each call encoded into a trace block as the capture does.

use fsprof_shim::trace_abi::TCHUNK_HDR;
use fsprof_trace::chunks::{open_chunk, parse, ChunkInfo, Parsed, TickClock};
use fsprof_trace::codec::encode_call;
use fsprof_trace::show::text_call;

use super::{clean_error, file_with};
use crate::engine::Target;
use crate::seeds;

const TOKENS: &[&[u8]] = &[b"FSPRHRC1", b"\x01\xf0", b"\x02\xf0", b"\x02\0\0\0"];

pub const TARGET: Target = Target::new("chunks", seeds::chunk_files, TOKENS, check, 2000);

pub fn check(bytes: &[u8]) {
    // A tick clock that is not the identity (1.5 ns a tick, from 2^40).
    #[rustfmt::skip]
    let (info, clock) = (
        ChunkInfo { proc_seq: 1, pid: 7, tid: 8, dropped: 0 },
        TickClock { mult: 3 << 31, ref_ticks: 1 << 40, ref_mono: 5 },
    );
    // The records alone, as if the header had been read.
    parse_all(&info, &bytes[TCHUNK_HDR.min(bytes.len())..], &clock);
    // The whole file, as the capture opens it.
    match open_chunk(&file_with(bytes)) {
        Ok(Some(chunk)) => {
            let mut body = Vec::new();
            match chunk.read(0, chunk.committed_now(), &mut body) {
                Ok(()) => parse_all(&chunk.info, &body, &clock),
                Err(e) => clean_error(&e),
            }
            let _ = (chunk.sealed_now(), chunk.dropped_after_now());
        }
        Ok(None) => {}
        Err(e) => clean_error(&e),
    }
}

fn parse_all(info: &ChunkInfo, body: &[u8], clock: &TickClock) {
    for more in [false, true] {
        let mut block = Vec::new();
        let mut prev = 0;
        let emit = |p: Parsed<'_>| {
            if let Parsed::Call(c) = &p {
                encode_call(&mut block, c, &mut prev);
                let _ = text_call(&c.to_call(), 0);
            }
            let _ = p.to_record();
            Ok(())
        };
        match parse(info, body, more, clock, emit) {
            Ok(n) => assert!(n <= body.len(), "parsed {n} of {} bytes", body.len()),
            Err(e) => clean_error(&e),
        }
    }
}
