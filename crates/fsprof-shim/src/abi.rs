//! Rust mirror of `shim/abi.h`: the control file `fsprof run` writes and the
//! per-process counter files the shim writes. `tests` check every size and
//! offset against the compiled shim.

use fsprof_core::ops::libc::{DATA_OPS, DATA_OP_COUNT, OPS};

pub const ABI_VERSION: u32 = 2;
pub const CTL_MAGIC: u64 = 0x314c_5443_5250_5346; // "FSPRCTL1"
pub const PROC_MAGIC: u64 = 0x3143_5250_5250_5346; // "FSPRPRC1"
/// Environment variable naming the run directory.
pub const ENV: &str = "FSPROF_SHM";
pub const CTL_NAME: &str = "control";
pub const PROC_HDR_SIZE: usize = 4096;
pub const SLOT_HDR_SIZE: usize = 64;
pub const EXE_MAX: usize = 512;
pub const CMDLINE_MAX: usize = 2048;
/// Thread slots per process, the shared slot 0 included. Threads beyond
/// this share slot 0 (atomic adds: slower, never lossy). `fsprof run`'s
/// choice, handed to the shim in the control file; the shim accepts any
/// value from 2 (slot 0 and one of its own).
pub const MAX_SLOTS: u32 = 256;
const _: () = assert!(MAX_SLOTS >= 2);
/// `ns = ticks * tsc_mult >> TICK_SHIFT` (`FSPROF_TICK_SHIFT`): the shim
/// refuses a control file with another shift.
pub const TICK_SHIFT: u32 = 32;

/// Value tables (`FSPROF_CORR_*` in abi.h): per thread slot, after the op
/// counters, one `CORR_LAT × CORR_VAL` table of u64 per (data op, kind).
/// Cell index 0 = value 0, 1 = value 1, k ≥ 2 = `(2^(k-2), 2^(k-1)]`; the
/// last index also holds larger values. Kind 0 = request size, 1 = seek
/// distance.
pub const CORR_LAT: usize = 40;
pub const CORR_VAL: usize = 42;
pub const CORR_KINDS: usize = 2;
pub const CORR_CELLS: usize = CORR_LAT * CORR_VAL;
/// The data ops with value tables, in table order (`FSPROF_CORR_OPS_LIST`).
pub const CORR_OPS: [&str; DATA_OP_COUNT] = DATA_OPS;
pub const CORR_MAX_OPS: usize = 16;

/// Bytes of a slot's value tables.
pub fn corr_size() -> usize {
    CORR_OPS.len() * CORR_KINDS * CORR_CELLS * 8
}

/// fds whose position each slot tracks; their state (16 bytes each, the
/// shim's private scratch) follows the value tables.
pub const FD_TRACK: usize = 1024;
pub const FD_STATE_SIZE: usize = 16;

/// Bucket index (`fsprof_core::JointHistogram` convention: -2 = 0, -1 = 1,
/// i = `(2^i, 2^(i+1)]`) of value-table cell `k`.
pub fn corr_index(k: usize) -> i32 {
    k as i32 - 2
}

pub const CLOCK_MONOTONIC: u32 = 0;
pub const CLOCK_TSC: u32 = 1;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ControlHeader {
    pub magic: u64,
    pub abi_version: u32,
    pub resolution: u32,
    pub nbuckets: u32,
    pub clock: u32,
    pub tsc_mult: u64,
    pub tsc_shift: u32,
    pub max_slots: u32,
    pub next_seq: u64,
    // thresholds: [u64; nbuckets] follow
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ProcHeader {
    pub magic: u64,
    pub abi_version: u32,
    pub hdr_size: u32,
    pub nops: u32,
    pub nbuckets: u32,
    pub ctr_size: u32,
    pub max_slots: u32,
    pub slot_size: u64,
    pub pid: i32,
    pub ppid: i32,
    pub start_ns: u64,
    pub slots_used: u32,
    pub ready: u32,
    pub seq: u64,
    pub exe_len: u32,
    pub cmdline_len: u32,
    pub corr_ops: u32,
    pub corr_lat: u32,
    pub corr_val: u32,
    /// Offset of the value tables inside a slot.
    pub corr_off: u32,
    pub exe: [u8; EXE_MAX],
    pub cmdline: [u8; CMDLINE_MAX],
}

/// Counter words at the start of each op's record; buckets follow.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CtrHeader {
    pub pre: u64,
    pub post: u64,
    pub errors: u64,
    pub total_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub zero: u64,
    pub reserved: u64,
}

