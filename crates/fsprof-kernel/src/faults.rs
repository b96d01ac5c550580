//! Page faults of a followed process tree, one event each, for the trace
//! of mapped reads and writes (`fsprof trace`, as root).
//!
//! A load or store through a file mapping is no call: the only moment the
//! kernel sees it is the page fault of the first touch of a page that is
//! not mapped yet (or, for a store, not writable yet: a clean page of a
//! shared mapping is mapped read-only until it is written). Three programs
//! see each fault:
//!
//! - `exceptions:page_fault_user` (and `page_fault_kernel`, a system call
//!   touching the program's memory) when it starts: the address, whether
//!   it was a write, the time; kept per thread in `starts`;
//! - `filemap:mm_filemap_map_pages` while it is handled: the range of file
//!   pages the kernel maps around the faulting one without faults of their
//!   own ("fault-around", up to 16 pages of those cached): later loads of
//!   those pages are not observable;
//! - the software events `PERF_COUNT_SW_PAGE_FAULTS_MIN` and `_MAJ`, which
//!   the kernel counts when the fault is done (`mm_account_fault`): the
//!   end, so the service time, and whether it had to wait for the page
//!   (major). This one writes the event into the ring ([`crate::ring`]).
//!
//! Faults that fail (the program gets SIGSEGV or SIGBUS) have no end and
//! are not reported; instruction fetches are left out in the kernel. The
//! events carry addresses: which file and offset they touched is the
//! business of whoever knows the program's mappings (the trace reader).
//!
//! ## Only processes that map files leave the kernel
//!
//! The trace keeps a fault only where a file mapping that the shim saw
//! made (an `mmap` call of the process, or of the parent it was forked
//! from) covers it. A short process maps no file itself: its ~70 faults
//! (the loader's relocations, libc's locale files, heap and stack) were
//! each timed, put in the ring and dropped in user space, ~0.85 µs of
//! the traced process's time apiece (measured, a loop touching anonymous
//! pages: 2.05 → 2.92 µs a fault). Which VMA a fault is in would not tell
//! (the loader's and libc's own mappings are file mappings too); what the
//! shim saw does. So a followed process is *marked* before its first file
//! mapping through the shim: the shim's `mmap` wrapper makes one system
//! call that reads [`MAPPING_MARK`], in the first page, which no process
//! maps, and the kernel's fault on it (taken in the
//! kernel: the call fails with EFAULT and nothing else happens) sets the
//! process's bit in the map of followed processes. Until then its faults
//! stop at the start program, after the lookup it made anyway. A child
//! is forked with its parent's bit (it has the parent's mappings), and
//! the bit stays across `exec`: a superset of what the trace keeps.
//! Where the kernel lacks `exceptions:page_fault_kernel` (no mark can
//! arrive), every followed process is marked from the start, as before.
//!
//! ## Attached apart from the tree
//!
//! Even stopping at the lookup, the start program costs each followed
//! process ~10 µs of CPU over its ~70 faults, and the end programs run on
//! every fault of the machine. [`FaultSession::prepare`] makes the map of
//! followed processes and attaches only the fork and exit followers (the
//! tree must be followed from its first fork); the fault programs are
//! [`FaultSession::fault_load`]'s, made with their own maps and ring and
//! loaded ([`FaultLoad::load`]), and attached ([`FaultProgs::attach`]) on
//! any thread, later: `fsprof trace` loads them while the command starts
//! and attaches them when a traced process first maps a file
//! (fsprof-trace's `faultword`). Measured on this project's 2-CPU test
//! machine (attach_floor, load 12): the followers' part ~0.6 ms (the
//! followed map 205 µs, a load 120 µs, two raw attaches ~110 µs each), the
//! fault programs' maps and ring ~0.3 ms, their loads ~0.35 ms, their
//! attaches ~0.6-0.9 ms (~150-200 µs a raw tracepoint, ~20-90 µs a software
//! event per CPU: the kernel patches each call site, one at a time, so
//! that attaching the two kinds on two threads saved only ~0.1 ms). So
//! the end programs' events are opened with the load, disabled (their
//! call sites patched then, beside the command's start), and only
//! enabled on request, a call on each event's CPU; the raw tracepoints
//! have no such state (attached is patched), so the start and
//! fault-around programs are attached with the load behind a gate, a
//! counter the start program looks at first (`C_GATE`), which the
//! request opens: the scan's first `mmap` waited 921 → 476 µs (median of
//! 25, bpftrace, load 9). Open or attached, they cost every fault of the
//! machine a look-up, so a caller closes and detaches them when no
//! request is likely soon ([`FaultProgs::close_waiting`]).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, OnceLock};

use crate::attach::{map, prog_name};
use crate::drainer::Drainer;
use crate::insn::{helper, Alu, Insn, Jmp, Size, R0, R1, R10, R2, R3, R4, R6, R7, R8, R9};
use crate::privs;
use crate::progs::{begin, delete, end, lookup, update, Filter};
use crate::ring::RingMap;
use crate::sys::{self, Attachment, Map, Prog};
use crate::tracefs;
use crate::Error;

/// One fault of a followed task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// CLOCK_MONOTONIC ns when it started.
    pub start_ns: u64,
    /// Until the kernel was done with it.
    pub dur_ns: u64,
    pub pid: i32,
    pub tid: i32,
    pub addr: u64,
    pub write: bool,
    /// The fault waited for the page (read it from the device).
    pub major: bool,
    /// Taken by a system call touching the program's memory (a `write`
    /// from a mapped buffer), not by the program's own instruction.
    pub in_kernel: bool,
    /// File pages (first, last) the kernel mapped around it.
    pub around: Option<(u64, u64)>,
}

/// Bytes of an event in the ring: {start, duration, pid_tgid, address,
/// code, around first, around last}, u64 each. `code` is the fault's
/// error code with [`MAJOR_BIT`] and [`KERNEL_BIT`] set by the programs.
pub const EVENT_SIZE: usize = 56;
const MAJOR_BIT: u64 = 1 << 32;
const KERNEL_BIT: u64 = 1 << 33;
/// x86 page fault error code bits: a write, an access at user privilege,
/// an instruction fetch.
const PF_WRITE: u64 = 1 << 1;
const PF_USER: i32 = 1 << 2;
pub(crate) const PF_INSTR: i32 = 1 << 4;
/// Addresses at or above this are the kernel's (x86-64, 4-level and
/// 5-level paging alike keep user addresses below it).
pub(crate) const USER_END: u64 = 0x0100_0000_0000_0000;
/// The address whose fault, taken in the kernel by a followed process's
/// system call, marks the process as one that maps files (the module's
/// note): in the first page, below any `vm.mmap_min_addr` but 0, so never
/// mapped. The shim's `FSPROF_TMAP_MARK` (`shim/trace_abi.h`). Any fault
/// in the kernel on the first page marks (the kernel's copy routines need
/// not fault at the very byte asked for); one that was no mark (a program
/// passing a null buffer) only reports that process's faults, as before.
pub const MAPPING_MARK: u64 = 0x5f0;
const MARK_PAGE_END: i32 = 4096;
/// Bits of a followed process's value in the targets map: followed (the
/// fork program's filter only asks that the entry is there) and marked.
pub const FOLLOWED: u32 = 1;
pub const MAPS_FILES: u32 = 2;

