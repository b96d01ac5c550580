//! The eBPF programs, generated for the running kernel's tracepoint layouts.
//!
//! Every latency is filed in the kernel: an enter program stores a start
//! time keyed by what pairs the events (thread, request, sector), the exit
//! program computes the latency, its bucket — exactly fsprof's
//! `BucketLayout::index` — and adds it to per-CPU maps keyed by
//! (op, device, bucket). User space only reads the maps; no event is ever
//! copied out.

use std::mem::{offset_of, size_of};

use fsprof_core::BucketLayout;

use crate::insn::{
    helper, Alu, Asm, Insn, Jmp, Label, Size, R0, R1, R10, R2, R3, R4, R5, R6, R7, R8, R9,
};
use crate::tracefs::{Field, Tracepoint};
use crate::Error;

/// Slot number recorded for a 0 ns latency (the histogram's zero bucket).
pub const ZERO_SLOT: u32 = 0xffff;
/// Syscall numbers at or above this are ignored (x32 and garbage ids).
pub const MAX_SYSCALLS: u32 = 1024;

/// Op id spaces: the low 32 bits of an op key; the high 32 bits hold a
/// device number for the block layer.
pub const FS_BASE: u32 = 0x1000;
pub const BLOCK_BASE: u32 = 0x2000;
pub const BLOCK_SIZE_BASE: u32 = 0x3000;
pub const FUSE_BASE: u32 = 0x4000;
/// `block-wait` ops: BLOCK_WAIT_BASE + syscall number ([`crate::charge`]).
pub const BLOCK_WAIT_BASE: u32 = 0x5000;

/// Block request kinds, in op-id order.
pub use fsprof_core::ops::block::KINDS as BLOCK_KINDS;

// Stack layout shared by all programs (offsets from r10).
pub(crate) const FILTER_SCRATCH: i16 = -16; // 16 bytes: comm / small keys
pub(crate) const SAVED: i16 = -136; // 8 bytes: a value kept across `record`
pub(crate) const START_KEY: i16 = -104; // 16 bytes {a, b}
pub(crate) const START_VAL: i16 = -128; // 24 bytes {ts, opkey, extra}
const HIST_KEY: i16 = -32; // 16 bytes {opkey, slot}; stats key = first 8
pub(crate) const ONE: i16 = -40;
const STATS_INIT: i16 = -80; // a StatsValue
const _: () = assert!(STATS_INIT as isize + STATS_VAL_SIZE as isize <= ONE as isize);
pub(crate) const THRESH_KEY: i16 = -84;
const PROBE: i16 = -144; // 8 bytes: probe_read_kernel's destination

/// One op's counters on one CPU, the value of `fsprof_stats` and
/// `fsprof_sysstats`: written by [`emit_stats_add`] and the insert in
/// `emit_stats_hash`, read back by `Session::snapshot`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatsValue {
    /// Observations filed.
    pub count: u64,
    /// Sum of the values (ns, or bytes in `block-size`).
    pub total: u64,
    pub errors: u64,
    pub max: u64,
    /// `!min`, so that an all-zero fresh entry needs no special case: a
    /// larger `!v` is a smaller `v`.
    pub not_min: u64,
}

impl StatsValue {
    /// The value in a map's bytes (native byte order, as the kernel wrote
    /// it); `None` if `b` is too short.
    pub fn from_bytes(b: &[u8]) -> Option<StatsValue> {
        let w = |off: usize| Some(u64::from_ne_bytes(b.get(off..off + 8)?.try_into().ok()?));
        Some(StatsValue {
            count: w(offset_of!(StatsValue, count))?,
            total: w(offset_of!(StatsValue, total))?,
            errors: w(offset_of!(StatsValue, errors))?,
            max: w(offset_of!(StatsValue, max))?,
            not_min: w(offset_of!(StatsValue, not_min))?,
        })
    }
}

/// A field's offset in a [`StatsValue`], for the generated code.
macro_rules! stats_off {
    ($f:ident) => {
        offset_of!(StatsValue, $f) as i16
    };
}

/// Size of the start maps' keys and values, the stats values and the
/// histogram keys.
pub const START_KEY_SIZE: usize = 16;
pub const START_VAL_SIZE: usize = 24;
pub const STATS_VAL_SIZE: usize = size_of::<StatsValue>();
pub const HIST_KEY_SIZE: usize = 16;

/// Which tasks the enter programs accept.
#[derive(Clone, Debug)]
pub enum Filter {
    /// Everything (system-wide).
    All,
    /// Tasks whose tgid is in the targets map (a followed process tree).
    Targets { map_fd: i32 },
    /// Tasks whose comm is exactly this (at most 15 bytes, NUL padded).
    Comm([u8; 16]),
    /// Tasks in the cgroup v2 with this id.
    Cgroup(u64),
}

