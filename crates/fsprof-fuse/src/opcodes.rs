//! The FUSE requests the daemon times, named in the one op vocabulary
//! ([`fsprof_core::ops::fuse::OPCODES`]) — the table the kernel's `fuse`
//! layer uses too — so that `fusefs/read` (the daemon's time) and
//! `fuse/read` (the kernel's time for the same request, queueing included)
//! line up in one report. This crate keeps no opcode table of its own: an
//! [`Op`] is a row of the core table, and [`op!`] looks a name up there at
//! compile time (a name the table lacks does not compile).
//!
//! Rows, not opcode numbers, address the per-thread counters: the opcodes
//! have gaps and run up to 4096 (`cuse_init`).

use fsprof_core::ops::fuse::OPCODES;

/// A FUSE request kind: its row in [`OPCODES`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Op(u8);

const _: () = assert!(OPCODES.len() <= u8::MAX as usize);

const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut k = 0;
    while k < a.len() {
        if a[k] != b[k] {
            return false;
        }
        k += 1;
    }
    true
}

impl Op {
    /// How many kinds there are (rows of [`OPCODES`]).
    pub const COUNT: usize = OPCODES.len();

    /// The op named `name` in [`OPCODES`]; panics (at compile time, through
    /// [`op!`]) for a name the table lacks.
    pub const fn named(name: &str) -> Op {
        let mut k = 0;
        while k < OPCODES.len() {
            if same(OPCODES[k].1, name) {
                return Op(k as u8);
            }
            k += 1;
        }
        panic!("not a FUSE op name of fsprof_core::ops::fuse::OPCODES")
    }

    /// Every kind, in row order.
    pub fn all() -> impl Iterator<Item = Op> {
        (0..Self::COUNT).map(|k| Op(k as u8))
    }

    /// Row, `0..Op::COUNT`.
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// The kernel's opcode number.
    pub fn code(self) -> u32 {
        self.row().0
    }

    /// The name in profiles (`lookup`, `read`, `readdirplus`, ...).
    pub fn name(self) -> &'static str {
        self.row().1
    }

    // Through the core's packed rows: indexing OPCODES at run time would
    // put a table of pointers back into the binary (fsprof_core::name_table).
    fn row(self) -> (u32, &'static str) {
        fsprof_core::ops::fuse::row(self.index()).unwrap_or((0, ""))
    }
}

/// The [`Op`] of a FUSE op name, looked up in the core table at compile
/// time: `op!("getattr")`.
macro_rules! op {
    ($name:literal) => {{
        const OP: $crate::opcodes::Op = $crate::opcodes::Op::named($name);
        OP
    }};
}
pub(crate) use op;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_dense_and_codes_unique() {
        for (k, op) in Op::all().enumerate() {
            assert_eq!(op.index(), k);
        }
        assert_eq!(Op::all().count(), OPCODES.len());
        let mut codes: Vec<u32> = Op::all().map(|o| o.code()).collect();
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), OPCODES.len());
    }

    #[test]
    fn names_and_codes_match_the_kernel_header() {
        // Spot checks against include/uapi/linux/fuse.h, not against the
        // table the lookups read.
        for (op, code, name) in [
            (op!("lookup"), 1, "lookup"),
            (op!("read"), 15, "read"),
            (op!("create"), 35, "create"),
            (op!("readdirplus"), 44, "readdirplus"),
            (op!("rename2"), 45, "rename2"),
            (op!("copy_file_range"), 47, "copy_file_range"),
        ] {
            assert_eq!((op.code(), op.name()), (code, name));
        }
    }

    #[test]
    #[should_panic(expected = "not a FUSE op name")]
    fn a_name_the_table_lacks_is_refused() {
        let name = String::from("gettattr");
        let _ = Op::named(&name);
    }
}