impl Fault {
    /// An event as the end program wrote it; None if it is not one.
    pub fn parse(b: &[u8]) -> Option<Fault> {
        if b.len() < EVENT_SIZE {
            return None;
        }
        let w = |i: usize| u64::from_ne_bytes(b[8 * i..8 * i + 8].try_into().unwrap());
        let code = w(4);
        Some(Fault {
            start_ns: w(0),
            dur_ns: w(1),
            pid: (w(2) >> 32) as i32,
            tid: w(2) as u32 as i32,
            addr: w(3),
            write: code & PF_WRITE != 0,
            major: code & MAJOR_BIT != 0,
            in_kernel: code & KERNEL_BIT != 0,
            around: (w(5) != u64::MAX).then(|| (w(5), w(6))),
        })
    }
}

// Stack layout (offsets from r10); the filter uses -16..-8.
const KEY: i16 = -24;
/// The per-thread start entry: {start, address, code, around first, last}.
const VAL: i16 = -64;
const VAL_SIZE: usize = 40;
const EV: i16 = -128;
const _: () = assert!(EV as isize + EVENT_SIZE as isize <= VAL as isize);
/// `struct bpf_perf_event_data`'s `addr` on x86-64: after `struct pt_regs`
/// (21 registers) and `sample_period`.
const PERF_CTX_ADDR: i16 = 21 * 8 + 8;

/// Entries of the LRU map of faults in progress, per online CPU (a thread
/// has one fault in progress; a fault that failed leaves its entry until
/// the thread's next). The kernel's LRU hands each CPU free entries 128
/// at a time, so a map much smaller than 128 per CPU would evict faults
/// still in progress; 512 per CPU, at least 4,096, at most 65,536. The
/// map is preallocated when the capture starts: 16,384 entries cost 1-2
/// ms of every `fsprof trace` on this project's 2-CPU test machine.
const STARTS_PER_CPU: usize = 512;

fn starts_entries(cpus: usize) -> u32 {
    (cpus.saturating_mul(STARTS_PER_CPU)).clamp(4096, 65536) as u32
}
/// Ring bytes per online CPU: 4,096 events. The programs wake a reader
/// thread once a quarter of the ring is taken ([`crate::drainer`]), so it
/// holds what the CPUs make while that thread is woken, not what they
/// make in the 5 ms between two of the trace's reads: a CPU faulting
/// without pause makes an event every ~1 µs on fast hardware, every 4-6
/// µs on this project's 2-CPU test machine, where a woken thread waited
/// up to ~3 ms for a CPU under a build's load. Not more: the kernel
/// allocates, zeroes and maps the whole ring on the path before the
/// traced command starts (on that machine 2 MiB took ~0.55 ms, 512 KiB
/// ~0.15 ms). A full ring drops events, counted and warned about.
const RING_PER_CPU: usize = 256 << 10;

/// The ring's size for `cpus` CPUs: a power of two, 512 KiB to 16 MiB
/// (or what the test knob `FSPROF_TEST_FAULT_RING_KIB` says, a page at
/// least).
fn ring_bytes(cpus: usize) -> usize {
    if let Some(kib) = fsprof_sys::test_knob("FSPROF_TEST_FAULT_RING_KIB") {
        return ((kib as usize) << 10)
            .next_power_of_two()
            .clamp(4096, 16 << 20);
    }
    (cpus.max(1) * RING_PER_CPU)
        .next_power_of_two()
        .clamp(512 << 10, 16 << 20)
}

/// The start program of `page_fault_user` and `page_fault_kernel` (one
/// program attached to both: a load costs ~70 µs before any verifying on
/// this project's 2-CPU test machine), a raw tracepoint program (its
/// arguments are `address, regs, error_code`): the thread's entry in
/// `starts`. A fault taken in the kernel (a system call touching the
/// program's memory) is told by the error code, whose user bit is clear
/// exactly when the access was the kernel's (the CPU sets it from the
/// privilege level the access was made at; the kernel's own implicit
/// accesses from user mode, to the descriptor tables, are at kernel
/// addresses, which [`data_fault`] leaves out): user addresses only,
/// marked.
///
/// Raw, not a perf tracepoint: a perf tracepoint event needs the CPU's
/// perf recursion slot for its record, and measured under `fsprof trace`
/// on this project's test machine, 5-40% of a program's faults found it
/// taken and were dropped without a trace (the BPF program never ran, and
/// no miss was counted); the raw tracepoint formats no record.
pub fn start_prog(targets: i32, starts: i32, counters: i32) -> Vec<Insn> {
    let (mut a, out) = begin();
    gate_closed(&mut a, counters, out);
    crate::progs::emit_filter(&mut a, &Filter::Targets { map_fd: targets }, out);
    a.mov(R9, R0);
    data_fault(&mut a, out);
    let user = a.label();
    a.mov(R1, R8);
    a.alu_imm(Alu::And, R1, PF_USER);
    a.jmp_imm(Jmp::Ne, R1, 0, user);
    let not_mark = a.label();
    a.jmp_imm(Jmp::Ge, R7, MARK_PAGE_END, not_mark);
    a.st_imm(Size::W, R9, 0, (FOLLOWED | MAPS_FILES) as i32);
    count(&mut a, counters, C_MARKS);
    a.ja(out);
    a.bind(not_mark);
    a.ld_imm64(R1, KERNEL_BIT);
    a.alu_reg(Alu::Or, R8, R1);
    a.bind(user);
    a.ldx(Size::W, R1, R9, 0);
    a.alu_imm(Alu::And, R1, MAPS_FILES as i32);
    a.jmp_imm(Jmp::Eq, R1, 0, out);
    a.call(helper::KTIME_GET_NS);
    a.stx(Size::DW, R10, VAL, R0);
    a.stx(Size::DW, R10, VAL + 8, R7);
    a.stx(Size::DW, R10, VAL + 16, R8);
    a.st_imm(Size::DW, R10, VAL + 24, -1);
    a.st_imm(Size::DW, R10, VAL + 32, -1);
    a.call(helper::GET_CURRENT_PID_TGID);
    a.stx(Size::DW, R10, KEY, R0);
    update(&mut a, starts, KEY, VAL, sys::BPF_ANY as i32);
    count(&mut a, counters, C_STARTS);
    add_to(&mut a, counters, C_IN_FLIGHT, 1);
    end(a, out)
}

/// In a page-fault tracepoint program (r6 the raw arguments: address,
/// regs, error code): r7 = the address, r8 = the error code, or on to
/// `out` for a kernel address or an instruction fetch, which are no
/// program's data access.
pub(crate) fn data_fault(a: &mut crate::insn::Asm, out: crate::insn::Label) {
    a.ldx(Size::DW, R7, R6, 0);
    a.ldx(Size::DW, R8, R6, 16);
    a.ld_imm64(R1, USER_END);
    a.jmp_reg(Jmp::Ge, R7, R1, out);
    a.mov(R1, R8);
    a.alu_imm(Alu::And, R1, PF_INSTR);
    a.jmp_imm(Jmp::Ne, R1, 0, out);
}

