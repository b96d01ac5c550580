//! Capture keyed by cgroup, for `fsprof agent`: every observation is filed
//! under the cgroup v2 id of the task that caused it, beside its op and
//! bucket, and the programs tell user space about cgroups as they come
//! and go, so each can be named while its directory still exists.
//!
//! - Keys. A session started with [`crate::Options::by_cgroup`] keys its
//!   counters by `{cgroup, op}` and its histograms by `{cgroup, op,
//!   bucket}` ([`emit_record`]); every other part of the programs is the
//!   per-command session's.
//! - Whose cgroup. A system call, a file-system call and a FUSE request
//!   belong to the task that made it (for FUSE, the task waiting for the
//!   reply). A block request belongs to the task that submitted its bio:
//!   `block_io_start` runs in the submitter's context, before the request
//!   is queued, and stores its cgroup under the request pointer
//!   ([`io_start`]); a request issued without one (a flush the block
//!   layer makes itself; a request from before the session) takes the
//!   issuing task's ([`issue_fallback`]); the completion takes the entry
//!   and files under it ([`load_rq_cgroup`]). The bio's own blkcg is not
//!   used: on hybrid hosts the io controller lives in a v1 hierarchy, whose
//!   ids are not v2 cgroup ids.
//! - Names. `cgroup:cgroup_mkdir` (raw, with `struct cgroup` read at BTF
//!   offsets) copies each new v2 cgroup's id and path into a map user
//!   space drains; `cgroup:cgroup_rmdir` records when one goes
//!   ([`mkdir`], [`rmdir`]). Cgroups of other hierarchies (v1 on hybrid
//!   hosts) are left out in the kernel.

use crate::btf::Btf;
use crate::insn::{helper, Alu, Asm, Insn, Jmp, Label, Size, R0, R1, R10, R2, R3, R4, R6, R7, R8};
use crate::progs::{self, probe, Shared};

/// Stack slots of their own, below every other program's.
/// The cgroup id an observation is filed under.
pub(crate) const CG: i16 = -224;
/// `{cgroup, op key, slot}`; its first 16 bytes are the counters' key.
const CG_KEY: i16 = -248;
/// Key 0 of a per-CPU scratch array.
const ZERO: i16 = -252;

/// Key sizes of the counter and histogram maps of a by-cgroup session.
pub const STATS_KEY_SIZE: usize = 16;
pub const HIST_KEY_SIZE: usize = 24;

/// A new cgroup's map value: the path's length (with its NUL, as
/// `bpf_probe_read_kernel_str` returns it, or a negative error), then the
/// path. Longer paths are cut at [`PATH_BYTES`] − 1 bytes.
pub const NEW_VAL_SIZE: usize = 512;
pub const PATH_BYTES: usize = NEW_VAL_SIZE - 8;

/// What an exit program needs to file by cgroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByCgroup {
    /// Request pointer → cgroup id of its submitter (an LRU hash).
    pub rq_fd: i32,
}

/// Adds one observation under `{CG, r8, bucket of r7}`: r7 = value, r8 =
/// op key, r9 = 1 if it failed, the cgroup id at [`CG`]. Clobbers r0-r6.
pub(crate) fn emit_record(a: &mut Asm, sh: &Shared) {
    progs::emit_bucket(a, sh);
    a.ldx(Size::DW, R1, R10, CG);
    a.stx(Size::DW, R10, CG_KEY, R1);
    a.stx(Size::DW, R10, CG_KEY + 8, R8);
    a.stx(Size::DW, R10, CG_KEY + 16, R6);
    let hist = a.label();
    progs::emit_stats_hash(a, sh, hist, CG_KEY);
    progs::emit_hist(a, sh, hist, CG_KEY);
}

/// [`CG`] = the current task's cgroup v2 id. Clobbers r0-r5.
pub(crate) fn store_current(a: &mut Asm) {
    a.call(helper::GET_CURRENT_CGROUP_ID);
    a.stx(Size::DW, R10, CG, R0);
}

/// [`CG`] = the cgroup stored for the request whose pointer is at stack
/// offset `rq`, and the entry removed; 0 (no cgroup: folded into `other`
/// by the agent) when there is none. Clobbers r0-r5.
pub(crate) fn load_rq_cgroup(a: &mut Asm, by: &ByCgroup, rq: i16) {
    let done = a.label();
    a.st_imm(Size::DW, R10, CG, 0);
    progs::lookup(a, by.rq_fd, rq);
    a.jmp_imm(Jmp::Eq, R0, 0, done);
    a.ldx(Size::DW, R1, R0, 0);
    a.stx(Size::DW, R10, CG, R1);
    progs::delete(a, by.rq_fd, rq);
    a.bind(done);
}

/// A raw block_rq_* program storing the current task's cgroup under the
/// request (its first argument) with `flags`.
fn rq_cgroup(by: &ByCgroup, flags: i32) -> Vec<Insn> {
    let mut a = Asm::new();
    let out = a.label();
    a.ldx(Size::DW, R6, R1, 0);
    a.stx(Size::DW, R10, CG_KEY, R6);
    store_current(&mut a);
    progs::update(&mut a, by.rq_fd, CG_KEY, CG, flags);
    progs::end(a, out)
}

