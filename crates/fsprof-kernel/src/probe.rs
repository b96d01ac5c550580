//! `fsprof kernel --probe-report`: what this kernel lets each layer use,
//! decided by trying it (loading and attaching), not by version numbers.

use std::path::Path;

use crate::insn::{Asm, R0};
use crate::session::FS_CATEGORIES;
use crate::sys::{self, Prog};
use crate::tracefs::{self, Tracepoint};

/// One line of the report.
#[derive(Clone, Debug)]
pub struct Finding {
    pub what: String,
    /// `Ok(detail)` when usable, `Err(why not)` otherwise.
    pub result: Result<String, String>,
}

fn trivial() -> Vec<crate::insn::Insn> {
    let mut a = Asm::new();
    a.mov_imm(R0, 0);
    a.exit();
    a.finish()
}

/// Loads and attaches a do-nothing program to each tracepoint.
fn try_tracepoints(root: &Path, tps: &[(&str, &str)]) -> Result<String, String> {
    for (cat, name) in tps {
        let tp = Tracepoint::load(root, cat, name).map_err(|e| e.to_string())?;
        let prog = Prog::load("fsprof_probe", sys::PROG_TRACEPOINT, &trivial())
            .map_err(|e| format!("BPF tracepoint programs are refused ({})", e.errno))?;
        sys::attach_tracepoint(&prog, tp.id)
            .map_err(|e| format!("attaching to {cat}:{name}: {e}"))?;
    }
    Ok(tps
        .iter()
        .map(|(c, n)| format!("{c}:{n}"))
        .collect::<Vec<_>>()
        .join(", "))
}

/// Whether raw tracepoint programs attach to sys_enter/sys_exit (the
/// cheaper route for the syscall layer; perf tracepoints are the fallback).
fn try_raw_syscalls() -> Result<String, String> {
    let prog = Prog::load("fsprof_probe", sys::PROG_RAW_TRACEPOINT, &trivial()).map_err(|e| {
        format!(
            "raw tracepoint programs are refused ({}); perf tracepoints are used",
            e.errno
        )
    })?;
    for name in ["sys_enter", "sys_exit"] {
        sys::attach_raw_tracepoint(&prog, name).map_err(|e| {
            format!("attaching to raw tracepoint {name}: {e}; perf tracepoints are used")
        })?;
    }
    Ok("sys_enter, sys_exit (used by the syscall layer)".into())
}

