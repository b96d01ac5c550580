//! The fs layer on fentry/fexit: VFS entry points, lookup paths and any
//! named file-system function, timed per thread and filed into the same
//! in-kernel buckets as the tracepoint programs.
//!
//! Whether the kernel allows it is decided by trying ([`detect`]), never by
//! version numbers: some kernels (lockdown, some VMs) refuse BPF tracing
//! programs while tracepoints work.

use std::fmt;
use std::io;

use crate::btf::{Btf, Func};
use crate::insn::{Asm, Insn, R0};
use crate::progs::{self, Filter, Shared};
use crate::sys::{self, Attachment, Prog};

/// VFS entry points profiled by default, by the name ops get in the fs layer.
pub const VFS_FUNCTIONS: [&str; 5] = [
    "vfs_read",
    "vfs_write",
    "vfs_open",
    "vfs_fsync_range",
    "iterate_dir",
];

/// Path lookup, outermost first. Static functions the compiler inlined are
/// not in BTF, so each kernel gets the subset it has.
pub const LOOKUP_FUNCTIONS: [&str; 4] = [
    "filename_lookup",
    "path_lookupat",
    "lookup_fast",
    "__lookup_slow",
];

/// Which half of a pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Fentry,
    Fexit,
}

impl Kind {
    pub fn attach_type(self) -> u32 {
        match self {
            Kind::Fentry => sys::ATTACH_TRACE_FENTRY,
            Kind::Fexit => sys::ATTACH_TRACE_FEXIT,
        }
    }
    fn as_str(self) -> &'static str {
        match self {
            Kind::Fentry => "fentry",
            Kind::Fexit => "fexit",
        }
    }
}

/// The step the kernel refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Load,
    Attach,
}

/// The kernel said no: which step, for which function, with which errno.
#[derive(Debug)]
pub struct Refusal {
    pub step: Step,
    pub kind: Kind,
    pub func: String,
    pub errno: io::Error,
    /// The verifier log's tail (loads only).
    pub log: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let step = match self.step {
            Step::Load => "load",
            Step::Attach => "attach",
        };
        write!(
            f,
            "the kernel refuses to {step} {} programs ({}{}; {} on {})",
            self.kind.as_str(),
            errno_name(&self.errno).map_or(String::new(), |n| format!("{n}: ")),
            self.errno,
            self.kind.as_str(),
            self.func
        )?;
        if !self.log.is_empty() {
            write!(f, ": {}", self.log.replace('\n', " | "))?;
        }
        Ok(())
    }
}

/// The symbolic name of the errnos a BPF load or attach returns.
pub fn errno_name(e: &io::Error) -> Option<&'static str> {
    Some(match e.raw_os_error()? {
        libc::EPERM => "EPERM",
        libc::EACCES => "EACCES",
        libc::EINVAL => "EINVAL",
        libc::ENOENT => "ENOENT",
        libc::E2BIG => "E2BIG",
        libc::EBUSY => "EBUSY",
        libc::ESRCH => "ESRCH",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        524 => "ENOTSUPP",
        _ => return None,
    })
}

/// Loads `insns` as a `kind` program on `func` and attaches it.
pub fn load_attach(
    name: &str,
    func: &Func,
    kind: Kind,
    insns: &[Insn],
) -> Result<(Prog, Attachment), Refusal> {
    let refusal = |step, errno, log| Refusal {
        step,
        kind,
        func: func.name.clone(),
        errno,
        log,
    };
    let prog = Prog::load_full(name, sys::PROG_TRACING, insns, kind.attach_type(), func.id)
        .map_err(|e| refusal(Step::Load, e.errno, e.log))?;
    let att = sys::attach_tracing(&prog).map_err(|e| refusal(Step::Attach, e, String::new()))?;
    Ok((prog, att))
}

/// The fexit and fentry programs timing `func` as fs op `idx`, loaded and
/// attached, exit first so that no start entry lacks its exit program.
pub fn attach_pair(
    name: &str,
    func: &Func,
    filter: &Filter,
    sh: &Shared,
    start_fd: i32,
    idx: u32,
) -> Result<Vec<(Prog, Attachment)>, Refusal> {
    let exit = progs::fexit_exit(func, sh, start_fd, idx);
    let enter = progs::fentry_enter(filter, start_fd, idx);
    Ok(vec![
        load_attach(name, func, Kind::Fexit, &exit)?,
        load_attach(name, func, Kind::Fentry, &enter)?,
    ])
}

/// Why fentry cannot be used here.
#[derive(Debug)]
pub enum Unusable {
    /// No BTF, or vfs_read missing from it.
    Btf(String),
    Refused(Refusal),
}