/// raw tracepoint block_io_start(struct request *rq), in the context of
/// the task submitting the bio: the request is that task's cgroup's.
pub fn io_start(by: &ByCgroup) -> Vec<Insn> {
    rq_cgroup(by, 0)
}

/// raw tracepoint block_rq_issue: a request with no cgroup yet takes the
/// issuing task's (BPF_NOEXIST: an entry from `block_io_start` stays).
pub fn issue_fallback(by: &ByCgroup) -> Vec<Insn> {
    rq_cgroup(by, 1)
}

/// Offsets in `struct cgroup` and what it points to, from BTF.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CgLayout {
    kn: u32,
    root: u32,
    kn_id: u32,
    hierarchy_id: u32,
}

impl CgLayout {
    /// The layout; the error names what is missing.
    pub fn from_btf(btf: &Btf) -> Result<CgLayout, String> {
        let member = |s: &str, m: &str, size: u32| -> Result<u32, String> {
            match btf.member(s, m) {
                Some((off, sz)) if sz == size => Ok(off),
                Some((_, sz)) => Err(format!("struct {s}.{m} is {sz} bytes, not {size}")),
                None => Err(format!("kernel BTF has no struct {s}.{m}")),
            }
        };
        Ok(CgLayout {
            kn: member("cgroup", "kn", 8)?,
            root: member("cgroup", "root", 8)?,
            kn_id: member("kernfs_node", "id", 8)?,
            hierarchy_id: member("cgroup_root", "hierarchy_id", 4)?,
        })
    }

    pub fn vmlinux() -> Result<CgLayout, String> {
        CgLayout::from_btf(Btf::vmlinux()?)
    }
}

/// Opens a raw cgroup_* program (args: `struct cgroup *`, `const char
/// *path`): r6 = the cgroup, r7 = the path, r8 = the cgroup's id (also at
/// [`CG`]); jumps to the returned label unless it is a v2 cgroup
/// (hierarchy 0, the default hierarchy).
fn begin_cgroup(l: &CgLayout) -> (Asm, Label) {
    let mut a = Asm::new();
    let out = a.label();
    a.ldx(Size::DW, R6, R1, 0);
    a.ldx(Size::DW, R7, R1, 8);
    probe(&mut a, R8, R6, l.root, Size::DW);
    a.jmp_imm(Jmp::Eq, R8, 0, out);
    probe(&mut a, R8, R8, l.hierarchy_id, Size::W);
    a.jmp_imm(Jmp::Ne, R8, 0, out);
    probe(&mut a, R8, R6, l.kn, Size::DW);
    a.jmp_imm(Jmp::Eq, R8, 0, out);
    probe(&mut a, R8, R8, l.kn_id, Size::DW);
    a.stx(Size::DW, R10, CG, R8);
    (a, out)
}

/// raw tracepoint cgroup_mkdir: id → {length, path} in `new_fd`, built in
/// the per-CPU `scratch_fd` (one [`NEW_VAL_SIZE`] value: more than the
/// stack holds).
pub fn mkdir(l: &CgLayout, scratch_fd: i32, new_fd: i32) -> Vec<Insn> {
    let (mut a, out) = begin_cgroup(l);
    a.st_imm(Size::W, R10, ZERO, 0);
    progs::lookup(&mut a, scratch_fd, ZERO);
    a.jmp_imm(Jmp::Eq, R0, 0, out);
    a.mov(R6, R0);
    a.mov(R1, R6);
    a.alu_imm(Alu::Add, R1, 8);
    a.mov_imm(R2, PATH_BYTES as i32);
    a.mov(R3, R7);
    a.call(helper::PROBE_READ_KERNEL_STR);
    a.stx(Size::DW, R6, 0, R0);
    a.ld_map(R1, new_fd);
    a.mov(R2, R10);
    a.alu_imm(Alu::Add, R2, CG as i32);
    a.mov(R3, R6);
    a.mov_imm(R4, 0);
    a.call(helper::MAP_UPDATE_ELEM);
    progs::end(a, out)
}

/// raw tracepoint cgroup_rmdir: id → when (ktime ns) in `gone_fd`.
pub fn rmdir(l: &CgLayout, gone_fd: i32) -> Vec<Insn> {
    let (mut a, out) = begin_cgroup(l);
    a.call(helper::KTIME_GET_NS);
    a.stx(Size::DW, R10, CG_KEY, R0);
    progs::update(&mut a, gone_fd, CG, CG_KEY, 0);
    progs::end(a, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_assemble() {
        let l = CgLayout {
            kn: 288,
            root: 560,
            kn_id: 88,
            hierarchy_id: 12,
        };
        assert!(mkdir(&l, 3, 4).len() > 30);
        assert!(rmdir(&l, 4).len() > 20);
        let by = ByCgroup { rq_fd: 5 };
        assert_eq!(io_start(&by).len(), issue_fallback(&by).len());
    }
}