/// Maps the generated code refers to.
#[derive(Clone, Copy, Debug)]
pub struct Shared {
    pub stats_fd: i32,
    /// Per-CPU array of syscall counters indexed by syscall number: an
    /// array lookup is inlined by the verifier, a hash lookup is a call.
    pub sys_stats_fd: i32,
    pub hist_fd: i32,
    /// Threshold table (one array element), used when r > 1.
    pub thresh_fd: i32,
    /// One u32 array element: nothing is recorded while it is 0 (the
    /// final read stops recording first, so counters and histograms are
    /// read in a consistent state). -1: always record.
    pub on_fd: i32,
    pub resolution: u32,
    /// File by cgroup ([`crate::bycgroup`]): counters keyed `{cgroup,
    /// op}`, histograms `{cgroup, op, bucket}`.
    pub by_cgroup: Option<crate::bycgroup::ByCgroup>,
}

pub(crate) fn ld_field(a: &mut Asm, dst: u8, ctx: u8, f: &Field) -> Result<(), Error> {
    let size = Size::of(f.size).ok_or_else(|| Error::NoTracepoint {
        name: f.name.clone(),
        why: format!("field `{}` has unsupported size {}", f.name, f.size),
    })?;
    a.ldx(size, dst, ctx, f.offset as i16);
    if f.signed && f.size < 8 {
        let sh = 64 - 8 * f.size as i32;
        a.alu_imm(Alu::Lsh, dst, sh);
        a.alu_imm(Alu::Arsh, dst, sh);
    }
    Ok(())
}

fn map_call(
    a: &mut Asm,
    helper_id: i32,
    map_fd: i32,
    key_off: i16,
    val_off: Option<i16>,
    flags: i32,
) {
    a.ld_map(R1, map_fd);
    a.mov(R2, R10);
    a.alu_imm(Alu::Add, R2, key_off as i32);
    if let Some(v) = val_off {
        a.mov(R3, R10);
        a.alu_imm(Alu::Add, R3, v as i32);
        a.mov_imm(R4, flags);
    }
    a.call(helper_id);
}

/// r0 = the map value of the key at r10+`key`, or 0. Clobbers r0-r5.
pub(crate) fn lookup(a: &mut Asm, map_fd: i32, key: i16) {
    map_call(a, helper::MAP_LOOKUP_ELEM, map_fd, key, None, 0);
}

/// Stores the key at r10+`key` -> the value at r10+`val`. Clobbers r0-r5.
pub(crate) fn update(a: &mut Asm, map_fd: i32, key: i16, val: i16, flags: i32) {
    map_call(a, helper::MAP_UPDATE_ELEM, map_fd, key, Some(val), flags);
}

/// Deletes the key at r10+`key`. Clobbers r0-r5.
pub(crate) fn delete(a: &mut Asm, map_fd: i32, key: i16) {
    map_call(a, helper::MAP_DELETE_ELEM, map_fd, key, None, 0);
}

/// dst = *(size *)(src + off), read with bpf_probe_read_kernel (0 if the
/// read fails). Clobbers r0-r5.
pub(crate) fn probe(a: &mut Asm, dst: u8, src: u8, off: u32, size: Size) {
    let bytes = match size {
        Size::B => 1,
        Size::H => 2,
        Size::W => 4,
        Size::DW => 8,
    };
    a.st_imm(Size::DW, R10, PROBE, 0);
    a.mov(R3, src);
    a.alu_imm(Alu::Add, R3, off as i32);
    a.mov(R1, R10);
    a.alu_imm(Alu::Add, R1, PROBE as i32);
    a.mov_imm(R2, bytes);
    a.call(helper::PROBE_READ_KERNEL);
    a.ldx(size, dst, R10, PROBE);
}

/// Opens a tracepoint program: r6 = the context. Returns the builder and
/// the label of the program's `return 0`, which [`end`] binds.
pub(crate) fn begin() -> (Asm, Label) {
    let mut a = Asm::new();
    let out = a.label();
    a.mov(R6, R1);
    (a, out)
}

/// Opens an enter program: [`begin`], then `out` unless the task passes `f`.
pub(crate) fn begin_enter(f: &Filter) -> (Asm, Label) {
    let (mut a, out) = begin();
    emit_filter(&mut a, f, out);
    (a, out)
}

/// Opens an exit program: [`begin`], the recording gate, r9 = now.
pub(crate) fn begin_exit(sh: &Shared) -> (Asm, Label) {
    let (mut a, out) = begin();
    emit_gate(&mut a, sh, out);
    a.call(helper::KTIME_GET_NS);
    a.mov(R9, R0);
    (a, out)
}

/// Opens the exit program of a per-thread pair ([`store_thread_start`]):
/// [`begin_exit`], then the start entry of (this thread, `second`) taken
/// as in [`take_thread_start`].
pub(crate) fn begin_thread_exit(sh: &Shared, start_fd: i32, second: i32) -> (Asm, Label) {
    let (mut a, out) = begin_exit(sh);
    thread_key(&mut a, second);
    take_thread_start(&mut a, start_fd, out);
    if sh.by_cgroup.is_some() {
        crate::bycgroup::store_current(&mut a);
    }
    (a, out)
}

