//! Kernel BTF (`/sys/kernel/btf/vmlinux`): parsed, then asked what
//! fsprof asks of it (function prototypes for fentry, the block request
//! layout for the block layer) and for every name its string section
//! holds.

use fsprof_kernel::blockrq::RqLayout;
use fsprof_kernel::btf::Btf;

use crate::engine::Target;
use crate::seeds;

#[rustfmt::skip]
const TOKENS: &[&[u8]] = &[b"\x9f\xeb\x01\0", b"\x18\0\0\0", b"\0request\0", b"\0vfs_read\0"];

pub const TARGET: Target = Target::new("btf", seeds::btf_blobs, TOKENS, check, 1500);

/// Names asked of a blob at most: its string section may hold many.
const MAX_NAMES: usize = 24;

pub fn check(bytes: &[u8]) {
    let Some(btf) = Btf::parse(bytes.to_vec()) else {
        return;
    };
    let _ = RqLayout::from_btf(&btf);
    let names: Vec<String> = bytes
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty() && s.len() < 64)
        .take(MAX_NAMES)
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect();
    for name in names
        .iter()
        .map(String::as_str)
        .chain(["vfs_read", "request"])
    {
        let _ = btf.func(name);
        let _ = btf.func_id(name);
        let _ = btf.enumerator(name);
        for member in names.iter().take(4) {
            let _ = btf.member(name, member);
        }
    }
}
