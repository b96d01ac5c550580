//! A small eBPF instruction builder.
//!
//! The programs are generated at run time instead of being compiled from C so
//! that building fsprof needs no clang, no kernel headers and no libelf: the
//! only inputs are the tracepoint layouts the running kernel publishes in
//! tracefs. The builder covers exactly the instructions the generators use.

/// Registers. R10 is the read-only frame pointer.
pub const R0: u8 = 0;
pub const R1: u8 = 1;
pub const R2: u8 = 2;
pub const R3: u8 = 3;
pub const R4: u8 = 4;
pub const R5: u8 = 5;
pub const R6: u8 = 6;
pub const R7: u8 = 7;
pub const R8: u8 = 8;
pub const R9: u8 = 9;
pub const R10: u8 = 10;

const LD: u8 = 0x00;
const LDX: u8 = 0x01;
const ST: u8 = 0x02;
const STX: u8 = 0x03;
const JMP: u8 = 0x05;
const ALU64: u8 = 0x07;
const MEM: u8 = 0x60;
const ATOMIC: u8 = 0xc0;
const IMM: u8 = 0x00;
const K: u8 = 0x00;
const X: u8 = 0x08;

/// Access sizes.
#[derive(Clone, Copy, Debug)]
pub enum Size {
    B = 0x10,
    H = 0x08,
    W = 0x00,
    DW = 0x18,
}

impl Size {
    /// The size of a tracepoint field of `bytes` bytes.
    pub fn of(bytes: usize) -> Option<Size> {
        match bytes {
            1 => Some(Size::B),
            2 => Some(Size::H),
            4 => Some(Size::W),
            8 => Some(Size::DW),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub enum Alu {
    Add = 0x00,
    Sub = 0x10,
    Mul = 0x20,
    Or = 0x40,
    And = 0x50,
    Lsh = 0x60,
    Rsh = 0x70,
    Xor = 0xa0,
    Mov = 0xb0,
    Arsh = 0xc0,
}

#[derive(Clone, Copy, Debug)]
pub enum Jmp {
    Eq = 0x10,
    Gt = 0x20,
    Ge = 0x30,
    Ne = 0x50,
    Sgt = 0x60,
    Sge = 0x70,
    Lt = 0xa0,
    Le = 0xb0,
    Slt = 0xc0,
}

/// Kernel helper function ids (stable UAPI numbers).
pub mod helper {
    pub const MAP_LOOKUP_ELEM: i32 = 1;
    pub const MAP_UPDATE_ELEM: i32 = 2;
    pub const MAP_DELETE_ELEM: i32 = 3;
    pub const KTIME_GET_NS: i32 = 5;
    pub const GET_CURRENT_PID_TGID: i32 = 14;
    pub const GET_CURRENT_COMM: i32 = 16;
    pub const GET_CURRENT_CGROUP_ID: i32 = 80;
    pub const PROBE_READ_KERNEL: i32 = 113;
    pub const PROBE_READ_KERNEL_STR: i32 = 115;
    pub const RINGBUF_OUTPUT: i32 = 130;
    pub const RINGBUF_QUERY: i32 = 134;
    /// Linux 5.15.
    pub const GET_ATTACH_COOKIE: i32 = 174;
}

/// One encoded instruction, laid out as `struct bpf_insn`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Insn {
    pub code: u8,
    pub regs: u8,
    pub off: i16,
    pub imm: i32,
}

fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (src << 4) | (dst & 0x0f),
        off,
        imm,
    }
}

/// A jump target. Created by [`Asm::label`], placed by [`Asm::bind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Label(usize);

/// Program under construction, with forward jumps resolved at [`Asm::finish`].
#[derive(Default)]
pub struct Asm {
    code: Vec<Insn>,
    labels: Vec<Option<usize>>,
    fixups: Vec<(usize, Label)>,
}

impl Asm {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    pub fn bind(&mut self, l: Label) {
        assert!(self.labels[l.0].is_none(), "label bound twice");
        self.labels[l.0] = Some(self.code.len());
    }

    pub fn alu_imm(&mut self, op: Alu, dst: u8, imm: i32) {
        self.code.push(insn(ALU64 | op as u8 | K, dst, 0, 0, imm));
    }

    pub fn alu_reg(&mut self, op: Alu, dst: u8, src: u8) {
        self.code.push(insn(ALU64 | op as u8 | X, dst, src, 0, 0));
    }

    pub fn mov_imm(&mut self, dst: u8, imm: i32) {
        self.alu_imm(Alu::Mov, dst, imm);
    }

    pub fn mov(&mut self, dst: u8, src: u8) {
        self.alu_reg(Alu::Mov, dst, src);
    }