/// One program made of `parts`, each a whole program of its own that
/// begins by saving its context (r1) as [`begin`] does: the attachment's
/// cookie, a part's index, picks the part that runs; any other cookie
/// runs none. A raw tracepoint program can be attached to several
/// tracepoints, and each load costs ~60 µs before any verifying on this
/// project's 2-CPU test machine (the JIT, the program's allocation and
/// symbols), so the fault programs' raw tracepoints share one where the
/// kernel has raw tracepoint cookies (Linux 6.10).
pub(crate) fn by_cookie(parts: &[Vec<Insn>]) -> Vec<Insn> {
    let mut a = Asm::new();
    a.mov(R6, R1);
    a.call(helper::GET_ATTACH_COOKIE);
    a.mov(R1, R6);
    let starts: Vec<Label> = parts.iter().map(|_| a.label()).collect();
    for (i, &l) in starts.iter().enumerate() {
        a.jmp_imm(Jmp::Eq, R0, i as i32, l);
    }
    a.mov_imm(R0, 0);
    a.exit();
    for (part, &l) in parts.iter().zip(&starts) {
        a.bind(l);
        a.extend(part);
    }
    a.finish()
}

/// Closes a program: binds `out` to `return 0`.
pub(crate) fn end(mut a: Asm, out: Label) -> Vec<Insn> {
    a.bind(out);
    a.mov_imm(R0, 0);
    a.exit();
    a.finish()
}

/// START_KEY = {r`first`, `second`}.
pub(crate) fn start_key(a: &mut Asm, first: u8, second: i32) {
    a.stx(Size::DW, R10, START_KEY, first);
    a.st_imm(Size::DW, R10, START_KEY + 8, second);
}

/// START_KEY = {the current pid_tgid, `second`}. Clobbers r0.
pub(crate) fn thread_key(a: &mut Asm, second: i32) {
    a.call(helper::GET_CURRENT_PID_TGID);
    start_key(a, R0, second);
}

/// Jumps to `out` unless the current task passes the filter. Clobbers r0-r5.
pub fn emit_filter(a: &mut Asm, f: &Filter, out: Label) {
    match f {
        Filter::All => {}
        Filter::Targets { map_fd } => {
            a.call(helper::GET_CURRENT_PID_TGID);
            a.alu_imm(Alu::Rsh, R0, 32);
            a.stx(Size::W, R10, FILTER_SCRATCH, R0);
            lookup(a, *map_fd, FILTER_SCRATCH);
            a.jmp_imm(Jmp::Eq, R0, 0, out);
        }
        Filter::Comm(c) => {
            a.mov(R1, R10);
            a.alu_imm(Alu::Add, R1, FILTER_SCRATCH as i32);
            a.mov_imm(R2, 16);
            a.call(helper::GET_CURRENT_COMM);
            for half in 0..2 {
                let want = u64::from_le_bytes(c[half * 8..half * 8 + 8].try_into().unwrap());
                a.ldx(Size::DW, R1, R10, FILTER_SCRATCH + 8 * half as i16);
                a.ld_imm64(R2, want);
                a.jmp_reg(Jmp::Ne, R1, R2, out);
            }
        }
        Filter::Cgroup(id) => {
            a.call(helper::GET_CURRENT_CGROUP_ID);
            a.ld_imm64(R1, *id);
            a.jmp_reg(Jmp::Ne, R0, R1, out);
        }
    }
}

/// r6 = the slot of the value in r7 (slot j = bucket j - 1, ZERO_SLOT for
/// 0), exactly `BucketLayout::index`: floor(log2) by binary search, then
/// at most r threshold comparisons against the same integer table.
/// Clobbers r0-r5; keeps r7-r9.
pub fn emit_bucket(a: &mut Asm, sh: &Shared) {
    let done = a.label();
    let nonzero = a.label();
    a.jmp_imm(Jmp::Ne, R7, 0, nonzero);
    a.mov_imm(R6, ZERO_SLOT as i32);
    a.ja(done);
    a.bind(nonzero);
    a.mov(R1, R7);
    a.mov_imm(R6, 0);
    for s in [32, 16, 8, 4, 2, 1] {
        let skip = a.label();
        a.mov(R2, R1);
        a.alu_imm(Alu::Rsh, R2, s);
        a.jmp_imm(Jmp::Eq, R2, 0, skip);
        a.mov(R1, R2);
        a.alu_imm(Alu::Add, R6, s);
        a.bind(skip);
    }
    let r = sh.resolution;
    if r == 1 {
        // thresholds[p+1] = 2^p, so the slot moves up iff ns is not a power of two.
        a.mov(R1, R7);
        a.alu_imm(Alu::Sub, R1, 1);
        a.alu_reg(Alu::And, R1, R7);
        a.jmp_imm(Jmp::Eq, R1, 0, done);
        a.alu_imm(Alu::Add, R6, 1);
    } else {
        a.alu_imm(Alu::Mul, R6, r as i32);
        a.st_imm(Size::W, R10, THRESH_KEY, 0);
        lookup(a, sh.thresh_fd, THRESH_KEY);
        a.jmp_imm(Jmp::Eq, R0, 0, done);
        for _ in 0..r {
            a.mov(R1, R6);
            a.alu_imm(Alu::Add, R1, 1);
            a.jmp_imm(Jmp::Gt, R1, 64 * r as i32, done);
            a.alu_imm(Alu::Lsh, R1, 3);
            a.mov(R2, R0);
            a.alu_reg(Alu::Add, R2, R1);
            a.ldx(Size::DW, R3, R2, 0);
            a.jmp_reg(Jmp::Le, R7, R3, done);
            a.alu_imm(Alu::Add, R6, 1);
        }
    }
    a.bind(done);
}