/// Counters of the `counters` array: a full ring, starts, ends that were
/// not the started fault's, marks, and the faults in progress: entries
/// the start program made and no end took yet, at least (a fault that
/// failed, or an entry the LRU dropped, leaves it higher, never lower).
/// While it is 0, which it is as long as no followed process is marked,
/// the end and around programs stop before their hash lookup (an array
/// lookup is inlined by the verifier): they run for every fault of the
/// machine.
const C_LOST: i32 = 0;
const C_STARTS: i32 = 1;
const C_OTHER_END: i32 = 2;
const C_MARKS: i32 = 3;
const C_IN_FLIGHT: i32 = 4;
/// Non-zero once the fault programs are asked for ([`FaultProgs::attach`]):
/// until then the start program, attached with the load, stops at this
/// array lookup (inlined by the verifier), before its filter's hash
/// lookup, keeping no start, and so marking no process.
const C_GATE: i32 = 5;
const COUNTERS: u32 = 6;

/// counters[i] += 1. Clobbers r0-r5.
fn count(a: &mut crate::insn::Asm, counters: i32, i: i32) {
    add_to(a, counters, i, 1);
}

/// counters[i] += delta. Clobbers r0-r5.
fn add_to(a: &mut crate::insn::Asm, counters: i32, i: i32, delta: i32) {
    let skip = a.label();
    a.st_imm(Size::W, R10, KEY, i);
    lookup(a, counters, KEY);
    a.jmp_imm(Jmp::Eq, R0, 0, skip);
    a.mov_imm(R1, delta);
    a.atomic_add64(R0, 0, R1);
    a.bind(skip);
}

/// On to `out` while counters[i] is 0. Clobbers r0-r5.
fn while_zero(a: &mut crate::insn::Asm, counters: i32, i: i32, out: crate::insn::Label) {
    a.st_imm(Size::W, R10, KEY, i);
    lookup(a, counters, KEY);
    a.jmp_imm(Jmp::Eq, R0, 0, out);
    a.ldx(Size::DW, R1, R0, 0);
    a.jmp_imm(Jmp::Eq, R1, 0, out);
}

/// On to `out` while the gate ([`C_GATE`]) is closed. Clobbers r0-r5.
fn gate_closed(a: &mut crate::insn::Asm, counters: i32, out: crate::insn::Label) {
    while_zero(a, counters, C_GATE, out);
}

/// On to `out` while no fault is in progress. Clobbers r0-r5.
fn none_in_flight(a: &mut crate::insn::Asm, counters: i32, out: crate::insn::Label) {
    while_zero(a, counters, C_IN_FLIGHT, out);
}

/// `mm_filemap_map_pages` during a fault of a followed thread: the range
/// mapped around, into its entry.
pub fn around_prog(starts: i32, counters: i32) -> Vec<Insn> {
    let (mut a, out) = begin();
    none_in_flight(&mut a, counters, out);
    a.call(helper::GET_CURRENT_PID_TGID);
    a.stx(Size::DW, R10, KEY, R0);
    lookup(&mut a, starts, KEY);
    a.jmp_imm(Jmp::Eq, R0, 0, out);
    a.mov(R7, R0);
    // Raw arguments: mapping, index, last_index.
    a.ldx(Size::DW, R1, R6, 8);
    a.stx(Size::DW, R7, 24, R1);
    a.ldx(Size::DW, R1, R6, 16);
    a.stx(Size::DW, R7, 32, R1);
    end(a, out)
}

/// Which faults an end program is attached for: the minor ones, the
/// major ones, or both, told apart by the attachment's cookie (which is
/// then the event's [`MAJOR_BIT`] or 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ends {
    Minor,
    Major,
    ByCookie,
}

/// `bpf_ringbuf_query`'s `BPF_RB_AVAIL_DATA`; `bpf_ringbuf_output`'s
/// flags `BPF_RB_NO_WAKEUP`, `BPF_RB_FORCE_WAKEUP`.
const RB_AVAIL_DATA: i32 = 0;
const RB_WAKE: [i32; 2] = [1, 2];

/// The ring an end program writes to: its map and its size.
#[derive(Clone, Copy, Debug)]
pub struct RingRef {
    pub fd: i32,
    pub bytes: usize,
}

/// The end program, on `PERF_COUNT_SW_PAGE_FAULTS_MIN` and/or `_MAJ`
/// (`ends`): the thread's entry, completed, into the ring; a full ring
/// counts in `counters`.
pub fn end_prog(starts: i32, ring: RingRef, lost: i32, ends: Ends) -> Vec<Insn> {
    // `lost` is the counters array.
    let (mut a, out) = begin();
    none_in_flight(&mut a, lost, out);
    a.call(helper::GET_CURRENT_PID_TGID);
    a.mov(R8, R0);
    a.stx(Size::DW, R10, KEY, R0);
    lookup(&mut a, starts, KEY);
    a.jmp_imm(Jmp::Eq, R0, 0, out);
    a.mov(R7, R0);
    a.call(helper::KTIME_GET_NS);
    a.mov(R9, R0);
    a.ldx(Size::DW, R1, R7, 0);
    a.stx(Size::DW, R10, EV, R1);
    a.mov(R2, R9);
    a.alu_reg(Alu::Sub, R2, R1);
    a.stx(Size::DW, R10, EV + 8, R2);
    a.stx(Size::DW, R10, EV + 16, R8);
    a.ldx(Size::DW, R1, R7, 8);
    a.stx(Size::DW, R10, EV + 24, R1);
    // The fault being accounted is the one that started: same page.
    let same = a.label();
    a.ldx(Size::DW, R2, R6, PERF_CTX_ADDR);
    a.alu_reg(Alu::Xor, R2, R1);
    a.alu_imm(Alu::Rsh, R2, 12);
    a.jmp_imm(Jmp::Eq, R2, 0, same);
    delete(&mut a, starts, KEY);
    add_to(&mut a, lost, C_IN_FLIGHT, -1);
    count(&mut a, lost, C_OTHER_END);
    a.ja(out);
    a.bind(same);
    if ends == Ends::ByCookie {
        a.mov(R1, R6);
        a.call(helper::GET_ATTACH_COOKIE);
        a.mov(R9, R0);
    }
    a.ldx(Size::DW, R1, R7, 16);
    match ends {
        Ends::Minor => {}
        Ends::Major => {
            a.ld_imm64(R2, MAJOR_BIT);
            a.alu_reg(Alu::Or, R1, R2);
        }
        Ends::ByCookie => {
            a.ld_imm64(R2, MAJOR_BIT);
            a.alu_reg(Alu::And, R9, R2);
            a.alu_reg(Alu::Or, R1, R9);
        }
    }
    a.stx(Size::DW, R10, EV + 32, R1);
    a.ldx(Size::DW, R1, R7, 24);
    a.stx(Size::DW, R10, EV + 40, R1);
    a.ldx(Size::DW, R1, R7, 32);
    a.stx(Size::DW, R10, EV + 48, R1);
    delete(&mut a, starts, KEY);
    add_to(&mut a, lost, C_IN_FLIGHT, -1);
    // The reader is woken only once a quarter of the ring is taken (module
    // doc of `drainer`): a wake-up for every event would cost the traced
    // program the reader's thread on its CPUs.
    let quiet = a.label();
    a.ld_map(R1, ring.fd);
    a.mov_imm(R2, RB_AVAIL_DATA);
    a.call(helper::RINGBUF_QUERY);
    a.mov_imm(R4, RB_WAKE[0]);
    a.jmp_imm(
        Jmp::Lt,
        R0,
        (ring.bytes / crate::drainer::WAKE_SHARE) as i32,
        quiet,
    );
    a.mov_imm(R4, RB_WAKE[1]);
    a.bind(quiet);
    a.ld_map(R1, ring.fd);
    a.mov(R2, R10);
    a.alu_imm(Alu::Add, R2, EV as i32);
    a.mov_imm(R3, EVENT_SIZE as i32);
    a.call(helper::RINGBUF_OUTPUT);
    a.jmp_imm(Jmp::Eq, R0, 0, out);
    count(&mut a, lost, C_LOST);
    end(a, out)
}