    /// 64-bit immediate (two instruction slots).
    pub fn ld_imm64(&mut self, dst: u8, v: u64) {
        self.code
            .push(insn(LD | IMM | Size::DW as u8, dst, 0, 0, v as u32 as i32));
        self.code.push(insn(0, 0, 0, 0, (v >> 32) as u32 as i32));
    }

    /// Loads a map's address into `dst` (BPF_PSEUDO_MAP_FD relocation).
    pub fn ld_map(&mut self, dst: u8, map_fd: i32) {
        self.code
            .push(insn(LD | IMM | Size::DW as u8, dst, 1, 0, map_fd));
        self.code.push(insn(0, 0, 0, 0, 0));
    }

    pub fn ldx(&mut self, size: Size, dst: u8, src: u8, off: i16) {
        self.code
            .push(insn(LDX | MEM | size as u8, dst, src, off, 0));
    }

    pub fn stx(&mut self, size: Size, dst: u8, off: i16, src: u8) {
        self.code
            .push(insn(STX | MEM | size as u8, dst, src, off, 0));
    }

    pub fn st_imm(&mut self, size: Size, dst: u8, off: i16, imm: i32) {
        self.code
            .push(insn(ST | MEM | size as u8, dst, 0, off, imm));
    }

    /// `*(u64 *)(dst + off) += src`, atomically.
    pub fn atomic_add64(&mut self, dst: u8, off: i16, src: u8) {
        self.code
            .push(insn(STX | ATOMIC | Size::DW as u8, dst, src, off, 0));
    }

    pub fn jmp_imm(&mut self, op: Jmp, dst: u8, imm: i32, to: Label) {
        self.fixups.push((self.code.len(), to));
        self.code.push(insn(JMP | op as u8 | K, dst, 0, 0, imm));
    }

    pub fn jmp_reg(&mut self, op: Jmp, dst: u8, src: u8, to: Label) {
        self.fixups.push((self.code.len(), to));
        self.code.push(insn(JMP | op as u8 | X, dst, src, 0, 0));
    }

    pub fn ja(&mut self, to: Label) {
        self.fixups.push((self.code.len(), to));
        self.code.push(insn(JMP, 0, 0, 0, 0));
    }

    pub fn call(&mut self, helper: i32) {
        self.code.push(insn(JMP | 0x80, 0, 0, 0, helper));
    }

    pub fn exit(&mut self) {
        self.code.push(insn(JMP | 0x90, 0, 0, 0, 0));
    }

    /// Appends finished code (its jumps resolved, relative to itself).
    pub fn extend(&mut self, code: &[Insn]) {
        self.code.extend_from_slice(code);
    }

    pub fn len(&self) -> usize {
        self.code.len()
    }

    pub fn is_empty(&self) -> bool {
        self.code.is_empty()
    }

    /// Resolves jumps. Panics on an unbound label: that is a generator bug,
    /// never a property of the input.
    pub fn finish(mut self) -> Vec<Insn> {
        for &(at, l) in &self.fixups {
            let target = self.labels[l.0].expect("jump to a label that was never bound");
            let off = target as isize - at as isize - 1;
            self.code[at].off = i16::try_from(off).expect("jump too far for a BPF branch");
        }
        self.code
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_like_the_kernel_uapi() {
        let mut a = Asm::new();
        a.mov_imm(R0, 0);
        a.exit();
        let code = a.finish();
        // BPF_ALU64|BPF_MOV|BPF_K = 0xb7, BPF_JMP|BPF_EXIT = 0x95.
        assert_eq!(code[0].code, 0xb7);
        assert_eq!(code[1].code, 0x95);
    }

    #[test]
    fn forward_and_backward_jumps_resolve() {
        let mut a = Asm::new();
        let top = a.label();
        let end = a.label();
        a.bind(top);
        a.jmp_imm(Jmp::Eq, R1, 0, end); // 0 -> 3
        a.alu_imm(Alu::Add, R1, 1); // 1
        a.ja(top); // 2 -> 0
        a.bind(end);
        a.exit(); // 3
        let code = a.finish();
        assert_eq!(code[0].off, 2);
        assert_eq!(code[2].off, -3);
        assert_eq!(code[0].regs, 1);
    }

    #[test]
    fn map_reference_uses_pseudo_map_fd() {
        let mut a = Asm::new();
        a.ld_map(R1, 7);
        let code = a.finish();
        assert_eq!(code.len(), 2);
        assert_eq!(code[0].code, 0x18);
        assert_eq!(code[0].regs, 0x11);
        assert_eq!(code[0].imm, 7);
    }
}