/// Bytes of the threshold map's single value for resolution r.
pub fn thresh_value(layout: &BucketLayout) -> Vec<u8> {
    layout
        .thresholds()
        .iter()
        .flat_map(|t| t.to_le_bytes())
        .collect()
}

/// Adds one observation: r7 = value (ns or bytes), r8 = op key, r9 = 1 if
/// the call failed. Clobbers r0-r6.
pub fn emit_record(a: &mut Asm, sh: &Shared) {
    emit_record_with(a, sh, false)
}

/// [`emit_record`] for syscall ops (r8 < MAX_SYSCALLS): counters in the
/// per-CPU array.
pub fn emit_record_sys(a: &mut Asm, sh: &Shared) {
    emit_record_with(a, sh, true)
}

/// Jumps to `out` once recording has been stopped ([`Shared::on_fd`]).
/// Every program that records calls it once, before its first record, so
/// that an event is filed everywhere or nowhere. Clobbers r0-r5.
pub fn emit_gate(a: &mut Asm, sh: &Shared, out: Label) {
    if sh.on_fd < 0 {
        return;
    }
    a.st_imm(Size::W, R10, THRESH_KEY, 0);
    lookup(a, sh.on_fd, THRESH_KEY);
    a.jmp_imm(Jmp::Eq, R0, 0, out);
    a.ldx(Size::W, R1, R0, 0);
    a.jmp_imm(Jmp::Eq, R1, 0, out);
}

fn emit_record_with(a: &mut Asm, sh: &Shared, sys_array: bool) {
    if sh.by_cgroup.is_some() {
        crate::bycgroup::emit_record(a, sh);
        return;
    }
    emit_bucket(a, sh);
    a.stx(Size::DW, R10, HIST_KEY, R8);
    a.stx(Size::DW, R10, HIST_KEY + 8, R6);

    // Per-op counters.
    let hist = a.label();
    if sys_array {
        a.stx(Size::W, R10, FILTER_SCRATCH, R8);
        lookup(a, sh.sys_stats_fd, FILTER_SCRATCH);
        a.jmp_imm(Jmp::Eq, R0, 0, hist);
        emit_stats_add(a);
    } else {
        emit_stats_hash(a, sh, hist, HIST_KEY);
    }
    emit_hist(a, sh, hist, HIST_KEY);
}

/// Counters in the per-op hash under the key at stack offset `key`
/// (the map's key size of it): lookup, else insert (racing inserts
/// retried once as a lookup). Falls through to `hist`'s position.
pub(crate) fn emit_stats_hash(a: &mut Asm, sh: &Shared, hist: Label, key: i16) {
    let stats_new = a.label();
    lookup(a, sh.stats_fd, key);
    a.jmp_imm(Jmp::Eq, R0, 0, stats_new);
    emit_stats_add(a);
    a.ja(hist);
    a.bind(stats_new);
    a.st_imm(Size::DW, R10, STATS_INIT + stats_off!(count), 1);
    a.stx(Size::DW, R10, STATS_INIT + stats_off!(total), R7);
    a.stx(Size::DW, R10, STATS_INIT + stats_off!(errors), R9);
    a.stx(Size::DW, R10, STATS_INIT + stats_off!(max), R7);
    a.mov(R2, R7);
    a.alu_imm(Alu::Xor, R2, -1);
    a.stx(Size::DW, R10, STATS_INIT + stats_off!(not_min), R2);
    update(a, sh.stats_fd, key, STATS_INIT, 1);
    a.jmp_imm(Jmp::Eq, R0, 0, hist);
    // Another CPU created the entry between our lookup and update.
    lookup(a, sh.stats_fd, key);
    a.jmp_imm(Jmp::Eq, R0, 0, hist);
    emit_stats_add(a);
}

/// Histogram bucket of the key at stack offset `key`; binds `hist` at its
/// start.
pub(crate) fn emit_hist(a: &mut Asm, sh: &Shared, hist: Label, key: i16) {
    a.bind(hist);
    count_one(a, sh.hist_fd, key, ONE);
}

