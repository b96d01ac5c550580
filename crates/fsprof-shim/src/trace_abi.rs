//! Rust mirror of `shim/trace_abi.h`: the chunk files the shim writes for
//! `fsprof trace` and the records in them. `tests` check every size and
//! offset against the compiled shim.

use std::mem::{offset_of, size_of};

pub const TRACE_ABI_VERSION: u32 = 4;
pub const TCHUNK_MAGIC: u64 = 0x3143_5248_5250_5346; // "FSPRHRC1"
/// Environment variable that turns recording on: `none`, `digest`, `full`.
pub const TRACE_ENV: &str = "FSPROF_TRACE";
pub const TCHUNK_SIZE: u32 = 1 << 20;
pub const TCHUNK_HDR: usize = 128;
/// A process image's first chunk: the last `TWIN_SIZE` bytes of its arena
/// block, when it has one (`shim/trace_abi.h`, FSPROF_TWIN_SIZE).
pub const TWIN_SIZE: usize = 16 << 10;
/// Chunk files are `t<seq>` in the run directory.
pub const TCHUNK_PREFIX: &str = "t";
/// Emptied chunk files handed back to the shim: `f0` .. `f<TFREE_SLOTS-1>`.
pub const TFREE_PREFIX: &str = "f";
pub const TFREE_SLOTS: u64 = 10;
/// The address a traced process's system call reads, once, before its
/// first file mapping: fsprof-kernel's `faults::MAPPING_MARK`.
pub const TMAP_MARK: u64 = 0x5f0;

pub const TREC_PROC: u16 = 0xF001;
pub const TREC_FD: u16 = 0xF002;
pub const TREC_MAPPED: u16 = 0xF003;

pub const TI_STR: u16 = 1;
pub const TI_DATA: u16 = 2;
pub const TI_DIGEST: u16 = 3;
pub const TI_STAT: u16 = 4;
pub const TI_RESULT: u16 = 5;
pub const TI_CWD: u16 = 6;
pub const TI_EXE: u16 = 7;
pub const TI_ARGV: u16 = 8;
pub const TI_PATH: u16 = 9;
/// No longer written (trace_abi.h); kept so that the number is not reused.
pub const TI_CLOCK: u16 = 10;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ChunkHeader {
    pub magic: u64,
    pub abi_version: u32,
    pub hdr_size: u32,
    pub proc_seq: u64,
    pub pid: i32,
    pub tid: i32,
    pub index: u32,
    pub sealed: u32,
    pub committed: u64,
    pub size: u64,
    pub dropped: u64,
    pub dropped_after: u64,
    /// Orders a thread's chunks (files are named after it too).
    pub seq: u64,
    pub reserved: [u64; 6],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RecordHeader {
    pub len: u32,
    pub kind: u16,
    pub nargs: u8,
    pub failed: u8,
    pub t0: u64,
    pub t1: u64,
    pub ret: i64,
    pub err: i32,
    pub nitems: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ItemHeader {
    pub tag: u16,
    pub arg: u16,
    pub len: u32,
}

/// Layout report of the compiled shim (`fsprof_shim_trace_abi`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TraceLayout {
    pub chunk_hdr: u32,
    pub rec_hdr: u32,
    pub item_hdr: u32,
    pub off_committed: u32,
    pub off_sealed: u32,
    pub off_dropped: u32,
    pub off_proc_seq: u32,
    pub off_rec_t0: u32,
    pub off_rec_ret: u32,
    pub off_rec_err: u32,
    pub off_rec_nitems: u32,
    pub chunk_size: u32,
    pub nops: u32,
    pub off_dropped_after: u32,
    pub map_mark: u32,
}

/// The layout this crate assumes, to compare with the shim's.
pub fn expected_trace_layout() -> TraceLayout {
    TraceLayout {
        chunk_hdr: size_of::<ChunkHeader>() as u32,
        rec_hdr: size_of::<RecordHeader>() as u32,
        item_hdr: size_of::<ItemHeader>() as u32,
        off_committed: offset_of!(ChunkHeader, committed) as u32,
        off_sealed: offset_of!(ChunkHeader, sealed) as u32,
        off_dropped: offset_of!(ChunkHeader, dropped) as u32,
        off_proc_seq: offset_of!(ChunkHeader, proc_seq) as u32,
        off_rec_t0: offset_of!(RecordHeader, t0) as u32,
        off_rec_ret: offset_of!(RecordHeader, ret) as u32,
        off_rec_err: offset_of!(RecordHeader, err) as u32,
        off_rec_nitems: offset_of!(RecordHeader, nitems) as u32,
        off_dropped_after: offset_of!(ChunkHeader, dropped_after) as u32,
        chunk_size: TCHUNK_SIZE,
        nops: crate::OPS.len() as u32,
        map_mark: TMAP_MARK as u32,
    }
}

const _: () = assert!(size_of::<ChunkHeader>() <= TCHUNK_HDR);