impl fmt::Display for Unusable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unusable::Btf(s) => f.write_str(s),
            Unusable::Refused(r) => {
                write!(f, "{r}")?;
                if let Ok(s) = std::fs::read_to_string("/sys/kernel/security/lockdown") {
                    if s.contains("[integrity]") || s.contains("[confidentiality]") {
                        write!(f, "; kernel lockdown is {}", s.trim())?;
                    }
                }
                Ok(())
            }
        }
    }
}

/// Tries a do-nothing fentry and fexit program on vfs_read: both must load
/// and attach (they are detached again on return).
pub fn detect(btf: Result<&Btf, &str>) -> Result<Func, Unusable> {
    let btf = btf.map_err(|e| Unusable::Btf(e.into()))?;
    let func = btf.func("vfs_read").map_err(Unusable::Btf)?;
    let mut a = Asm::new();
    a.mov_imm(R0, 0);
    a.exit();
    let trivial = a.finish();
    for kind in [Kind::Fentry, Kind::Fexit] {
        load_attach("fsprof_fentry", &func, kind, &trivial).map_err(Unusable::Refused)?;
    }
    Ok(func)
}

/// The functions to time: the VFS entry points and lookup functions this
/// kernel's BTF has, then `extra` (each must exist: the user named it).
pub fn targets(btf: &Btf, extra: &[String]) -> Result<Vec<Func>, String> {
    let mut out: Vec<Func> = VFS_FUNCTIONS
        .iter()
        .chain(LOOKUP_FUNCTIONS.iter())
        .filter_map(|f| btf.func(f).ok())
        .collect();
    for f in extra {
        if out.iter().any(|t| &t.name == f) {
            continue;
        }
        out.push(btf.func(f).map_err(|e| {
            let has_modules = std::fs::read_dir("/sys/kernel/btf")
                .map(|d| d.flatten().any(|e| e.file_name() != "vmlinux"))
                .unwrap_or(false);
            let module_hint = if has_modules {
                " (functions of file systems built as modules are in /sys/kernel/btf/<module>, which fsprof does not attach to yet)"
            } else {
                ""
            };
            format!("--fs-functions {f}: {e}{module_hint}")
        })?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf;
    use crate::insn::R6;

    fn shared(r: u32) -> Shared {
        Shared {
            stats_fd: 3,
            sys_stats_fd: 4,
            hist_fd: 5,
            thresh_fd: 6,
            on_fd: -1,
            resolution: r,
            by_cgroup: None,
        }
    }

    /// ldx dw r9, [r6 + off]: the read of the fexit return value.
    fn ret_loads(insns: &[Insn]) -> Vec<i16> {
        insns
            .iter()
            .filter(|i| i.code == 0x79 && i.regs == (R6 << 4) | 9)
            .map(|i| i.off)
            .collect()
    }

    #[test]
    fn fexit_reads_the_return_value_after_the_arguments() {
        let b = Btf::parse(btf::synthetic(&[
            ("vfs_read", 4, "long"),
            ("iterate_dir", 2, "int"),
            ("lookup_fast", 1, "ptr"),
            ("noop", 0, "void"),
        ]))
        .unwrap();
        for (name, off) in [("vfs_read", 32), ("iterate_dir", 16), ("lookup_fast", 8)] {
            let f = b.func(name).unwrap();
            assert_eq!(progs::fexit_ret_offset(&f), off);
            let p = progs::fexit_exit(&f, &shared(1), 7, 0);
            assert_eq!(ret_loads(&p), vec![off], "{name}");
        }
        let p = progs::fexit_exit(&b.func("noop").unwrap(), &shared(1), 7, 0);
        assert!(
            ret_loads(&p).is_empty(),
            "a void function has no return slot"
        );
    }

    #[test]
    fn unknown_extra_functions_are_an_error_naming_them() {
        let b = Btf::parse(btf::synthetic(&[("vfs_read", 4, "long")])).unwrap();
        let t = targets(&b, &["vfs_read".into()]).unwrap();
        assert_eq!(t.len(), 1, "named twice, timed once");
        let e = targets(&b, &["ext4_nope".into()]).unwrap_err();
        assert!(e.contains("--fs-functions ext4_nope"), "{e}");
    }

    #[test]
    fn program_sizes_are_sane_for_every_resolution() {
        let b = Btf::parse(btf::synthetic(&[("vfs_read", 4, "long")])).unwrap();
        let f = b.func("vfs_read").unwrap();
        let enter = progs::fentry_enter(&Filter::Comm(*b"cat\0\0\0\0\0\0\0\0\0\0\0\0\0"), 7, 0);
        assert!((10..100).contains(&enter.len()), "{}", enter.len());
        for r in [1, 2, 4, 8, 16] {
            let exit = progs::fexit_exit(&f, &shared(r), 7, 0);
            // The bucket code alone is ~30 + 9r instructions; BPF allows 1M.
            assert!((60..400).contains(&exit.len()), "r={r}: {}", exit.len());
            assert_eq!(exit.last().unwrap().code, 0x95, "ends in exit");
        }
    }
}