/// Bytes of one op's counters for `nbuckets` buckets (cache-line padded).
pub fn ctr_size(nbuckets: u32) -> usize {
    (std::mem::size_of::<CtrHeader>() + nbuckets as usize * 8 + 63) & !63
}

/// Layout report of the compiled shim (`fsprof_shim_abi`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    pub control_size: u32,
    pub ctr_size: u32,
    pub proc_size: u32,
    pub off_proc_slots_used: u32,
    pub off_proc_ready: u32,
    pub off_proc_exe: u32,
    pub off_proc_cmdline: u32,
    pub off_ctl_next_seq: u32,
    pub off_ctl_thresholds: u32,
    pub off_ctr_buckets: u32,
    pub nops: u32,
    pub off_proc_corr_ops: u32,
    pub corr_ops: u32,
    pub corr_lat: u32,
    pub corr_val: u32,
    /// Index into [`OPS`] of each of [`CORR_OPS`].
    pub corr_op_index: [u32; CORR_MAX_OPS],
    pub abi_version: u32,
    pub tick_shift: u32,
    pub fd_track: u32,
    pub fd_state_size: u32,
    pub slot_hdr_size: u32,
    pub proc_hdr_size: u32,
    /// Offsets of [`CtrHeader`]'s fields, in declaration order.
    pub off_ctr_fields: [u32; 8],
}

/// The layout this crate assumes, to compare with [`Layout`] from the shim.
pub fn expected_layout() -> Layout {
    use std::mem::{offset_of, size_of};
    Layout {
        control_size: size_of::<ControlHeader>() as u32,
        ctr_size: size_of::<CtrHeader>() as u32,
        proc_size: size_of::<ProcHeader>() as u32,
        off_proc_slots_used: offset_of!(ProcHeader, slots_used) as u32,
        off_proc_ready: offset_of!(ProcHeader, ready) as u32,
        off_proc_exe: offset_of!(ProcHeader, exe) as u32,
        off_proc_cmdline: offset_of!(ProcHeader, cmdline) as u32,
        off_ctl_next_seq: offset_of!(ControlHeader, next_seq) as u32,
        off_ctl_thresholds: size_of::<ControlHeader>() as u32,
        off_ctr_buckets: size_of::<CtrHeader>() as u32,
        nops: OPS.len() as u32,
        off_proc_corr_ops: offset_of!(ProcHeader, corr_ops) as u32,
        corr_ops: CORR_OPS.len() as u32,
        corr_lat: CORR_LAT as u32,
        corr_val: CORR_VAL as u32,
        abi_version: ABI_VERSION,
        tick_shift: TICK_SHIFT,
        fd_track: FD_TRACK as u32,
        fd_state_size: FD_STATE_SIZE as u32,
        slot_hdr_size: SLOT_HDR_SIZE as u32,
        proc_hdr_size: PROC_HDR_SIZE as u32,
        off_ctr_fields: [
            offset_of!(CtrHeader, pre) as u32,
            offset_of!(CtrHeader, post) as u32,
            offset_of!(CtrHeader, errors) as u32,
            offset_of!(CtrHeader, total_ns) as u32,
            offset_of!(CtrHeader, min_ns) as u32,
            offset_of!(CtrHeader, max_ns) as u32,
            offset_of!(CtrHeader, zero) as u32,
            offset_of!(CtrHeader, reserved) as u32,
        ],
        corr_op_index: {
            let mut idx = [0u32; CORR_MAX_OPS];
            for (k, name) in CORR_OPS.iter().enumerate() {
                idx[k] = OPS
                    .iter()
                    .position(|o| o.name == *name)
                    .expect("every data op is an op") as u32;
            }
            idx
        },
    }
}

const _: () = assert!(std::mem::size_of::<ProcHeader>() <= PROC_HDR_SIZE);
const _: () = assert!(CORR_OPS.len() <= CORR_MAX_OPS);