/// Loaded and attached fault programs for one process tree. Dropping it
/// detaches them and frees the maps.
pub struct FaultSession {
    // Attachments first: detached before the programs and maps go.
    _atts: Vec<Attachment>,
    _progs: Vec<Prog>,
    /// The fault programs, where [`FaultSession::attach`] attached them
    /// (else whoever attaches them holds them).
    faults: Option<FaultsAttached>,
    /// The fault programs' own maps and ring, made where they are loaded
    /// ([`FaultLoad::load`]): not on the path before a held command
    /// starts.
    parts: Arc<OnceLock<FaultParts>>,
    cpus: Vec<i32>,
    targets: crate::follow::Tree,
    /// Whether fault-around ranges are reported (the kernel has the
    /// tracepoint).
    pub around: bool,
    /// Whether a process's mark can arrive (`page_fault_kernel`): if not,
    /// every followed process's faults are reported.
    pub marks: bool,
    /// Whether the fault-around and start programs are one program, told
    /// apart by their attachments' cookies (Linux 6.10), rather than one
    /// each (so are the fork and exit programs, where their tracepoints
    /// take the same number of arguments).
    pub shared: bool,
}

fn load(name: &str, ty: u32, insns: &[Insn]) -> Result<Prog, Error> {
    Prog::load(name, ty, insns).map_err(|e| Error::Load {
        prog: name.into(),
        errno: e.errno,
        log: e.log.replace('\n', " | "),
    })
}

/// The end program(s), loaded: one for both software events, told apart
/// by the cookie of each attachment (a load costs ~70 µs before any
/// verifying on this project's 2-CPU test machine), or, where the kernel
/// has no attach cookies (before Linux 5.15), one per event.
fn end_progs(starts: i32, ring: RingRef, lost: i32) -> Result<Vec<EndProg>, Error> {
    let (min, maj) = (
        sys::PERF_COUNT_SW_PAGE_FAULTS_MIN,
        sys::PERF_COUNT_SW_PAGE_FAULTS_MAJ,
    );
    let name = prog_name("fault_end");
    let both = end_prog(starts, ring, lost, Ends::ByCookie);
    if let Ok(prog) = Prog::load(&name, sys::PROG_PERF_EVENT, &both) {
        let events = vec![(min, Some(0)), (maj, Some(MAJOR_BIT))];
        return Ok(vec![EndProg { prog, events, name }]);
    }
    [
        (min, Ends::Minor, "fault_min"),
        (maj, Ends::Major, "fault_maj"),
    ]
    .into_iter()
    .map(|(config, ends, name)| {
        let name = prog_name(name);
        let prog = load(
            &name,
            sys::PROG_PERF_EVENT,
            &end_prog(starts, ring, lost, ends),
        )?;
        Ok(EndProg {
            prog,
            events: vec![(config, None)],
            name,
        })
    })
    .collect()
}

fn attach_err(what: &str) -> impl Fn(io::Error) -> Error + '_ {
    move |err| Error::Attach {
        prog: what.into(),
        tracepoint: what.into(),
        err,
    }
}

/// The CPUs that are online now (the software events are per CPU).
pub(crate) fn online_cpus() -> Vec<i32> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.parse::<i32>(), b.parse::<i32>()) {
            cpus.extend(a..=b.min(a + 4095));
        }
    }
    cpus
}

/// The map of followed processes, which the fork and exit followers keep
/// from before the command starts.
fn create_targets() -> Result<crate::follow::Tree, Error> {
    crate::follow::Tree::create(
        "fsprof_ftargets",
        "fsprof_ftcounts",
        crate::follow::TRACE_ENTRIES,
    )
}

/// What only the fault programs use: the faults in progress, the
/// counters, and the event ring with its reader. Made with the programs'
/// load ([`FaultLoad::load`]), after the held command was let go: the
/// faults map (~150 µs of the kernel's preallocating on this project's
/// 2-CPU test machine), the ring (~150 µs, allocated, zeroed and mapped)
/// and the reader's thread were on the path before it starts.
struct FaultParts {
    starts: Map,
    counts: Map,
    /// The ring's reader, started once the programs are attached and
    /// whoever waited for them woken ([`FaultProgs::attach_then`]): the
    /// programs write into the ring without it, and its start (the ring's
    /// data pages mapped twice, a thread) was ~0.1-0.2 ms of a first
    /// mapping's wait. Until then a drain finds nothing, and the records
    /// wait in the ring, which holds thousands.
    ring: OnceLock<Drainer>,
    /// The ring until its reader starts.
    unread: std::sync::Mutex<Option<RingMap>>,
}

impl FaultParts {
    fn create(cpus: usize, ring_size: usize) -> Result<(FaultParts, RingRef), Error> {
        let starts = starts_entries(cpus);
        let starts = map("fsprof_fstarts", sys::MAP_LRU_HASH, 8, VAL_SIZE, starts, 0)?;
        let counts = map("fsprof_fcounts", sys::MAP_ARRAY, 4, 8, COUNTERS, 0)?;
        let ring = RingMap::create(&prog_name("fring"), ring_size).map_err(ring_err)?;
        let at = RingRef {
            fd: ring.fd(),
            bytes: ring_size,
        };
        Ok((
            FaultParts {
                starts,
                counts,
                ring: OnceLock::new(),
                unread: std::sync::Mutex::new(Some(ring)),
            },
            at,
        ))
    }

    /// Starts the ring's reader of the maps in `parts`, once.
    fn read(parts: &OnceLock<FaultParts>) -> Result<(), Error> {
        let Some(p) = parts.get() else {
            return Err(ring_err(io::Error::other("no maps")));
        };
        let mut unread = p
            .unread
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(ring) = unread.take() else {
            return Ok(());
        };
        let reader = Drainer::start(ring.read().map_err(ring_err)?).map_err(ring_err)?;
        let _ = p.ring.set(reader);
        Ok(())
    }

