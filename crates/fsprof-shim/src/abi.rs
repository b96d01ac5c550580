//! Rust mirror of `shim/abi.h`: the control file `fsprof run` writes and the
//! per-process counter files the shim writes. `tests` check every size and
//! offset against the compiled shim.

use fsprof_core::ops::libc::{DATA_OPS, DATA_OP_COUNT, OPS};

pub const ABI_VERSION: u32 = 13;
pub const CTL_MAGIC: u64 = 0x314c_5443_5250_5346; // "FSPRCTL1"
pub const PROC_MAGIC: u64 = 0x3143_5250_5250_5346; // "FSPRPRC1"
/// Environment variable describing the run directory and its control file:
/// `<dev>:<ino>:<uid>:<ctl_ino>:<path>` (see [`env_value`]).
pub const ENV: &str = "FSPROF_SHM";
pub const CTL_NAME: &str = "control";
pub const EXE_MAX: usize = 512;
pub const CMDLINE_MAX: usize = 2048;
/// Thread slots per process, the shared slot 0 included. Threads beyond
/// this share slot 0 (atomic adds: slower, never lossy). `fsprof run`'s
/// choice, handed to the shim in the control file; the shim accepts any
/// value from 2 (slot 0 and one of its own) to [`MAX_SLOTS_LIMIT`].
pub const MAX_SLOTS: u32 = 256;
const _: () = assert!(MAX_SLOTS >= 2);
/// `ns = ticks * tsc_mult >> TICK_SHIFT` (`FSPROF_TICK_SHIFT`): the shim
/// refuses a control file with another shift.
pub const TICK_SHIFT: u32 = 32;
/// The most slots the shim accepts (entries of the slot directory).
pub const MAX_SLOTS_LIMIT: u32 = 256;
pub const MAX_RESOLUTION: u32 = 16;

/// Counter-file layout: a header, the first thread's slot record (slot 1)
/// at [`PROC_HDR_SIZE`] on the same page, then the other records, the
/// slot directory (u32 file offsets of the slot records, at
/// [`ProcHeader::dir_off`], made for a second slot), counters and value
/// tables carved from chunks reserved before use. Every byte below the
/// file's size is allocated.
pub const PROC_HDR_SIZE: usize = 2688;
/// Bytes of a new process's first chunk (header included): an arena block,
/// or the start of its own file; later chunks double, up to 8 MiB.
pub const FIRST_CHUNK: usize = 128 * 1024;

/// The arena (`FSPROF_ARENA_OFF` in abi.h): blocks of the control file
/// after this offset, each the first chunk of one process image, offered
/// to the processes through [`RING`] entries of the control header.
pub const ARENA_OFF: usize = 64 * 1024;
pub const RING: usize = 1024;
/// The most blocks the shim maps (its arena's address space).
pub const MAX_BLOCKS: u32 = 1024;

/// Value tables (`FSPROF_CORR_*` in abi.h): one table of u64 per data op,
/// allocated the first time a thread makes that data call: `CORR_LAT` rows
/// by latency, each the `CORR_VAL` cells of kind 0 then those of kind 1
/// ([`corr_at`]). Cell index 0 = value 0, 1 = value 1, k ≥ 2 =
/// `(2^(k-2), 2^(k-1)]`; the last index also holds larger values. Kind 0 =
/// request size, 1 = seek distance.
pub const CORR_LAT: usize = 40;
pub const CORR_VAL: usize = 42;
pub const CORR_KINDS: usize = 2;
pub const CORR_CELLS: usize = CORR_LAT * CORR_VAL;
/// The data ops with value tables, in table order (`FSPROF_CORR_OPS_LIST`).
pub const CORR_OPS: [&str; DATA_OP_COUNT] = DATA_OPS;
pub const CORR_MAX_OPS: usize = 16;

/// Bytes of one value table (both kinds of one data op).
pub fn corr_size() -> usize {
    CORR_KINDS * CORR_CELLS * 8
}

/// Bytes of one latency row of a value table (both kinds).
pub const CORR_ROW: usize = CORR_KINDS * CORR_VAL * 8;

/// The cell index in a value table of (kind, latency cell, value cell).
pub fn corr_at(kind: usize, lat: usize, val: usize) -> usize {
    (lat * CORR_KINDS + kind) * CORR_VAL + val
}

