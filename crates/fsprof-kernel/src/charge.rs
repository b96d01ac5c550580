//! Per-call attribution of block I/O: which system call waited for which
//! block requests, decided in the kernel as the requests happen (the
//! `block-wait` layer).
//!
//! Rule (docs/profile-format.md, "Layered attribution"):
//!
//! 1. **Owner.** A block request belongs to the target thread that queued
//!    it: the one running when `block_rq_insert` (or, for a request issued
//!    directly, `block_rq_issue`) fires for it. Requests queued by kernel
//!    threads — writeback, the journal, a loop device's worker issuing to
//!    the disk below it — belong to nobody, so a stacked device's requests
//!    are counted once (at the device the thread queued to).
//! 2. **Wait.** A thread waits for its block I/O from the moment it goes
//!    to sleep uninterruptibly (`sched_switch` with the task in
//!    `TASK_UNINTERRUPTIBLE`, not preempted) until it runs again, for the
//!    sleeps during which one of its own requests completed. Sleeps
//!    without such a completion (a lock, the journal thread's commit that
//!    an fsync waits for) are not block waits of that thread.
//! 3. **Charge.** The wait is charged to the system call the thread is in,
//!    from no earlier than the call's start. A call that returned while
//!    its requests were still in flight (asynchronous readahead, a write
//!    it did not wait for) is not charged: it did not sleep for them.
//! 4. At `sys_exit`, a call with charged time files it, capped at the
//!    call's own latency, in the `block-wait` layer under the syscall's
//!    name: its calls are the calls that waited, its total the time they
//!    waited.
//!
//! The charge accumulates in the third word of the thread's syscall start
//! entry (reset at every `sys_enter`), so the syscall exit path pays one
//! load and no extra map lookup. The scheduler hook costs two hash lookups
//! per context switch while the syscall and block layers are both on.

use crate::insn::{helper, Alu, Asm, Insn, Jmp, Size, R0, R1, R10, R2, R3, R6, R7, R8, R9};
use crate::progs::{self, delete, lookup, update, Filter};

/// What the block programs need to attribute: the maps, the filter of
/// the profiled tasks, and where a task's thread id is.
#[derive(Clone, Debug)]
pub struct Charge {
    /// `struct request *` → {owner pid_tgid, time owned}.
    pub owner_fd: i32,
    /// thread id → {pid_tgid, asleep since, last own completion}.
    pub threads_fd: i32,
    /// The syscall layer's per-thread start map.
    pub sys_start_fd: i32,
    pub filter: Filter,
    /// Offset of `pid` (the thread id) in `struct task_struct`, from BTF.
    pub task_pid: u32,
}

/// Value sizes of the two maps.
pub const OWNER_VAL_SIZE: usize = 16;
pub const THREAD_VAL_SIZE: usize = 24;

/// `TASK_UNINTERRUPTIBLE` (include/linux/sched.h; also set in
/// `TASK_KILLABLE`, which I/O waits use).
const TASK_UNINTERRUPTIBLE: i32 = 2;

// Stack slots below those of crate::progs and crate::blockrq.
const T_KEY: i16 = -176; // 8 bytes: a thread id
const OWN_VAL: i16 = -192; // 16 bytes {pid_tgid, ts}
const BT_INIT: i16 = -216; // 24 bytes {pid_tgid, asleep since, completed at}
const NOW: i16 = -224;
const PROBE: i16 = -232;

/// T_KEY = the thread id in the low half of `reg` (a pid_tgid).
fn thread_key(a: &mut Asm, reg: u8) {
    a.mov(R1, reg);
    a.alu_imm(Alu::Lsh, R1, 32);
    a.alu_imm(Alu::Rsh, R1, 32);
    a.stx(Size::DW, R10, T_KEY, R1);
}

/// Makes the current task the owner of the request at `rq_slot` if it is a
/// profiled task and the request has no owner yet (rule 1). Clobbers r0-r9.
pub fn emit_take_ownership(a: &mut Asm, c: &Charge, rq_slot: i16) {
    let done = a.label();
    progs::emit_filter(a, &c.filter, done);
    lookup(a, c.owner_fd, rq_slot);
    a.jmp_imm(Jmp::Ne, R0, 0, done);
    a.call(helper::GET_CURRENT_PID_TGID);
    a.mov(R7, R0);
    a.call(helper::KTIME_GET_NS);
    a.stx(Size::DW, R10, OWN_VAL, R7);
    a.stx(Size::DW, R10, OWN_VAL + 8, R0);
    update(a, c.owner_fd, rq_slot, OWN_VAL, 0);
    thread_key(a, R7);
    lookup(a, c.threads_fd, T_KEY);
    a.jmp_imm(Jmp::Ne, R0, 0, done);
    a.stx(Size::DW, R10, BT_INIT, R7);
    a.st_imm(Size::DW, R10, BT_INIT + 8, 0);
    a.st_imm(Size::DW, R10, BT_INIT + 16, 0);
    update(a, c.threads_fd, T_KEY, BT_INIT, 0);
    a.bind(done);
}