    /// Lets the start program of the maps in `parts` keep faults from now
    /// on ([`C_GATE`]); the maps are made before any program is attached.
    fn open_gate(parts: &OnceLock<FaultParts>) -> Result<(), Error> {
        let Some(p) = parts.get() else {
            return Err(attach_err("fault_start")(io::Error::other("no maps")));
        };
        let key = (C_GATE as u32).to_le_bytes();
        p.counts
            .update(&key, &1u64.to_ne_bytes(), sys::BPF_ANY)
            .map_err(|err| Error::Map {
                name: "fsprof_fcounts".into(),
                err,
                hint: "",
            })
    }
}

fn ring_err(err: io::Error) -> Error {
    Error::Map {
        name: "fsprof_fring".into(),
        err,
        hint: "",
    }
}

/// A loaded end program, the software events it is for (each with the
/// cookie its attachment carries, or None: attached without one), and its
/// name.
struct EndProg {
    prog: Prog,
    events: Vec<(u64, Option<u64>)>,
    name: String,
}

/// Attaches each end program to its software events on each of `cpus`.
fn attach_ends(ends: Vec<EndProg>, cpus: &[i32]) -> Result<Started, Error> {
    let atts = open_ends(&ends, cpus)?;
    enable_ends(&atts)?;
    Ok(Started {
        progs: ends.into_iter().map(|e| e.prog).collect(),
        atts,
        shared: false,
    })
}

/// [`attach_ends`]'s events opened disabled, each with its program
/// ([`sys::prepare_software_event`]): the kernel's patching of their call
/// sites, ~0.4 ms of the first mapping's wait on this project's 2-CPU
/// test machine when done on request, is done before it; no program runs
/// until [`enable_ends`].
fn open_ends(ends: &[EndProg], cpus: &[i32]) -> Result<Vec<Attachment>, Error> {
    let mut atts = Vec::new();
    for end in ends {
        for &(config, cookie) in &end.events {
            for &cpu in cpus {
                let att = sys::prepare_software_event(&end.prog, config, cpu, cookie);
                atts.push(att.map_err(attach_err(&end.name))?);
            }
        }
    }
    Ok(atts)
}

/// Enables the events [`open_ends`] opened.
fn enable_ends(atts: &[Attachment]) -> Result<(), Error> {
    for att in atts {
        att.enable().map_err(attach_err("fault_end"))?;
    }
    Ok(())
}

/// Programs loaded and their attachments: the followers', or the fault
/// programs' ([`FaultProgs::attach`]).
#[derive(Default)]
struct Started {
    progs: Vec<Prog>,
    atts: Vec<Attachment>,
    /// The raw tracepoint programs share one ([`crate::progs::by_cookie`]).
    shared: bool,
}

/// A raw tracepoint program: its name, the tracepoints it is attached
/// to, its instructions.
type RawPart = (&'static str, Vec<&'static str>, Vec<Insn>);

/// The fault programs on the maps `t` (followed), `st` (starts), `c`
/// (counters), raw: fault-around (if the kernel has it) and the start (on
/// `page_fault_kernel` too where it is).
fn fault_parts(t: i32, st: i32, c: i32, around: bool, marks: bool) -> Vec<RawPart> {
    let mut faults = Vec::new();
    if around {
        // Raw: a perf tracepoint event costs 80 ms to close (the kernel
        // waits for every CPU to leave the tracepoint), measured.
        let name = "mm_filemap_map_pages";
        faults.push((name, vec![name], around_prog(st, c)));
    }
    let mut starts = vec!["page_fault_user"];
    if marks {
        starts.push("page_fault_kernel");
    }
    faults.push(("page_fault_user", starts, start_prog(t, st, c)));
    faults
}

/// The fork and exit followers on `m`, raw, with the kernel's task
/// layout. Not in one program with the fault programs: a raw tracepoint
/// program may only be attached where the tracepoint has as many
/// arguments as it reads (the kernel refuses it with EINVAL), and the
/// fault programs read a third argument, which the scheduler's
/// tracepoints do not have.
fn follower_parts(targets: &crate::follow::Tree, l: crate::follow::TaskLayout) -> Vec<RawPart> {
    let (fork, exit) = ("sched_process_fork", "sched_process_exit");
    let (t, counts) = (targets.fd(), targets.counts_fd());
    vec![
        (fork, vec![fork], crate::follow::fork_prog(&l, t, counts)),
        (exit, vec![exit], crate::follow::exit_prog(&l, t)),
    ]
}

/// Raw tracepoint parts, loaded as one program where the kernel can
/// ([`load_shared`]), else left to be loaded one by one as they are
/// attached.
struct RawLoaded {
    parts: Vec<RawPart>,
    shared: Option<Prog>,
}

/// Loads `parts` ahead of their attach.
fn load_raw(parts: Vec<RawPart>) -> RawLoaded {
    let shared = load_shared(&parts);
    RawLoaded { parts, shared }
}

/// Attaches what [`load_raw`] loaded: the shared program, each
/// attachment's cookie the index of its part; where the kernel refuses a
/// cookie (none on raw tracepoints before Linux 6.10, or a tracepoint with
/// fewer arguments than a part reads), each part loaded and attached on
/// its own.
/// The shared program stays `l`'s (it may be attached again), and is not
/// in the result's `progs`.
fn attach_raw(l: &RawLoaded) -> Result<Started, Error> {
    if let Some(prog) = &l.shared {
        let mut atts = Vec::new();
        let all = l.parts.iter().enumerate().all(|(i, (_, tps, _))| {
            tps.iter().all(|tp| {
                sys::attach_raw_tracepoint_cookie(prog, tp, i as u64)
                    .map(|a| atts.push(a))
                    .is_ok()
            })
        });
        if all {
            return Ok(Started {
                progs: Vec::new(),
                atts,
                shared: true,
            });
        }
    }
    one_by_one(&l.parts)
}

/// The parts in one program ([`load_raw`], [`attach_raw`]).
fn group(parts: Vec<RawPart>) -> Result<Started, Error> {
    let l = load_raw(parts);
    let mut s = attach_raw(&l)?;
    s.progs.extend(l.shared);
    Ok(s)
}

/// Every part in one program, told apart by its attachments' cookies;
/// None where the kernel refuses to load it (no cookie helper for raw
/// tracepoints before Linux 6.10).
fn load_shared(parts: &[RawPart]) -> Option<Prog> {
    // The test knob `FSPROF_TEST_RAW_APART` loads them one by one, as an
    // older kernel does: that path's tests, and the floor's comparison.
    if parts.len() < 2 || fsprof_sys::test_knob("FSPROF_TEST_RAW_APART").is_some_and(|n| n > 0) {
        return None;
    }
    let code: Vec<Vec<Insn>> = parts.iter().map(|p| p.2.clone()).collect();
    Prog::load(
        &prog_name(parts[0].0),
        sys::PROG_RAW_TRACEPOINT,
        &crate::progs::by_cookie(&code),
    )
    .ok()
}