/// One more for the key at stack offset `key` in the u64-valued hash
/// `map_fd`: lookup and add, else insert 1 (staged at stack offset `one`;
/// an insert that lost a race with another CPU is retried as a lookup).
/// Clobbers r0-r5.
pub(crate) fn count_one(a: &mut Asm, map_fd: i32, key: i16, one: i16) {
    let end = a.label();
    let new = a.label();
    lookup(a, map_fd, key);
    a.jmp_imm(Jmp::Eq, R0, 0, new);
    a.mov_imm(R1, 1);
    a.atomic_add64(R0, 0, R1);
    a.ja(end);
    a.bind(new);
    a.st_imm(Size::DW, R10, one, 1);
    update(a, map_fd, key, one, 1);
    a.jmp_imm(Jmp::Eq, R0, 0, end);
    lookup(a, map_fd, key);
    a.jmp_imm(Jmp::Eq, R0, 0, end);
    a.mov_imm(R1, 1);
    a.atomic_add64(R0, 0, R1);
    a.bind(end);
}

/// r0 = a [`StatsValue`]: count += 1, total += r7, errors += r9, max, !min.
fn emit_stats_add(a: &mut Asm) {
    a.mov_imm(R1, 1);
    a.atomic_add64(R0, stats_off!(count), R1);
    a.atomic_add64(R0, stats_off!(total), R7);
    a.atomic_add64(R0, stats_off!(errors), R9);
    let nomax = a.label();
    a.ldx(Size::DW, R1, R0, stats_off!(max));
    a.jmp_reg(Jmp::Le, R7, R1, nomax);
    a.stx(Size::DW, R0, stats_off!(max), R7);
    a.bind(nomax);
    let nomin = a.label();
    a.mov(R2, R7);
    a.alu_imm(Alu::Xor, R2, -1);
    a.ldx(Size::DW, R1, R0, stats_off!(not_min));
    a.jmp_reg(Jmp::Le, R2, R1, nomin);
    a.stx(Size::DW, R0, stats_off!(not_min), R2);
    a.bind(nomin);
}

/// Stores START_KEY -> START_VAL. Clobbers r0-r4.
pub(crate) fn store_start(a: &mut Asm, start_fd: i32) {
    update(a, start_fd, START_KEY, START_VAL, 0);
}

/// Looks up START_KEY; on a hit r7 = now(r9) - ts, r8 = op key, the extra
/// word saved at SAVED, and the entry deleted. Jumps to `out` on a miss
/// (no entry, or one already consumed).
/// The entry's timestamp is zeroed first, marking it consumed: a delete
/// can fail (-EBUSY when this CPU interrupted an update of the same
/// bucket), and a consumed entry must not count as in flight.
pub(crate) fn take_start(a: &mut Asm, start_fd: i32, out: Label) {
    take_thread_start(a, start_fd, out);
    delete(a, start_fd, START_KEY);
}

/// Per-thread variant of [`store_start`]: a thread's entry is reused, not
/// re-inserted, because a hash insert and delete per call cost more than
/// the rest of the program. START_VAL+8 and +16 must be filled; takes the
/// timestamp itself, last. Clobbers r0-r5 and r7.
pub(crate) fn store_thread_start(a: &mut Asm, start_fd: i32) {
    let insert = a.label();
    let done = a.label();
    lookup(a, start_fd, START_KEY);
    a.jmp_imm(Jmp::Eq, R0, 0, insert);
    a.mov(R7, R0);
    a.ldx(Size::DW, R1, R10, START_VAL + 8);
    a.stx(Size::DW, R7, 8, R1);
    a.ldx(Size::DW, R1, R10, START_VAL + 16);
    a.stx(Size::DW, R7, 16, R1);
    a.call(helper::KTIME_GET_NS);
    a.stx(Size::DW, R7, 0, R0);
    a.ja(done);
    a.bind(insert);
    a.call(helper::KTIME_GET_NS);
    a.stx(Size::DW, R10, START_VAL, R0);
    store_start(a, start_fd);
    a.bind(done);
}

/// Per-thread variant of [`take_start`]: the entry stays, its timestamp is
/// zeroed to mark it consumed (the map is an LRU, so exited threads' entries
/// age out).
pub(crate) fn take_thread_start(a: &mut Asm, start_fd: i32, out: Label) {
    lookup(a, start_fd, START_KEY);
    a.jmp_imm(Jmp::Eq, R0, 0, out);
    a.ldx(Size::DW, R7, R0, 0);
    a.jmp_imm(Jmp::Eq, R7, 0, out);
    a.ldx(Size::DW, R8, R0, 8);
    a.ldx(Size::DW, R1, R0, 16);
    a.stx(Size::DW, R10, SAVED, R1);
    a.st_imm(Size::DW, R0, 0, 0);
    a.mov(R1, R9);
    a.alu_reg(Alu::Sub, R1, R7);
    a.mov(R7, R1);
}

