//! Per-call attribution of block I/O: how long each system call slept
//! uninterruptibly while block I/O finished, decided in the kernel as the
//! sleeps happen (the `block-wait` layer).
//!
//! Rule (docs/profile-format.md, "Layered attribution"):
//!
//! 1. **Sleep.** A profiled thread inside a profiled system call sleeps
//!    uninterruptibly (`sched_switch` with the task in
//!    `TASK_UNINTERRUPTIBLE`, not preempted) until it runs again. Only the
//!    part of the sleep after the call's start counts.
//! 2. **Block wait.** The sleep is a block wait when a block request
//!    completed (on any device) between its start and its end, or when
//!    the wake-up came from a block completion: `sched_waking` on the CPU
//!    that ran `block_rq_complete`, before that CPU switched task. The
//!    second case is a reader that goes to sleep on a page after its
//!    request's completion was traced but before the completion's end-I/O
//!    work unlocked the page (a fast reader following read-ahead does this
//!    for about one page-cache folio in four). The wake-up may also come
//!    before the switch-out is traced (between the thread's decision to
//!    sleep and the switch; the waker does not wait for it): the mark is
//!    set whether or not the thread is recorded asleep, and the
//!    switch-out keeps it only if the task's state is no longer
//!    uninterruptible, i.e. the wake-up has already happened. The first
//!    case covers waits on
//!    I/O done by someone else: read-ahead issued by another thread or
//!    process, the journal thread's commit an `fsync` waits for, dirty-page
//!    throttling while writeback runs.
//! 3. At `sys_exit`, a call with charged time files it, capped at the
//!    call's own latency, in the `block-wait` layer under the syscall's
//!    name: its calls are the calls that waited, its total the time they
//!    waited.
//!
//! No request is owned by anybody, so a stacked device's requests cannot
//! be counted twice: what is counted is the caller's sleep, once. A sleep
//! for another reason (a mutex, `vfork`) that happens to overlap another
//! process's I/O completion is charged too; on a machine busy with other
//! I/O the figure approaches the call's whole D-state time.
//!
//! The charge accumulates in the third word of the thread's syscall start
//! entry (reset at every `sys_enter`), so the syscall exit path pays one
//! load and no extra map lookup. Costs per event: every context switch, a
//! per-CPU array store and an array lookup; while a profiled thread is
//! asleep in a call, also a hash lookup of the task that runs next; when a
//! profiled thread goes to sleep uninterruptibly, the filter and three hash
//! operations (and a read of the task's state if it carries a mark). Every wake-up, one per-CPU array lookup (and a hash lookup
//! only while a block completion runs on that CPU); every block
//! completion, two array stores. A counter of the profiled threads asleep
//! in a call lets the other switches stop early; if the LRU threads map
//! ever dropped a sleeper's entry the counter would stay above zero, which
//! costs the early stop, never a wrong charge.

use crate::insn::{helper, Alu, Asm, Insn, Jmp, Label, Size, R0, R1, R10, R3, R6, R7, R8, R9};
use crate::progs::{self, lookup, update, Filter};

/// What the block and scheduler programs need to attribute.
#[derive(Clone, Debug)]
pub struct Charge {
    /// thread id → {pid_tgid, asleep since, woken by a block completion}.
    pub threads_fd: i32,
    /// One entry: {the time of the last block request completion, the
    /// number of profiled threads asleep in a call}.
    pub global_fd: i32,
    /// Per CPU, one entry: the time of the block completion running on
    /// this CPU, 0 once the CPU has switched task since.
    pub completing_fd: i32,
    /// The syscall layer's per-thread start map.
    pub sys_start_fd: i32,
    pub filter: Filter,
    /// Offset of `pid` (the thread id) in `struct task_struct`, from BTF.
    pub task_pid: u32,
    /// Offset of `__state` in `struct task_struct`, from BTF.
    pub task_state: u32,
}

/// Value sizes of the threads map and of the global entry; the per-CPU
/// entry is one u64.
pub const THREAD_VAL_SIZE: usize = 24;
pub const GLOBAL_VAL_SIZE: usize = 16;

/// `TASK_UNINTERRUPTIBLE` (include/linux/sched.h; also set in
/// `TASK_KILLABLE`, which I/O waits use).
const TASK_UNINTERRUPTIBLE: i32 = 2;