/// fds whose position each thread tracks (16 bytes of the shim's private
/// scratch each).
pub const FD_TRACK: usize = 1024;
pub const FD_STATE_SIZE: usize = 16;

/// The ops on a descriptor whose calls on non-files are counted apart
/// (the shim's `fdops.def` is written from this list).
pub use fsprof_core::ops::libc::FD_OPS;

/// What a descriptor is, as the shim classifies it (`enum fsprof_fd_class`).
/// Calls on non-files are counted under the fd ops' twins, one per class
/// below, in this order.
pub const NONFILE_CLASSES: [&str; 4] = ["pipe", "socket", "device", "other"];

/// Bucket index (`fsprof_core::JointHistogram` convention: -2 = 0, -1 = 1,
/// i = `(2^i, 2^(i+1)]`) of value-table cell `k`.
pub fn corr_index(k: usize) -> i32 {
    k as i32 - 2
}

/// The cell index of `v` on an axis of `n` cells, as the shim files it
/// (record.h, `corr_cell`): 0 for 0, 1 for 1, `k` for `(2^(k-2), 2^(k-1)]`,
/// the last cell for anything larger.
pub fn corr_cell(v: u64, n: usize) -> usize {
    let k = if v <= 1 {
        v as usize
    } else {
        65 - (v - 1).leading_zeros() as usize
    };
    k.min(n - 1)
}

pub const CLOCK_MONOTONIC: u32 = 0;
pub const CLOCK_TSC: u32 = 1;

/// The control file's `faults` word (`shim/abi.h`, enum fsprof_faults).
pub const FAULTS_NONE: u32 = 0;
pub const FAULTS_ARMED: u32 = 1;
pub const FAULTS_REQUESTED: u32 = 2;
pub const FAULTS_ATTACHED: u32 = 3;
pub const FAULTS_FAILED: u32 = 4;
pub const FAULTS_STALLED: u32 = 5;
/// How long a process about to map a file waits for the programs.
pub const FAULTS_WAIT_MS: u32 = 250;
pub const RUN_ACTIVE: u32 = 0;
pub const RUN_ENDED: u32 = 1;

/// Why a process was not profiled (`enum fsprof_lost_what`).
pub const LOST_SETUP: u32 = 1;
pub const LOST_UID: u32 = 2;
pub const LOST_EXEC: u32 = 3;
pub const LOST_MAX: usize = 64;
pub const LOST_EXE: usize = 104;

/// A process the run could not profile, as recorded in the control file.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Lost {
    pub pid: i32,
    pub ppid: i32,
    /// [`LOST_SETUP`], [`LOST_UID`], [`LOST_EXEC`]; 0 = not written yet.
    pub what: u32,
    pub err: i32,
    pub uid: u32,
    pub exe_len: u32,
    pub exe: [u8; LOST_EXE],
}