/// raw_syscalls:sys_enter; `id` is where the syscall number is in the
/// context: a tracepoint record field, or args[1] of the raw tracepoint.
pub fn sys_enter(id: &Field, f: &Filter, start_fd: i32, mask_fd: i32) -> Result<Vec<Insn>, Error> {
    let (mut a, out) = begin_enter(f);
    ld_field(&mut a, R8, R6, id)?;
    a.jmp_imm(Jmp::Ge, R8, MAX_SYSCALLS as i32, out);
    a.stx(Size::W, R10, FILTER_SCRATCH, R8);
    lookup(&mut a, mask_fd, FILTER_SCRATCH);
    a.jmp_imm(Jmp::Eq, R0, 0, out);
    a.ldx(Size::B, R1, R0, 0);
    a.jmp_imm(Jmp::Eq, R1, 0, out);
    thread_key(&mut a, 0);
    a.stx(Size::DW, R10, START_VAL + 8, R8);
    a.st_imm(Size::DW, R10, START_VAL + 16, 0);
    store_thread_start(&mut a, start_fd);
    Ok(end(a, out))
}

/// raw_syscalls:sys_exit; `ret` as `id` in [`sys_enter`]. With
/// `block_wait`, a call that was charged block time ([`crate::charge`])
/// also files it in the `block-wait` layer.
pub fn sys_exit(
    ret: &Field,
    sh: &Shared,
    start_fd: i32,
    block_wait: bool,
) -> Result<Vec<Insn>, Error> {
    let (mut a, out) = begin_thread_exit(sh, start_fd, 0);
    ld_field(&mut a, R9, R6, ret)?;
    emit_errno_flag(&mut a);
    emit_record_sys(&mut a, sh);
    if block_wait {
        // r7 (the latency) and r8 (the syscall number) survive the record.
        a.ldx(Size::DW, R1, R10, SAVED);
        a.jmp_imm(Jmp::Eq, R1, 0, out);
        let capped = a.label();
        a.jmp_reg(Jmp::Le, R1, R7, capped);
        a.mov(R1, R7);
        a.bind(capped);
        a.mov(R7, R1);
        a.alu_imm(Alu::Add, R8, BLOCK_WAIT_BASE as i32);
        a.mov_imm(R9, 0);
        emit_record(&mut a, sh);
    }
    Ok(end(a, out))
}

/// r9 = 1 if r9 holds a -errno (-4095..-1), else 0.
pub(crate) fn emit_errno_flag(a: &mut Asm) {
    let ok = a.label();
    let done = a.label();
    a.jmp_imm(Jmp::Sge, R9, 0, ok);
    a.jmp_imm(Jmp::Slt, R9, -4095, ok);
    a.mov_imm(R9, 1);
    a.ja(done);
    a.bind(ok);
    a.mov_imm(R9, 0);
    a.bind(done);
}

/// The second argument of a raw tracepoint (`struct bpf_raw_tracepoint_args`):
/// the syscall number of sys_enter(regs, id), the return value of
/// sys_exit(regs, ret). Stable kernel ABI, no struct layout needed.
pub fn raw_arg1(name: &str) -> Field {
    Field {
        name: name.into(),
        offset: 8,
        size: 8,
        signed: true,
    }
}

/// `<fs>:X_enter` of pair `idx`: keyed by (thread, pair).
pub fn fs_enter(f: &Filter, start_fd: i32, idx: u32) -> Vec<Insn> {
    let (mut a, out) = begin_enter(f);
    thread_key(&mut a, idx as i32);
    a.st_imm(Size::DW, R10, START_VAL + 8, (FS_BASE + idx) as i32);
    a.st_imm(Size::DW, R10, START_VAL + 16, 0);
    store_thread_start(&mut a, start_fd);
    end(a, out)
}

/// `<fs>:X_exit` of pair `idx`. A `ret` field < 0 counts as an error.
pub fn fs_exit(
    exit: &Tracepoint,
    sh: &Shared,
    start_fd: i32,
    idx: u32,
) -> Result<Vec<Insn>, Error> {
    let (mut a, out) = begin_thread_exit(sh, start_fd, idx as i32);
    match exit.fields.iter().find(|f| f.name == "ret") {
        Some(ret) => {
            let mut ret = ret.clone();
            ret.signed = true;
            ld_field(&mut a, R9, R6, &ret)?;
            a.alu_imm(Alu::Rsh, R9, 63);
        }
        None => a.mov_imm(R9, 0),
    }
    emit_record(&mut a, sh);
    Ok(end(a, out))
}

/// fentry on a kernel function: the same per-thread start entry as
/// [`fs_enter`] (fentry arguments are not needed to time the call).
pub fn fentry_enter(f: &Filter, start_fd: i32, idx: u32) -> Vec<Insn> {
    fs_enter(f, start_fd, idx)
}

/// Offset of the return value in an fexit context: the context is a u64
/// array holding the arguments of the prototype, then the return value.
pub fn fexit_ret_offset(func: &crate::btf::Func) -> i16 {
    8 * func.slots as i16
}