// Stack slots below those of crate::progs and crate::blockrq.
const T_KEY: i16 = -176; // 8 bytes: a thread id
const ZERO: i16 = -184; // 4 bytes: key 0 of the array maps
const BT_VAL: i16 = -216; // 24 bytes {pid_tgid, asleep since, woken}

/// r0 = entry 0 of the array map `fd` (never null for an array, checked
/// anyway for the verifier; jumps to `out` if it is).
fn entry0(a: &mut Asm, fd: i32, out: Label) {
    a.st_imm(Size::W, R10, ZERO, 0);
    lookup(a, fd, ZERO);
    a.jmp_imm(Jmp::Eq, R0, 0, out);
}

/// T_KEY = the thread id of the task pointed to by `task` (probe read).
/// Clobbers r0-r5.
fn task_key(a: &mut Asm, c: &Charge, task: u8) {
    progs::probe(a, R1, task, c.task_pid, Size::W);
    a.stx(Size::DW, R10, T_KEY, R1);
}

/// At a block request's completion (time at `now_slot`): the last
/// completion, and the completion running on this CPU. Clobbers r0-r5.
pub fn emit_completed(a: &mut Asm, c: &Charge, now_slot: i16) {
    let done = a.label();
    let global = a.label();
    entry0(a, c.completing_fd, global);
    a.ldx(Size::DW, R1, R10, now_slot);
    a.stx(Size::DW, R0, 0, R1);
    a.bind(global);
    entry0(a, c.global_fd, done);
    a.ldx(Size::DW, R1, R10, now_slot);
    a.stx(Size::DW, R0, 0, R1);
    a.bind(done);
}

/// raw tracepoint sched_waking(struct task_struct *p): a profiled thread
/// asleep uninterruptibly, woken while a block completion runs on this
/// CPU (rule 2).
pub fn sched_waking(c: &Charge) -> Vec<Insn> {
    let mut a = Asm::new();
    let out = a.label();
    a.ldx(Size::DW, R6, R1, 0);
    entry0(&mut a, c.completing_fd, out);
    a.ldx(Size::DW, R1, R0, 0);
    a.jmp_imm(Jmp::Eq, R1, 0, out);
    task_key(&mut a, c, R6);
    lookup(&mut a, c.threads_fd, T_KEY);
    a.jmp_imm(Jmp::Eq, R0, 0, out);
    // Also when the thread is not (yet) recorded asleep: the wake-up can
    // come between its decision to sleep and its switch-out, which then
    // keeps the mark (see sched_switch).
    a.st_imm(Size::DW, R0, 16, 1);
    progs::end(a, out)
}

/// raw tracepoint sched_switch(bool preempt, struct task_struct *prev,
/// struct task_struct *next, unsigned int prev_state): rules 1 and 2.
/// Most switches stop early: the task going to sleep is checked only when
/// it sleeps uninterruptibly, and the task that runs next is looked up
/// only while some profiled thread is asleep in a call.
pub fn sched_switch(c: &Charge) -> Vec<Insn> {
    let mut a = Asm::new();
    let out = a.label();
    let next_side = a.label();
    let cpu_done = a.label();
    a.mov(R6, R1);
    // Whatever completed on this CPU has finished its end-I/O work.
    entry0(&mut a, c.completing_fd, cpu_done);
    a.st_imm(Size::DW, R0, 0, 0);
    a.bind(cpu_done);
    record_sleep(&mut a, c, next_side);
    // The task that runs again, if any profiled thread is asleep.
    a.bind(next_side);
    charge_wake_up(&mut a, c, out);
    progs::end(a, out)
}