/// At the completion of the request at `rq_slot` (time at `now_slot`):
/// the owner's last own completion. Clobbers r0-r9.
pub fn emit_charge(a: &mut Asm, c: &Charge, rq_slot: i16, now_slot: i16) {
    let done = a.label();
    lookup(a, c.owner_fd, rq_slot);
    a.jmp_imm(Jmp::Eq, R0, 0, done);
    a.ldx(Size::DW, R7, R0, 0);
    thread_key(a, R7);
    delete(a, c.owner_fd, rq_slot);
    lookup(a, c.threads_fd, T_KEY);
    a.jmp_imm(Jmp::Eq, R0, 0, done);
    a.ldx(Size::DW, R1, R10, now_slot);
    a.stx(Size::DW, R0, 16, R1);
    a.bind(done);
}

/// raw tracepoint sched_switch(bool preempt, struct task_struct *prev,
/// struct task_struct *next, unsigned int prev_state): rules 2 and 3.
pub fn sched_switch(c: &Charge) -> Vec<Insn> {
    let mut a = Asm::new();
    let out = a.label();
    let next_side = a.label();
    a.mov(R6, R1);
    a.call(helper::KTIME_GET_NS);
    a.stx(Size::DW, R10, NOW, R0);
    // The task going to sleep (prev is current): uninterruptibly, not
    // preempted.
    a.ldx(Size::DW, R1, R6, 0);
    a.jmp_imm(Jmp::Ne, R1, 0, next_side);
    a.ldx(Size::DW, R1, R6, 24);
    a.alu_imm(Alu::And, R1, TASK_UNINTERRUPTIBLE);
    a.jmp_imm(Jmp::Eq, R1, 0, next_side);
    a.call(helper::GET_CURRENT_PID_TGID);
    thread_key(&mut a, R0);
    lookup(&mut a, c.threads_fd, T_KEY);
    a.jmp_imm(Jmp::Eq, R0, 0, next_side);
    a.ldx(Size::DW, R1, R10, NOW);
    a.stx(Size::DW, R0, 8, R1);
    // The task that runs again.
    a.bind(next_side);
    a.st_imm(Size::DW, R10, PROBE, 0);
    a.ldx(Size::DW, R3, R6, 16);
    a.alu_imm(Alu::Add, R3, c.task_pid as i32);
    a.mov(R1, R10);
    a.alu_imm(Alu::Add, R1, PROBE as i32);
    a.mov_imm(R2, 4);
    a.call(helper::PROBE_READ_KERNEL);
    a.ldx(Size::W, R1, R10, PROBE);
    a.stx(Size::DW, R10, T_KEY, R1);
    lookup(&mut a, c.threads_fd, T_KEY);
    a.jmp_imm(Jmp::Eq, R0, 0, out);
    a.mov(R6, R0);
    a.ldx(Size::DW, R7, R6, 8);
    a.jmp_imm(Jmp::Eq, R7, 0, out);
    a.st_imm(Size::DW, R6, 8, 0);
    // Slept for nothing of its own: not a block wait.
    a.ldx(Size::DW, R1, R6, 16);
    a.jmp_reg(Jmp::Lt, R1, R7, out);
    // The call it is in, if any.
    a.ldx(Size::DW, R1, R6, 0);
    progs::start_key(&mut a, R1, 0);
    lookup(&mut a, c.sys_start_fd, progs::START_KEY);
    a.jmp_imm(Jmp::Eq, R0, 0, out);
    a.mov(R8, R0);
    a.ldx(Size::DW, R1, R8, 0);
    a.jmp_imm(Jmp::Eq, R1, 0, out);
    let later = a.label();
    a.jmp_reg(Jmp::Le, R1, R7, later);
    a.mov(R7, R1);
    a.bind(later);
    a.ldx(Size::DW, R9, R10, NOW);
    a.jmp_reg(Jmp::Le, R9, R7, out);
    a.alu_reg(Alu::Sub, R9, R7);
    a.atomic_add64(R8, 16, R9);
    progs::end(a, out)
}