/// Each part loaded and attached on its own.
fn one_by_one(parts: &[RawPart]) -> Result<Started, Error> {
    let mut s = Started::default();
    for (name, tps, code) in parts {
        let (prog, att) = crate::attach::raw_program(name, code)?;
        s.atts.push(att);
        for tp in &tps[1..] {
            let att = sys::attach_raw_tracepoint(&prog, tp).map_err(|err| Error::Attach {
                prog: (*tp).into(),
                tracepoint: format!("raw:{tp}"),
                err,
            })?;
            s.atts.push(att);
        }
        s.progs.push(prog);
    }
    Ok(s)
}

/// The fork and exit programs on `targets`, loaded and attached (as one
/// program where the kernel can), with the kernel's task layout (parsed
/// from BTF here, ~0.2 ms). Without it, the fork is followed by a perf
/// tracepoint program of its own.
fn start_followers(
    root: &std::path::Path,
    targets: &crate::follow::Tree,
) -> Result<Started, Error> {
    match crate::follow::TaskLayout::vmlinux() {
        Some(l) => group(follower_parts(targets, l)),
        None => {
            let mut f = Started::default();
            for (prog, att) in targets.programs(None, root)? {
                f.progs.push(prog);
                f.atts.push(att);
            }
            Ok(f)
        }
    }
}

/// A descriptor of the session's, held by [`FaultLoad`] on its own: the
/// programs it loads refer to the maps by descriptor, and the session may
/// be closed (its numbers reused) while they are loaded on another thread.
fn dup(fd: i32) -> Result<OwnedFd, Error> {
    // SAFETY: `fd` is one of the session's maps, open while it is borrowed.
    unsafe { BorrowedFd::borrow_raw(fd) }
        .try_clone_to_owned()
        .map_err(|err| Error::Map {
            name: "fsprof_fault maps".into(),
            err,
            hint: "",
        })
}

/// What the fault programs of a session are made of, to be loaded
/// ([`FaultLoad::load`]) and attached later, on any thread: the session's
/// map of followed processes, held, and where their own maps and ring go
/// once made.
pub struct FaultLoad {
    targets: OwnedFd,
    parts: Arc<OnceLock<FaultParts>>,
    ring_bytes: usize,
    around: bool,
    marks: bool,
    cpus: Vec<i32>,
}

/// The fault programs loaded (verified), the start and fault-around
/// programs attached behind a closed gate (`C_GATE`) and the end
/// programs' events opened disabled: they keep no fault until
/// [`FaultProgs::attach`].
pub struct FaultProgs {
    raw: RawLoaded,
    /// `raw`'s attachments, made after the load ([`FaultProgs::attach_waiting`]:
    /// the kernel's patching of the tracepoints, ~0.4 ms on this project's
    /// 2-CPU test machine, done while the command starts, not while its
    /// first mapping waits); None before, once [`FaultProgs::close_waiting`]
    /// detached them, or where the attach failed (tried again, and
    /// reported, on request).
    raw_atts: Option<Started>,
    ends: Vec<EndProg>,
    /// Their events, opened disabled with the load ([`open_ends`]); none
    /// once [`FaultProgs::close_waiting`] closed them.
    events: Vec<Attachment>,
    cpus: Vec<i32>,
    /// The maps' descriptors in `raw`'s instructions, held: where the
    /// parts are loaded one by one, they are loaded as they are attached.
    maps: FaultLoad,
}

/// The fault programs attached: every fault of the machine runs them
/// until this is dropped (detached, then closed).
pub struct FaultsAttached {
    // Attachments first: detached before the programs go.
    _atts: Vec<Attachment>,
    progs: Vec<Prog>,
    /// Held until these are dropped: closing them on the attach's path
    /// was ~13 µs a descriptor before the waiting process was woken.
    _maps: FaultLoad,
    /// The fault-around and start programs are one program
    /// ([`crate::progs::by_cookie`]).
    pub shared: bool,
}

impl FaultLoad {
    /// Makes the programs' maps and ring (the session's from then on) and
    /// loads the fault-around, start and end programs on them (~0.3 ms of
    /// the kernel's verifying on this project's 2-CPU test machine), the
    /// end programs' events opened disabled: none runs yet. Once a session.
    pub fn load(self) -> Result<FaultProgs, Error> {
        let (parts, ring) = FaultParts::create(self.cpus.len(), self.ring_bytes)?;
        let (st, c) = (parts.starts.fd(), parts.counts.fd());
        let ends = end_progs(st, ring, c)?;
        let events = open_ends(&ends, &self.cpus)?;
        let t = self.targets.as_raw_fd();
        let raw = load_raw(fault_parts(t, st, c, self.around, self.marks));
        if self.parts.set(parts).is_err() {
            return Err(Error::Map {
                name: "fsprof_fstarts".into(),
                err: io::Error::other("the session's fault programs were loaded already"),
                hint: "",
            });
        }
        Ok(FaultProgs {
            raw,
            raw_atts: None,
            ends,
            events,
            cpus: self.cpus.clone(),
            maps: self,
        })
    }
}

impl FaultProgs {
    /// Attaches them: enables the end programs' events (opened with the
    /// load, or now if they were closed), attaches the others to their
    /// raw tracepoints unless the load did (~0.4 ms on this project's
    /// 2-CPU test machine, most of it the kernel's patching of each
    /// tracepoint's call site), then opens the gate. The ends before the
    /// gate: a start kept before its end is enabled would stay in flight,
    /// and the early stop of the end and around programs (`C_IN_FLIGHT`)
    /// would be off for the rest of the run.
    pub fn attach(self) -> Result<FaultsAttached, Error> {
        self.attach_then(|| {})
    }

    /// [`FaultProgs::attach`], calling `attached` as soon as the programs
    /// keep faults (to wake whoever waits for them), then starting the
    /// ring's reader (`FaultParts::ring`); an error starting it (after
    /// `attached`) detaches them again.
    pub fn attach_then(mut self, attached: impl FnOnce()) -> Result<FaultsAttached, Error> {
        if self.events.is_empty() {
            self.events = open_ends(&self.ends, &self.cpus)?;
        }
        enable_ends(&self.events)?;
        let raw = match self.raw_atts.take() {
            Some(r) => r,
            None => attach_raw(&self.raw)?,
        };
        FaultParts::open_gate(&self.maps.parts)?;
        let mut a = FaultsAttached {
            _atts: self.events,
            progs: self.ends.into_iter().map(|e| e.prog).collect(),
            _maps: self.maps,
            shared: raw.shared,
        };
        a._atts.extend(raw.atts);
        a.progs.extend(raw.progs);
        a.progs.extend(self.raw.shared);
        attached();
        // A test's slow reader: the ring keeps what the programs write
        // until it starts, and a capture's last drain waits for it.
        if let Some(ms) = fsprof_sys::test_knob("FSPROF_TEST_READER_DELAY_MS") {
            std::thread::sleep(std::time::Duration::from_millis(ms.min(5000).into()));
        }
        FaultParts::read(&a._maps.parts)?;
        Ok(a)
    }

