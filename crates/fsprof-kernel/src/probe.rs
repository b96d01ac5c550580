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

/// `what  yes  detail` or `what  no   why`: one line of the report as
/// `fsprof kernel --probe-report` prints it.
impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.result {
            Ok(d) => write!(f, "{:<28} yes  {d}", self.what),
            Err(why) => write!(f, "{:<28} no   {why}", self.what),
        }
    }
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
    crate::btf::Btf::parse(btf.to_vec())?.func_id(func)
}

/// Whether fentry/fexit programs can be loaded and attached here (the
/// route to VFS and file-system function latency without tracepoints).
pub fn fentry_support() -> Result<String, String> {
    let btf = crate::btf::Btf::vmlinux();
    match crate::fentry::detect(btf.as_deref().map_err(String::as_str)) {
        Ok(f) => Ok(format!(
            "fentry and fexit on vfs_read (BTF id {}): each loads and attaches",
            f.id
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// The fs layer's mechanism on this kernel, as `fsprof kernel --layer fs`
/// will choose it: fentry/fexit when [`fentry_support`] succeeds, else the
/// tracepoint pairs.
pub fn fs_mechanism(fentry: &Result<String, String>, pairs: &[String]) -> String {
    let pairs_s = if pairs.is_empty() {
        "no tracepoint pairs".to_string()
    } else {
        format!("{} tracepoint pairs", pairs.len())
    };
    match fentry {
        Ok(_) => {
            let funcs = crate::btf::Btf::vmlinux()
                .and_then(|b| crate::fentry::targets(b, &[]))
                .map(|t| {
                    t.iter()
                        .map(|f| f.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default();
            format!("fentry/fexit on {funcs}, plus {pairs_s}")
        }
        Err(_) => format!("{pairs_s} only (fentry/fexit unusable, see above)"),
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
    let fentry = fentry_support();
    out.push(f(
        "fs layer (fentry/fexit)",
        fentry
            .clone()
            .map(|s| format!("{s}; used by the fs layer"))
            .map_err(|e| format!("{e}; the fs layer uses tracepoint pairs instead")),
    ));
    out.push(f("fs layer uses", Ok(fs_mechanism(&fentry, &pairs))));
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
        crate::btf::blob(&types, &strs)
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
