//! Page faults on file mappings as ops of the fs layer, `mapped_read` and
//! `mapped_write`, each timed from the fault's start to the kernel's
//! accounting of it: a program that reads or writes its files through
//! `mmap` makes no call, and without these its file I/O would not be in a
//! kernel profile at all. The same events as [`crate::faults`] (which
//! streams each fault of a traced program to `fsprof trace`), filed in
//! the kernel like every other fs op:
//!
//! - the raw tracepoints `exceptions:page_fault_user` and
//!   `page_fault_kernel` (a system call touching a mapping for the
//!   program) start a fault of a profiled task in the fs layer's
//!   per-thread start map: a store if the error code says so, else a
//!   load; instruction fetches and kernel addresses are left out;
//! - `filemap:mm_filemap_fault` (the page read into, or found in, the
//!   page cache), `filemap:mm_filemap_map_pages` (pages mapped around a
//!   read fault) and `writeback:writeback_dirty_folio` (a store making a
//!   cached page dirty) mark the thread's fault as one on a file mapping:
//!   anonymous memory (the heap, stacks) passes none of them;
//! - the software events `PERF_COUNT_SW_PAGE_FAULTS_MIN` and `_MAJ`, when
//!   the fault is accounted, file a marked fault's time.
//!
//! Not seen: a store to a page already dirty in the cache but mapped
//! read-only in the process (the kernel makes it writable without any of
//! the three), and faults that fail (SIGSEGV, SIGBUS: never accounted).

use crate::insn::{Alu, Insn, Jmp, Size, R0, R1, R10, R8, R9};
use crate::progs::{
    begin, begin_enter, begin_thread_exit, emit_record, end, lookup, store_thread_start,
    thread_key, Filter, Shared, FS_BASE, SAVED, START_KEY, START_VAL,
};

/// The fs ops, in this order from the index the layer gives them.
pub const OPS: [&str; 2] = ["mapped_read", "mapped_write"];

/// Tracepoints that mark a fault as one on a file mapping (raw; those
/// this kernel lacks are left out).
pub const MARKS: [(&str, &str); 3] = [
    ("filemap", "mm_filemap_fault"),
    ("filemap", "mm_filemap_map_pages"),
    ("writeback", "writeback_dirty_folio"),
];

/// The second word of a fault's key in the fs start map (the first is
/// the thread): apart from every fs op's index.
const PAIR: i32 = 0x0fa0_1700;

/// The start program (raw `page_fault_user`/`_kernel`: address, regs,
/// error code) of ops `read_idx` (a load) and `read_idx + 1` (a store).
pub fn start(f: &Filter, start_fd: i32, read_idx: u32) -> Vec<Insn> {
    let (mut a, out) = begin_enter(f);
    crate::faults::data_fault(&mut a, out);
    // The op: the write bit (bit 1) picks `mapped_write`.
    a.alu_imm(Alu::Rsh, R8, 1);
    a.alu_imm(Alu::And, R8, 1);
    a.alu_imm(Alu::Add, R8, (FS_BASE + read_idx) as i32);
    a.stx(Size::DW, R10, START_VAL + 8, R8);
    a.st_imm(Size::DW, R10, START_VAL + 16, 0);
    thread_key(&mut a, PAIR);
    store_thread_start(&mut a, start_fd);
    end(a, out)
}

/// A [`MARKS`] tracepoint: the thread's fault in progress, if any, is on
/// a file mapping.
pub fn mark(start_fd: i32) -> Vec<Insn> {
    let (mut a, out) = begin();
    thread_key(&mut a, PAIR);
    lookup(&mut a, start_fd, START_KEY);
    a.jmp_imm(Jmp::Eq, R0, 0, out);
    a.ldx(Size::DW, R1, R0, 0);
    a.jmp_imm(Jmp::Eq, R1, 0, out);
    a.st_imm(Size::DW, R0, 16, 1);
    end(a, out)
}

/// The end program (a page-fault software event): the thread's fault,
/// filed if it was marked.
pub fn end_prog(sh: &Shared, start_fd: i32) -> Vec<Insn> {
    let (mut a, out) = begin_thread_exit(sh, start_fd, PAIR);
    a.ldx(Size::DW, R1, R10, SAVED);
    a.jmp_imm(Jmp::Eq, R1, 0, out);
    a.mov_imm(R9, 0);
    emit_record(&mut a, sh);
    end(a, out)
}