    /// Attaches the start and fault-around programs behind their closed
    /// gate, so that [`FaultProgs::attach`] need not: none keeps a fault
    /// yet. Apart from the load, so that a capture over by then skips it
    /// (its end waits for the thread that attaches). A failure is left to
    /// the attach, which tries again and reports it. The test knob
    /// `FSPROF_TEST_RAW_ON_REQUEST` leaves them to the request, as before
    /// (the variant this was measured against, docs/benchmarks.md).
    pub fn attach_waiting(&mut self) {
        let late = fsprof_sys::test_knob("FSPROF_TEST_RAW_ON_REQUEST").is_some_and(|n| n > 0);
        if self.raw_atts.is_none() && !late {
            self.raw_atts = attach_raw(&self.raw).ok();
        }
    }

    /// Detaches the start and fault-around programs and closes the end
    /// programs' events, to be attached and opened again by
    /// [`FaultProgs::attach`]: behind their gate the former still run on
    /// every page fault of the machine, and the events, opened even
    /// disabled, cost each fault the kernel's look-up of its CPU's enabled
    /// events (+0.12 µs a fault beside a trace that waits,
    /// bench/faults_beside.py, on this project's 2-CPU test machine), so
    /// they are kept only while a first mapping is likely to come soon.
    pub fn close_waiting(&mut self) {
        self.events.clear();
        self.raw_atts = None;
    }

    /// Whether anything [`FaultProgs::close_waiting`] closes is open.
    pub fn waiting(&self) -> bool {
        !self.events.is_empty() || self.raw_atts.is_some()
    }
}

impl FaultsAttached {
    /// [`FaultSession::missed`] of these programs.
    pub fn missed(&self) -> u64 {
        self.progs
            .iter()
            .filter_map(|p| p.recursion_misses().ok())
            .sum()
    }

    /// [`FaultSession::run_stats`] of these programs.
    pub fn run_stats(&self) -> Vec<sys::RunStats> {
        self.progs
            .iter()
            .filter_map(|p| p.run_stats().ok())
            .collect()
    }
}

/// A session's start: the checks, the tracefs lookups and the map of
/// followed processes, before the followers ([`Begun::finish`]).
struct Begun {
    root: std::path::PathBuf,
    cpus: Vec<i32>,
    targets: crate::follow::Tree,
    around: bool,
    marks: bool,
}

impl Begun {
    fn new() -> Result<Begun, Error> {
        privs::check(privs::effective_caps()).map_err(|missing| Error::Privileges { missing })?;
        let root = tracefs::root()?;
        // The start program is attached raw, by name.
        if !tracefs::exists(&root, "exceptions", "page_fault_user") {
            return Err(Error::NoTracepoint {
                name: "exceptions:page_fault_user".into(),
                why: "this kernel does not have it".into(),
            });
        }
        let around = tracefs::exists(&root, "filemap", "mm_filemap_map_pages");
        let marks = tracefs::exists(&root, "exceptions", "page_fault_kernel");
        Ok(Begun {
            root,
            cpus: online_cpus(),
            targets: create_targets()?,
            around,
            marks,
        })
    }

    /// [`FaultSession::fault_load`] before the session is made.
    fn fault_load(&self, parts: Arc<OnceLock<FaultParts>>) -> Result<FaultLoad, Error> {
        Ok(FaultLoad {
            targets: dup(self.targets.fd())?,
            parts,
            ring_bytes: ring_bytes(self.cpus.len()),
            around: self.around,
            marks: self.marks,
            cpus: self.cpus.clone(),
        })
    }

    /// Attaches the fork and exit followers: the session, its fault
    /// programs' maps and ring in `parts` once loaded.
    fn finish(self, parts: Arc<OnceLock<FaultParts>>) -> Result<FaultSession, Error> {
        let followers = start_followers(&self.root, &self.targets)?;
        Ok(FaultSession {
            _atts: followers.atts,
            _progs: followers.progs,
            faults: None,
            parts,
            cpus: self.cpus,
            targets: self.targets,
            around: self.around,
            marks: self.marks,
            shared: followers.shared,
        })
    }
}

impl FaultSession {
    /// Follows `pid` and the processes it forks from now on. Needs root
    /// (or CAP_BPF and CAP_PERFMON) and `exceptions:page_fault_user` (x86).
    /// Every fault is reported, marked or not.
    pub fn start(pid: i32) -> Result<FaultSession, Error> {
        let s = Self::attach()?;
        s.follow_every_fault(pid)?;
        Ok(s)
    }

    /// Adds a process (and its children) whose every fault is reported,
    /// marked or not.
    pub fn follow_every_fault(&self, pid: i32) -> Result<(), Error> {
        self.follow_as(pid, FOLLOWED | MAPS_FILES)
    }

    /// Adds a process (and the children it forks from now on), whose
    /// faults are reported once it is marked as one that maps files
    /// (module doc), or at once where marks cannot arrive.
    pub fn follow(&self, pid: i32) -> Result<(), Error> {
        self.follow_as(pid, initial_value(self.marks))
    }

    fn follow_as(&self, pid: i32, value: u32) -> Result<(), Error> {
        self.targets.add_as(pid, value)
    }