/// fexit on `func`, paired with [`fentry_enter`] of the same `idx`. A
/// return value of -4095..-1 (also as an ERR_PTR) counts as an error.
pub fn fexit_exit(func: &crate::btf::Func, sh: &Shared, start_fd: i32, idx: u32) -> Vec<Insn> {
    use crate::btf::Ret;
    let (mut a, out) = begin_thread_exit(sh, start_fd, idx as i32);
    match func.ret {
        Ret::Void => a.mov_imm(R9, 0),
        Ret::Int(size) => {
            a.ldx(Size::DW, R9, R6, fexit_ret_offset(func));
            // Only the low `size` bytes of the return register are defined.
            if size < 8 {
                let sh = 64 - 8 * size as i32;
                a.alu_imm(Alu::Lsh, R9, sh);
                a.alu_imm(Alu::Arsh, R9, sh);
            }
            emit_errno_flag(&mut a);
        }
        // Only compared, never shifted: the verifier types it as a pointer.
        Ret::Ptr => {
            a.ldx(Size::DW, R9, R6, fexit_ret_offset(func));
            emit_errno_flag(&mut a);
        }
    }
    emit_record(&mut a, sh);
    end(a, out)
}

/// Where a flush is filed in the fallback's (device, sector) key: flushes
/// carry no meaningful sector (traced as 0 at issue and 2^64−1 at
/// completion), so they are paired per device.
const FLUSH_SECTOR: i32 = -2;

/// r4 = BLOCK_BASE + kind from the record's rwbs: an optional leading F
/// (preflush) before the op letter. Clobbers r2-r3.
fn emit_rwbs_kind(a: &mut Asm, tp: &Tracepoint) -> Result<(), Error> {
    let rwbs = tp.field("rwbs")?.offset as i16;
    a.ldx(Size::B, R2, R6, rwbs);
    a.ldx(Size::B, R3, R6, rwbs + 1);
    let classify = a.label();
    let take_second = a.label();
    a.jmp_imm(Jmp::Ne, R2, b'F' as i32, classify);
    for c in [b'W', b'R', b'D', b'N'] {
        a.jmp_imm(Jmp::Eq, R3, c as i32, take_second);
    }
    a.ja(classify);
    a.bind(take_second);
    a.mov(R2, R3);
    a.bind(classify);
    let have = a.label();
    a.mov_imm(R4, (BLOCK_BASE + 4) as i32);
    for (letter, kind) in [(b'R', 0), (b'W', 1), (b'F', 2), (b'D', 3)] {
        let next = a.label();
        a.jmp_imm(Jmp::Ne, R2, letter as i32, next);
        a.mov_imm(R4, (BLOCK_BASE + kind) as i32);
        a.ja(have);
        a.bind(next);
    }
    a.bind(have);
    Ok(())
}

/// START_KEY = (dev, sector), or (dev, FLUSH_SECTOR) when r4 is a flush.
/// Keeps r4.
fn block_key(a: &mut Asm, tp: &Tracepoint) -> Result<(), Error> {
    ld_field(a, R1, R6, tp.field("dev")?)?;
    a.stx(Size::DW, R10, START_KEY, R1);
    let keyed = a.label();
    a.mov_imm(R1, FLUSH_SECTOR);
    a.jmp_imm(Jmp::Eq, R4, (BLOCK_BASE + 2) as i32, keyed);
    ld_field(a, R1, R6, tp.field("sector")?)?;
    a.bind(keyed);
    a.stx(Size::DW, R10, START_KEY + 8, R1);
    Ok(())
}

/// block:block_rq_issue (the fallback of [`crate::blockrq`]). System-wide:
/// requests are issued from plugs, kworkers and interrupt context, not
/// reliably by the task that caused them.
pub fn block_issue(tp: &Tracepoint, start_fd: i32) -> Result<Vec<Insn>, Error> {
    let (mut a, out) = begin();
    a.call(helper::KTIME_GET_NS);
    a.stx(Size::DW, R10, START_VAL, R0);
    emit_rwbs_kind(&mut a, tp)?;
    block_key(&mut a, tp)?;
    ld_field(&mut a, R1, R6, tp.field("bytes")?)?;
    a.stx(Size::DW, R10, START_VAL + 16, R1);
    ld_field(&mut a, R5, R6, tp.field("dev")?)?;
    a.alu_imm(Alu::Lsh, R5, 32);
    a.alu_reg(Alu::Or, R5, R4);
    a.stx(Size::DW, R10, START_VAL + 8, R5);
    store_start(&mut a, start_fd);
    Ok(end(a, out))
}

/// block:block_rq_complete: latency into `block`, request size into
/// `block-size`.
pub fn block_complete(tp: &Tracepoint, sh: &Shared, start_fd: i32) -> Result<Vec<Insn>, Error> {
    let (mut a, out) = begin_exit(sh);
    emit_rwbs_kind(&mut a, tp)?;
    block_key(&mut a, tp)?;
    take_start(&mut a, start_fd, out);
    let mut err = tp.field("error")?.clone();
    err.signed = true;
    ld_field(&mut a, R9, R6, &err)?;
    let ok = a.label();
    a.jmp_imm(Jmp::Eq, R9, 0, ok);
    a.mov_imm(R9, 1);
    a.bind(ok);
    emit_record(&mut a, sh);
    a.ldx(Size::DW, R7, R10, SAVED);
    a.alu_imm(Alu::Add, R8, (BLOCK_SIZE_BASE - BLOCK_BASE) as i32);
    a.mov_imm(R9, 0);
    emit_record(&mut a, sh);
    Ok(end(a, out))
}