/// Finds the BTF id of a kernel function in /sys/kernel/btf/vmlinux.
pub fn btf_func_id(btf: &[u8], func: &str) -> Option<u32> {
    let u32_at = |o: usize| {
        btf.get(o..o + 4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
    };
    if btf.get(0..2)? != [0x9f, 0xeb] {
        return None;
    }
    let hdr_len = u32_at(4)? as usize;
    let (type_off, type_len) = (u32_at(8)? as usize, u32_at(12)? as usize);
    let str_off = u32_at(16)? as usize;
    let types = hdr_len + type_off;
    let strs = hdr_len + str_off;
    let mut p = types;
    let mut id = 1u32;
    while p + 12 <= types + type_len {
        let name_off = u32_at(p)? as usize;
        let info = u32_at(p + 4)?;
        let vlen = (info & 0xffff) as usize;
        let kind = (info >> 24) & 0x1f;
        if kind == 12 {
            let s = btf.get(strs + name_off..)?;
            let end = s.iter().position(|&b| b == 0)?;
            if &s[..end] == func.as_bytes() {
                return Some(id);
            }
        }
        p += 12
            + match kind {
                1 | 14 | 17 => 4,
                3 => 12,
                4 | 5 | 15 | 19 => vlen * 12,
                6 | 13 => vlen * 8,
                _ => 0,
            };
        id += 1;
    }
    None
}

/// Whether fentry/fexit programs can be loaded and attached here (the
/// route to VFS and file-system function latency without tracepoints).
pub fn fentry_support() -> Result<String, String> {
    let btf = std::fs::read("/sys/kernel/btf/vmlinux").map_err(|e| {
        format!("no kernel BTF (/sys/kernel/btf/vmlinux: {e}); fentry needs CONFIG_DEBUG_INFO_BTF")
    })?;
    let id = btf_func_id(&btf, "vfs_read").ok_or("kernel BTF has no vfs_read function")?;
    let prog = Prog::load_full(
        "fsprof_fentry",
        sys::PROG_TRACING,
        &trivial(),
        sys::ATTACH_TRACE_FENTRY,
        id,
    )
    .map_err(|e| {
        format!(
            "the kernel refuses to load fentry programs ({}){}",
            e.errno,
            lockdown_hint()
        )
    })?;
    sys::raw_tracepoint_open(&prog).map_err(|e| {
        format!(
            "the kernel refuses to attach fentry programs ({e}){}",
            lockdown_hint()
        )
    })?;
    Ok(format!(
        "fentry on vfs_read (BTF id {id}) loads and attaches"
    ))
}

fn lockdown_hint() -> String {
    match std::fs::read_to_string("/sys/kernel/security/lockdown") {
        Ok(s) if s.contains("[integrity]") || s.contains("[confidentiality]") => {
            format!("; kernel lockdown is {}", s.trim())
        }
        _ => String::new(),
    }
}

/// Whether the kernel has kprobes (a fallback for functions without fentry).
pub fn kprobe_support(root: Option<&Path>) -> Result<String, String> {
    if Path::new("/sys/bus/event_source/devices/kprobe").exists()
        || root.is_some_and(|r| r.join("kprobe_events").exists())
    {
        Ok("kprobe PMU present".into())
    } else {
        Err("this kernel is built without kprobes (no kprobe PMU, no kprobe_events)".into())
    }
}

/// Every finding, in report order.
pub fn report() -> Vec<Finding> {
    let mut out = Vec::new();
    let f = |what: &str, result| Finding {
        what: what.into(),
        result,
    };
    out.push(f(
        "privileges",
        crate::privs::check(crate::privs::effective_caps())
            .map(|_| "root or CAP_BPF+CAP_PERFMON".into())
            .map_err(|m| format!("missing {m}: run as root")),
    ));
    let root = tracefs::root();
    out.push(f(
        "tracefs",
        root.as_ref()
            .map(|r| r.display().to_string())
            .map_err(|e| e.to_string()),
    ));
    let Ok(root) = root else {
        return out;
    };
    out.push(f(
        "syscall layer",
        try_tracepoints(
            &root,
            &[("raw_syscalls", "sys_enter"), ("raw_syscalls", "sys_exit")],
        ),
    ));
    out.push(f("syscall layer (raw tp)", try_raw_syscalls()));
    out.push(f(
        "process-tree following",
        try_tracepoints(&root, &[("sched", "sched_process_fork")]),
    ));
    let mut pairs = Vec::new();
    for cat in FS_CATEGORIES {
        for p in tracefs::enter_exit_pairs(&root, cat) {
            pairs.push(format!("{cat}:{p}"));
        }
    }
    out.push(f(
        "fs layer (tracepoint pairs)",
        if pairs.is_empty() {
            Err("no ext4/xfs/btrfs *_enter/*_exit tracepoint pairs".into())
        } else {
            Ok(pairs.join(", "))
        },
    ));
    out.push(f(
        "fs layer (fentry/fexit)",
        fentry_support().map(|s| format!("{s}; not used yet by fsprof")),
    ));
    out.push(f(
        "fs layer (kprobes)",
        kprobe_support(Some(&root)).map(|s| format!("{s}; not used by fsprof")),
    ));
    out.push(f(
        "fuse layer",
        try_tracepoints(
            &root,
            &[("fuse", "fuse_request_send"), ("fuse", "fuse_request_end")],
        ),
    ));
    out.push(f(
        "block layer",
        try_tracepoints(
            &root,
            &[("block", "block_rq_issue"), ("block", "block_rq_complete")],
        ),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn btf_with(funcs: &[&str]) -> Vec<u8> {
        // header (24) + types + strings
        let mut strs = vec![0u8];
        let mut types = Vec::new();
        // an INT type (kind 1, +4 bytes) first, to exercise skipping
        types.extend(0u32.to_le_bytes());
        types.extend((1u32 << 24).to_le_bytes());
        types.extend(4u32.to_le_bytes());
        types.extend(32u32.to_le_bytes());
        for f in funcs {
            let off = strs.len() as u32;
            strs.extend(f.as_bytes());
            strs.push(0);
            types.extend(off.to_le_bytes());
            types.extend((12u32 << 24).to_le_bytes());
            types.extend(0u32.to_le_bytes());
        }
        let mut b = vec![0x9f, 0xeb, 1, 0];
        b.extend(24u32.to_le_bytes());
        b.extend(0u32.to_le_bytes());
        b.extend((types.len() as u32).to_le_bytes());
        b.extend((types.len() as u32).to_le_bytes());
        b.extend((strs.len() as u32).to_le_bytes());
        b.extend(types);
        b.extend(strs);
        b
    }

    #[test]
    fn finds_function_ids_in_btf() {
        let b = btf_with(&["vfs_write", "vfs_read"]);
        assert_eq!(btf_func_id(&b, "vfs_read"), Some(3));
        assert_eq!(btf_func_id(&b, "vfs_write"), Some(2));
        assert_eq!(btf_func_id(&b, "nope"), None);
        assert_eq!(btf_func_id(b"junk", "vfs_read"), None);
    }
}