impl Default for Lost {
    fn default() -> Self {
        Lost {
            pid: 0,
            ppid: 0,
            what: 0,
            err: 0,
            uid: 0,
            exe_len: 0,
            exe: [0; LOST_EXE],
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
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
    pub state: u32,
    pub lost_max: u32,
    pub lost_count: u64,
    /// [`FIRST_CHUNK`].
    pub block_size: u32,
    /// Blocks the arena may hold (0: none; processes make files).
    pub max_blocks: u32,
    /// Offers taken by processes (atomic, written by the shim).
    pub ring_head: u64,
    /// Offers made (written by `fsprof run`, release).
    pub ring_tail: u64,
    /// Blocks `0..blocks_ready` have their pages (written by `fsprof run`,
    /// release); a process that takes a block above makes them itself.
    pub blocks_ready: u32,
    /// Counter files processes made (atomic, counted before each is).
    pub files: u32,
    /// The offers' low water: a process whose take leaves exactly
    /// `wake_at` offers (0: none does) adds 1 to `wake` and wakes its
    /// futex waiters (`fsprof run`, asleep until the ring runs low).
    /// Beside `ring_head`, in the page the take touches anyway. Written by
    /// any process: fsprof trusts neither word.
    pub wake: u32,
    pub wake_at: u32,
    /// Offer `i` is block `ring[i % RING]`.
    pub ring: [u32; RING],
    pub lost: [Lost; LOST_MAX],
    /// `fsprof trace`'s page-fault programs, a futex word ([`FAULTS_NONE`]
    /// ...): attached when a traced process first maps a file.
    pub faults: u32,
    /// Process images that stopped waiting for them (atomic, the shim's).
    pub faults_late: u32,
    // thresholds: [u64; nbuckets] follow
}

impl Default for ControlHeader {
    fn default() -> Self {
        ControlHeader {
            magic: 0,
            abi_version: 0,
            resolution: 0,
            nbuckets: 0,
            clock: 0,
            tsc_mult: 0,
            tsc_shift: 0,
            max_slots: 0,
            next_seq: 0,
            state: RUN_ACTIVE,
            lost_max: LOST_MAX as u32,
            lost_count: 0,
            block_size: FIRST_CHUNK as u32,
            max_blocks: 0,
            ring_head: 0,
            ring_tail: 0,
            blocks_ready: 0,
            files: 0,
            wake: 0,
            wake_at: 0,
            ring: [0; RING],
            lost: [Lost::default(); LOST_MAX],
            faults: FAULTS_NONE,
            faults_late: 0,
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ProcHeader {
    pub magic: u64,
    pub abi_version: u32,
    pub hdr_size: u32,
    /// File ops (ops.def entries).
    pub nops: u32,
    /// Counter indices: the file ops, then [`NONFILE_CLASSES`] twins per
    /// fd op.
    pub nctr: u32,
    pub nfdops: u32,
    pub nbuckets: u32,
    pub ctr_size: u32,
    pub max_slots: u32,
    pub pid: i32,
    pub ppid: i32,
    /// The run's clock when the image set up: TSC ticks under the TSC
    /// clock, CLOCK_MONOTONIC ns under the monotonic one.
    pub start_ticks: u64,
    pub seq: u64,
    pub nslots: u32,
    pub ready: u32,
    /// Calls not counted because there was no room for their counters.
    pub dropped: u64,
    /// errno of the first failure to make room.
    pub dropped_err: i32,
    pub exe_len: u32,
    pub cmdline_len: u32,
    pub corr_ops: u32,
    pub corr_lat: u32,
    pub corr_val: u32,
    /// Bytes of a slot record that readers read: its header and offsets.
    pub slot_size: u32,
    /// 1 + the arena block holding the first chunk; 0: the file holds it.
    pub block: u32,
    /// 1 once the file `p<seq>` exists.
    pub file: u32,
    /// Bytes of the first chunk handed out from its start (an arena
    /// block's, to zero).
    pub used: u32,
    /// Bytes of the first chunk handed out from its end (its tables).
    pub top_used: u32,
    /// The slot directory's offset (`max_slots` u32 entries, entry 1
    /// unused); 0 until a process makes a slot other than slot 1.
    pub dir_off: u32,
    pub exe: [u8; EXE_MAX],
    pub cmdline: [u8; CMDLINE_MAX],
}

/// Header of a thread slot record; `u32 ctr_off[nctr]` and
/// `u32 corr_off[ncorr]` follow.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SlotHeader {
    /// 0 (abi.h): the shim no longer asks for the thread's id.
    pub tid: u32,
    pub shared: u32,
    pub nctr: u32,
    pub ncorr: u32,
    pub own: OwnSample,
    /// Which offsets are set: bit `k` for `ctr_off[k]`, bit `nctr + c`
    /// for `corr_off[c]`. The shim sets a bit before it writes its offset,
    /// so an offset outside the bitmap is 0 (abi.h).
    pub used: [u64; SLOT_USED_WORDS],
}

/// Words of [`SlotHeader::used`].
pub const SLOT_USED_WORDS: usize = 16;

/// The shim's own cost timed inside a sample of a thread's calls (abi.h,
/// `struct fsprof_own`): about one call in [`OWN_EVERY`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OwnSample {
    /// Sampled calls summed in `ns` and `sq_ns`.
    pub samples: u64,
    /// Sum of their own cost, ns.
    pub ns: u64,
    /// Sum of squares, ns².
    pub sq_ns: u64,
    /// Sampled calls whose window held [`OWN_CUT_NS`] or more: an
    /// interrupt, a preemption or a one-off set-up, not bookkeeping.
    pub over: u64,
}

impl OwnSample {
    /// Adds another thread's or process's samples (saturating: the words
    /// come from a file the traced program can write).
    pub fn add(&mut self, o: &OwnSample) {
        self.samples = self.samples.saturating_add(o.samples);
        self.ns = self.ns.saturating_add(o.ns);
        self.sq_ns = self.sq_ns.saturating_add(o.sq_ns);
        self.over = self.over.saturating_add(o.over);
    }
}

/// Gap between two sampled calls of a thread: `OWN_GAP_MIN` + 0..`OWN_GAP_SPAN`-1.
pub const OWN_GAP_MIN: u32 = 48;
pub const OWN_GAP_SPAN: u32 = 32;
/// The mean gap: one call in this many is sampled.
pub const OWN_EVERY: f64 = OWN_GAP_MIN as f64 + (OWN_GAP_SPAN as f64 - 1.0) / 2.0;
pub const OWN_CUT_NS: u32 = 16384;

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

/// Counter indices of the compiled shim: file ops, then the twins.
pub fn nctr() -> usize {
    OPS.len() + FD_OPS.len() * NONFILE_CLASSES.len()
}

/// Readers' part of a slot record.
pub fn slot_size() -> usize {
    std::mem::size_of::<SlotHeader>() + 4 * nctr() + 4 * CORR_OPS.len()
}

/// Where counter index `k` belongs: `None` for a file op (named
/// `OPS[k]`), else the non-file class and the fd op.
pub fn counter_name(k: usize) -> Option<(Option<&'static str>, &'static str)> {
    if k < OPS.len() {
        return Some((None, OPS[k].name));
    }
    let j = k - OPS.len();
    let classes = NONFILE_CLASSES.len();
    let op = FD_OPS.get(j / classes)?;
    Some((Some(NONFILE_CLASSES[j % classes]), op))
}

/// The value of [`ENV`] for a run directory with this identity whose
/// control file is inode `ctl_ino` (on the directory's device).
pub fn env_value(
    dev: u64,
    ino: u64,
    uid: u32,
    ctl_ino: u64,
    path: &std::path::Path,
) -> std::ffi::OsString {
    let mut v = std::ffi::OsString::from(format!("{dev}:{ino}:{uid}:{ctl_ino}:"));
    v.push(path.as_os_str());
    v
}

/// Layout report of the compiled shim (`fsprof_shim_abi`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    pub control_size: u32,
    pub ctr_size: u32,
    pub proc_size: u32,
    pub lost_size: u32,
    pub off_ctl_next_seq: u32,
    pub off_ctl_state: u32,
    pub off_ctl_lost_count: u32,
    pub off_ctl_lost: u32,
    pub off_ctl_thresholds: u32,
    pub off_ctr_buckets: u32,
    pub off_proc_nslots: u32,
    pub off_proc_ready: u32,
    pub off_proc_dropped: u32,
    pub off_proc_exe: u32,
    pub off_proc_cmdline: u32,
    pub off_proc_corr_ops: u32,
    pub off_proc_slot_size: u32,
    pub nops: u32,
    pub nctr: u32,
    pub nfdops: u32,
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
    pub off_slot_own: u32,
    pub own_gap_min: u32,
    pub own_gap_span: u32,
    pub own_cut_ns: u32,
    pub off_slot_used: u32,
    pub slot_used_words: u32,
    pub off_ctl_block_size: u32,
    pub off_ctl_ring_head: u32,
    pub off_ctl_ring_tail: u32,
    pub off_ctl_ring: u32,
    pub off_ctl_blocks_ready: u32,
    pub off_ctl_files: u32,
    pub off_proc_block: u32,
    pub off_proc_file: u32,
    pub off_proc_used: u32,
    pub arena_off: u32,
    pub ring: u32,
    pub max_blocks: u32,
    pub off_ctl_faults: u32,
    pub off_ctl_faults_late: u32,
    pub faults_wait_ms: u32,
}

/// The layout this crate assumes, to compare with [`Layout`] from the shim.
pub fn expected_layout() -> Layout {
    use std::mem::{offset_of, size_of};
    Layout {
        control_size: size_of::<ControlHeader>() as u32,
        ctr_size: size_of::<CtrHeader>() as u32,
        proc_size: size_of::<ProcHeader>() as u32,
        lost_size: size_of::<Lost>() as u32,
        off_ctl_next_seq: offset_of!(ControlHeader, next_seq) as u32,
        off_ctl_state: offset_of!(ControlHeader, state) as u32,
        off_ctl_lost_count: offset_of!(ControlHeader, lost_count) as u32,
        off_ctl_lost: offset_of!(ControlHeader, lost) as u32,
        off_ctl_thresholds: size_of::<ControlHeader>() as u32,
        off_ctr_buckets: size_of::<CtrHeader>() as u32,
        off_proc_nslots: offset_of!(ProcHeader, nslots) as u32,
        off_proc_ready: offset_of!(ProcHeader, ready) as u32,
        off_proc_dropped: offset_of!(ProcHeader, dropped) as u32,
        off_proc_exe: offset_of!(ProcHeader, exe) as u32,
        off_proc_cmdline: offset_of!(ProcHeader, cmdline) as u32,
        off_proc_corr_ops: offset_of!(ProcHeader, corr_ops) as u32,
        off_proc_slot_size: offset_of!(ProcHeader, slot_size) as u32,
        nops: OPS.len() as u32,
        nctr: nctr() as u32,
        nfdops: FD_OPS.len() as u32,
        corr_ops: CORR_OPS.len() as u32,
        corr_lat: CORR_LAT as u32,
        corr_val: CORR_VAL as u32,
        abi_version: ABI_VERSION,
        tick_shift: TICK_SHIFT,
        fd_track: FD_TRACK as u32,
        fd_state_size: FD_STATE_SIZE as u32,
        slot_hdr_size: size_of::<SlotHeader>() as u32,
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
        off_slot_own: offset_of!(SlotHeader, own) as u32,
        own_gap_min: OWN_GAP_MIN,
        own_gap_span: OWN_GAP_SPAN,
        own_cut_ns: OWN_CUT_NS,
        off_slot_used: offset_of!(SlotHeader, used) as u32,
        slot_used_words: SLOT_USED_WORDS as u32,
        off_ctl_block_size: offset_of!(ControlHeader, block_size) as u32,
        off_ctl_ring_head: offset_of!(ControlHeader, ring_head) as u32,
        off_ctl_ring_tail: offset_of!(ControlHeader, ring_tail) as u32,
        off_ctl_ring: offset_of!(ControlHeader, ring) as u32,
        off_ctl_blocks_ready: offset_of!(ControlHeader, blocks_ready) as u32,
        off_ctl_files: offset_of!(ControlHeader, files) as u32,
        off_proc_block: offset_of!(ProcHeader, block) as u32,
        off_proc_file: offset_of!(ProcHeader, file) as u32,
        off_proc_used: offset_of!(ProcHeader, used) as u32,
        arena_off: ARENA_OFF as u32,
        ring: RING as u32,
        max_blocks: MAX_BLOCKS,
        off_ctl_faults: offset_of!(ControlHeader, faults) as u32,
        off_ctl_faults_late: offset_of!(ControlHeader, faults_late) as u32,
        faults_wait_ms: FAULTS_WAIT_MS,
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

// The low water's words lie between `files` and `ring`, in this order
// (shim/abi.h asserts the same; the layout test compares those two).
const _: () = assert!(
    std::mem::offset_of!(ControlHeader, files) + 4 == std::mem::offset_of!(ControlHeader, wake)
        && std::mem::offset_of!(ControlHeader, wake) + 4
            == std::mem::offset_of!(ControlHeader, wake_at)
        && std::mem::offset_of!(ControlHeader, wake_at) + 4
            == std::mem::offset_of!(ControlHeader, ring)
);
const _: () = assert!(std::mem::size_of::<ProcHeader>() <= PROC_HDR_SIZE);
const _: () = assert!(MAX_SLOTS <= MAX_SLOTS_LIMIT);
const _: () = assert!(CORR_OPS.len() <= CORR_MAX_OPS);
const _: () = assert!(
    std::mem::size_of::<ControlHeader>() + 8 * (64 * MAX_RESOLUTION as usize + 1) <= ARENA_OFF
);
const _: () = assert!(
    OPS.len() + FD_OPS.len() * NONFILE_CLASSES.len() + CORR_OPS.len() <= 64 * SLOT_USED_WORDS
);