pub(crate) fn fuse_key(a: &mut Asm, tp: &Tracepoint) -> Result<(), Error> {
    ld_field(a, R1, R6, tp.field("connection")?)?;
    a.stx(Size::DW, R10, START_KEY, R1);
    ld_field(a, R1, R6, tp.field("unique")?)?;
    a.stx(Size::DW, R10, START_KEY + 8, R1);
    Ok(())
}

/// fuse:fuse_request_send, in the context of the task that needs the
/// reply (by cgroup: the extra word of the start entry is its cgroup).
pub fn fuse_send(
    tp: &Tracepoint,
    f: &Filter,
    sh: &Shared,
    start_fd: i32,
) -> Result<Vec<Insn>, Error> {
    let (mut a, out) = begin_enter(f);
    a.st_imm(Size::DW, R10, START_VAL + 16, 0);
    if sh.by_cgroup.is_some() {
        a.call(helper::GET_CURRENT_CGROUP_ID);
        a.stx(Size::DW, R10, START_VAL + 16, R0);
    }
    fuse_key(&mut a, tp)?;
    ld_field(&mut a, R1, R6, tp.field("opcode")?)?;
    a.alu_imm(Alu::Add, R1, FUSE_BASE as i32);
    a.stx(Size::DW, R10, START_VAL + 8, R1);
    a.call(helper::KTIME_GET_NS);
    a.stx(Size::DW, R10, START_VAL, R0);
    store_start(&mut a, start_fd);
    Ok(end(a, out))
}

/// fuse:fuse_request_end, usually in the FUSE server's context.
pub fn fuse_end(tp: &Tracepoint, sh: &Shared, start_fd: i32) -> Result<Vec<Insn>, Error> {
    let (mut a, out) = begin_exit(sh);
    fuse_key(&mut a, tp)?;
    take_start(&mut a, start_fd, out);
    if sh.by_cgroup.is_some() {
        a.ldx(Size::DW, R1, R10, SAVED);
        a.stx(Size::DW, R10, crate::bycgroup::CG, R1);
    }
    let mut err = tp.field("error")?.clone();
    err.signed = true;
    ld_field(&mut a, R9, R6, &err)?;
    a.alu_imm(Alu::Rsh, R9, 63);
    emit_record(&mut a, sh);
    Ok(end(a, out))
}

/// A program that files the u64 at the start of an XDP test packet and
/// returns its slot: lets tests run `emit_bucket` in the real kernel against
/// `BucketLayout::index`.
pub fn bucket_probe(sh: &Shared) -> Vec<Insn> {
    let mut a = Asm::new();
    let out = a.label();
    a.ldx(Size::W, R2, R1, 0);
    a.ldx(Size::W, R3, R1, 4);
    a.mov(R4, R2);
    a.alu_imm(Alu::Add, R4, 8);
    a.mov_imm(R0, -1);
    a.jmp_reg(Jmp::Gt, R4, R3, out);
    a.ldx(Size::DW, R7, R2, 0);
    emit_bucket(&mut a, sh);
    a.mov(R0, R6);
    a.bind(out);
    a.exit();
    a.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each cookie's jump lands on the first instruction of its part, and
    /// the parts are kept whole, in order.
    #[test]
    fn each_cookie_jumps_to_its_own_part() {
        let part = |n: i32| {
            let (mut a, out) = begin();
            a.mov_imm(R7, n);
            end(a, out)
        };
        let parts = vec![part(10), part(11), part(12)];
        let code = by_cookie(&parts);
        let head = 3 + parts.len() + 2;
        assert_eq!(code.len(), head + parts.iter().map(Vec::len).sum::<usize>());
        let mut at = head;
        for (i, p) in parts.iter().enumerate() {
            let jump = code[3 + i];
            assert_eq!((jump.code, jump.imm), (0x15, i as i32), "jeq r0, {i}");
            let target = (3 + i) as isize + 1 + jump.off as isize;
            assert_eq!(target, at as isize, "part {i}");
            assert_eq!(&code[at..at + p.len()], &p[..]);
            at += p.len();
        }
    }

    /// The words `emit_stats_add` writes are read back as the same fields.
    #[test]
    fn stats_value_bytes_are_its_fields_in_order() {
        let words: Vec<u8> = [3u64, 300, 1, 200, !50]
            .iter()
            .flat_map(|w| w.to_ne_bytes())
            .collect();
        let v = StatsValue::from_bytes(&words).unwrap();
        assert_eq!(
            (v.count, v.total, v.errors, v.max, !v.not_min),
            (3, 300, 1, 200, 50)
        );
        assert_eq!(STATS_VAL_SIZE, words.len());
        assert_eq!(StatsValue::from_bytes(&words[..32]), None);
    }
}