    /// Loads and attaches every program, following no process yet, on
    /// two threads (the floor's order before the attach on request,
    /// `fault_floor`, bench/fault_floor_split.py): one makes the fault
    /// programs' maps and ring and loads and attaches the end program,
    /// while this one attaches the fork and exit followers, then the
    /// fault-around and start programs on those maps. No process is
    /// followed yet, so no start is kept before its end is attached.
    pub fn attach() -> Result<FaultSession, Error> {
        let begun = Begun::new()?;
        let cell: Arc<OnceLock<FaultParts>> = Arc::default();
        let held = begun.fault_load(cell.clone())?;
        let (t, around, marks, cpus) = (
            held.targets.as_raw_fd(),
            begun.around,
            begun.marks,
            begun.cpus.clone(),
        );
        let (s, faults) = std::thread::scope(|scope| {
            let (fds_tx, fds_rx) = std::sync::mpsc::channel();
            let ends_cell = cell.clone();
            let job = std::thread::Builder::new()
                .name("fsprof-fends".into())
                .spawn_scoped(scope, move || {
                    let (parts, ring) = FaultParts::create(cpus.len(), ring_bytes(cpus.len()))?;
                    let (st, c) = (parts.starts.fd(), parts.counts.fd());
                    // A fresh cell: set once, here.
                    let _ = ends_cell.set(parts);
                    let _ = fds_tx.send((st, c));
                    attach_ends(end_progs(st, ring, c)?, &cpus)
                });
            let s = begun.finish(cell.clone());
            let raw = fds_rx
                .recv()
                .ok()
                .map(|(st, c)| group(fault_parts(t, st, c, around, marks)));
            // Loading panics only on a bug: the panic is passed on.
            let ends = job
                .ok()
                .map(|j| j.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
            (s, ends.map(|e| (e, raw)))
        });
        let mut s = s?;
        let faults = match faults {
            Some((ends, raw)) => {
                let ends = ends?;
                // The maps are made before their descriptors are sent.
                let raw =
                    raw.ok_or_else(|| attach_err("fault_start")(io::Error::other("no maps")))??;
                // The ends are attached (joined above).
                FaultParts::open_gate(&cell)?;
                FaultParts::read(&cell)?;
                let mut a = FaultsAttached {
                    _atts: ends.atts,
                    progs: ends.progs,
                    _maps: held,
                    shared: raw.shared,
                };
                a._atts.extend(raw.atts);
                a.progs.extend(raw.progs);
                a
            }
            // No thread: one after the other.
            None => s.fault_load()?.load()?.attach()?,
        };
        s.shared = faults.shared;
        s.faults = Some(faults);
        Ok(s)
    }

    /// Makes the map of followed processes and attaches the fork and exit
    /// followers, following no process yet; the fault programs are
    /// [`FaultSession::fault_load`]'s, to load (with their own maps and
    /// ring) and attach apart: until they are attached no fault runs any
    /// program, and the tree is followed all the same, so that they can be
    /// attached the moment a followed process first maps a file. On one
    /// thread: a second one, started while fsprof sets up the command,
    /// waited for a CPU until this one blocked (perf trace, this project's
    /// 2-CPU test machine), so that it only added its start.
    pub fn prepare() -> Result<FaultSession, Error> {
        Begun::new()?.finish(Arc::default())
    }

    /// What the fault programs are made of, the map of followed processes
    /// held: to load and attach on any thread, while the session follows
    /// the tree.
    pub fn fault_load(&self) -> Result<FaultLoad, Error> {
        Ok(FaultLoad {
            targets: dup(self.targets.fd())?,
            parts: self.parts.clone(),
            ring_bytes: ring_bytes(self.cpus.len()),
            around: self.around,
            marks: self.marks,
            cpus: self.cpus.clone(),
        })
    }

    /// Hands on the faults reported since the last call, in the order
    /// they ended (each thread's in its own order); returns how many
    /// (none before the fault programs are attached and the ring's reader
    /// started: those made until then are handed on after).
    pub fn drain(&mut self, mut f: impl FnMut(Fault)) -> usize {
        let Some(p) = self.parts.get().and_then(|p| p.ring.get()) else {
            return 0;
        };
        p.drain(|b| {
            if let Some(x) = Fault::parse(b) {
                f(x)
            }
        })
    }

    /// Times the kernel skipped one of the programs because a BPF program
    /// (or a BPF map call of any process, preempted on that CPU) was
    /// running there: faults not reported, or reported without their end.
    pub fn missed(&self) -> u64 {
        self._progs
            .iter()
            .filter_map(|p| p.recursion_misses().ok())
            .sum::<u64>()
            + self.faults.as_ref().map_or(0, FaultsAttached::missed)
    }

    /// Each program's run-time statistics (zero unless the kernel's are on,
    /// [`sys::enable_stats`]): what following faults costs per fault.
    pub fn run_stats(&self) -> Vec<sys::RunStats> {
        let mut v: Vec<sys::RunStats> = self
            ._progs
            .iter()
            .filter_map(|p| p.run_stats().ok())
            .collect();
        v.extend(self.faults.iter().flat_map(FaultsAttached::run_stats));
        v
    }

    /// A counter of the fault programs (0 before they are loaded).
    fn counter(&self, i: i32) -> u64 {
        self.parts
            .get()
            .and_then(|p| p.counts.lookup(&(i as u32).to_le_bytes()).ok())
            .flatten()
            .map_or(0, |v| u64::from_ne_bytes(v[..8].try_into().unwrap()))
    }

    /// Processes the map of followed processes holds alive at once.
    pub fn followed_entries(&self) -> u32 {
        self.targets.entries()
    }

    /// New processes of the followed tree that were not followed (the map
    /// of followed processes was full): their faults are not reported.
    pub fn unfollowed(&self) -> u64 {
        self.targets.unfollowed()
    }

    /// Faults the ring had no room for.
    pub fn lost(&self) -> u64 {
        self.counter(C_LOST)
    }

    /// Faults started (of followed tasks, instruction fetches aside).
    pub fn started(&self) -> u64 {
        self.counter(C_STARTS)
    }

    /// Ends that were not of the fault that started (dropped).
    pub fn other_ends(&self) -> u64 {
        self.counter(C_OTHER_END)
    }

    /// Faults started and not ended (failed ones included): 0 lets the
    /// end and around programs stop early.
    pub fn in_flight(&self) -> u64 {
        self.counter(C_IN_FLIGHT)
    }

    /// Faults taken on the mark's page (module doc): one or two (the
    /// kernel's string copy may read again a byte at a time) per process
    /// image that mapped a file through the shim.
    pub fn marks_taken(&self) -> u64 {
        self.counter(C_MARKS)
    }
}

/// A newly followed process's value: unmarked, unless no mark can arrive.
fn initial_value(marks: bool) -> u32 {
    if marks {
        FOLLOWED
    } else {
        FOLLOWED | MAPS_FILES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_parse_back() {
        let words = [
            5u64,
            7,
            (42u64 << 32) | 43,
            0x7000_1234,
            PF_WRITE | MAJOR_BIT,
            3,
            18,
        ];
        let b: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let f = Fault::parse(&b).unwrap();
        assert_eq!(
            f,
            Fault {
                start_ns: 5,
                dur_ns: 7,
                pid: 42,
                tid: 43,
                addr: 0x7000_1234,
                write: true,
                major: true,
                in_kernel: false,
                around: Some((3, 18)),
            }
        );
        let mut none = b.clone();
        none[40..48].copy_from_slice(&u64::MAX.to_ne_bytes());
        assert_eq!(Fault::parse(&none).unwrap().around, None);
        assert_eq!(Fault::parse(&b[..55]), None);
    }

    #[test]
    fn the_ring_grows_with_the_cpus_within_bounds() {
        assert_eq!(ring_bytes(0), 512 << 10);
        assert_eq!(ring_bytes(2), 512 << 10);
        assert_eq!(ring_bytes(3), 1 << 20);
        assert_eq!(ring_bytes(32), 8 << 20);
        assert_eq!(ring_bytes(4096), 16 << 20);
        assert_eq!(starts_entries(2), 4096);
        assert_eq!(starts_entries(64), 32768);
        assert_eq!(starts_entries(4096), 65536);
    }

    #[test]
    fn without_marks_every_followed_process_is_reported() {
        assert_eq!(initial_value(true) & MAPS_FILES, 0);
        assert_eq!(initial_value(false) & MAPS_FILES, MAPS_FILES);
        assert!(initial_value(true) & FOLLOWED != 0 && initial_value(false) & FOLLOWED != 0);
        assert!(MAPPING_MARK < MARK_PAGE_END as u64);
    }

    #[test]
    fn cpu_list_of_this_machine_is_not_empty() {
        assert!(!online_cpus().is_empty());
    }
}