/// Rule 1, for the task going to sleep (prev is current; the context is
/// in R6): uninterruptibly, not preempted, a profiled thread inside a
/// profiled call. Records since when it sleeps and counts it asleep;
/// jumps to `done` when it is not such a task.
fn record_sleep(a: &mut Asm, c: &Charge, done: Label) {
    // The task going to sleep (prev is current): uninterruptibly, not
    // preempted, a profiled thread inside a profiled call.
    a.ldx(Size::DW, R1, R6, 0);
    a.jmp_imm(Jmp::Ne, R1, 0, done);
    a.ldx(Size::DW, R1, R6, 24);
    a.alu_imm(Alu::And, R1, TASK_UNINTERRUPTIBLE);
    a.jmp_imm(Jmp::Eq, R1, 0, done);
    progs::emit_filter(a, &c.filter, done);
    a.call(helper::GET_CURRENT_PID_TGID);
    a.mov(R7, R0);
    progs::start_key(a, R7, 0);
    lookup(a, c.sys_start_fd, progs::START_KEY);
    a.jmp_imm(Jmp::Eq, R0, 0, done);
    a.ldx(Size::DW, R1, R0, 0);
    a.jmp_imm(Jmp::Eq, R1, 0, done);
    a.mov(R1, R7);
    a.alu_imm(Alu::Lsh, R1, 32);
    a.alu_imm(Alu::Rsh, R1, 32);
    a.stx(Size::DW, R10, T_KEY, R1);
    // Woken already: a block completion's wake-up that came after the
    // thread chose to sleep but before this switch-out (the waker does not
    // wait for the switch to record it) marked the entry, and the task's
    // state is no longer uninterruptible (TASK_WAKING or running).
    let fresh = a.label();
    a.st_imm(Size::DW, R10, BT_VAL + 16, 0);
    lookup(a, c.threads_fd, T_KEY);
    a.jmp_imm(Jmp::Eq, R0, 0, fresh);
    a.ldx(Size::DW, R1, R0, 16);
    a.jmp_imm(Jmp::Eq, R1, 0, fresh);
    a.ldx(Size::DW, R3, R6, 8);
    progs::probe(a, R1, R3, c.task_state, Size::W);
    a.alu_imm(Alu::And, R1, TASK_UNINTERRUPTIBLE);
    a.jmp_imm(Jmp::Ne, R1, 0, fresh);
    a.st_imm(Size::DW, R10, BT_VAL + 16, 1);
    a.bind(fresh);
    a.stx(Size::DW, R10, BT_VAL, R7);
    a.call(helper::KTIME_GET_NS);
    a.stx(Size::DW, R10, BT_VAL + 8, R0);
    update(a, c.threads_fd, T_KEY, BT_VAL, 0);
    a.jmp_imm(Jmp::Ne, R0, 0, done);
    entry0(a, c.global_fd, done);
    a.mov_imm(R1, 1);
    a.atomic_add64(R0, 8, R1);
}

/// Rule 2, for the task that runs again (the context is in R6) while some
/// profiled thread is asleep: a sleep a block completion ended, or during
/// which one completed, is charged to the call it began in. Jumps to `out`
/// when there is nothing to charge.
fn charge_wake_up(a: &mut Asm, c: &Charge, out: Label) {
    entry0(a, c.global_fd, out);
    a.ldx(Size::DW, R1, R0, 8);
    a.jmp_imm(Jmp::Eq, R1, 0, out);
    a.ldx(Size::DW, R3, R6, 16);
    task_key(a, c, R3);
    lookup(a, c.threads_fd, T_KEY);
    a.jmp_imm(Jmp::Eq, R0, 0, out);
    a.mov(R6, R0);
    a.ldx(Size::DW, R7, R6, 8);
    a.jmp_imm(Jmp::Eq, R7, 0, out);
    a.st_imm(Size::DW, R6, 8, 0);
    a.ldx(Size::DW, R8, R6, 16);
    a.st_imm(Size::DW, R6, 16, 0);
    entry0(a, c.global_fd, out);
    a.mov_imm(R1, -1);
    a.atomic_add64(R0, 8, R1);
    // Woken by a block completion, or one completed while it slept.
    let charged = a.label();
    a.jmp_imm(Jmp::Ne, R8, 0, charged);
    a.ldx(Size::DW, R1, R0, 0);
    a.jmp_reg(Jmp::Lt, R1, R7, out);
    a.bind(charged);
    // The call it is in, if any (the sleep began inside one; the entry is
    // gone or zeroed if the call ended meanwhile).
    a.ldx(Size::DW, R1, R6, 0);
    progs::start_key(a, R1, 0);
    lookup(a, c.sys_start_fd, progs::START_KEY);
    a.jmp_imm(Jmp::Eq, R0, 0, out);
    a.mov(R8, R0);
    a.ldx(Size::DW, R1, R8, 0);
    a.jmp_imm(Jmp::Eq, R1, 0, out);
    let later = a.label();
    a.jmp_reg(Jmp::Le, R1, R7, later);
    a.mov(R7, R1);
    a.bind(later);
    a.call(helper::KTIME_GET_NS);
    a.mov(R9, R0);
    a.jmp_reg(Jmp::Le, R9, R7, out);
    a.alu_reg(Alu::Sub, R9, R7);
    a.atomic_add64(R8, 16, R9);
}
