//! The privilege check done before touching bpf(2), so a missing capability
//! is named instead of surfacing as a bare EPERM.

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// Effective capabilities of this process: one `capget`, where reading
/// them from /proc/self/status took ~70 µs (eight reads) on the path of
/// every `fsprof trace` as root, twice; that file where `capget` fails.
pub fn effective_caps() -> u64 {
    capget().unwrap_or_else(|| {
        fsprof_sys::proc_status::ProcStatus::of_self()
            .ok()
            .and_then(|s| s.effective_caps())
            .unwrap_or(0)
    })
}

/// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
const CAP_V3: u32 = 0x2008_0522;

fn capget() -> Option<u64> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut h = Header {
        version: CAP_V3,
        pid: 0,
    };
    let mut d = [Data::default(); 2];
    // SAFETY: a v3 header and the two data structs v3 fills.
    let r = unsafe { libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr()) };
    (r == 0 && h.version == CAP_V3).then(|| d[0].effective as u64 | (d[1].effective as u64) << 32)
}

/// The capabilities bpf tracing needs that this process lacks, printed
/// as their names (`CAP_BPF, CAP_PERFMON`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.join(", "))]
pub struct MissingCaps(pub Vec<&'static str>);

/// `Ok` when bpf tracing is allowed, else the missing capabilities.
pub fn check(caps: u64) -> Result<(), MissingCaps> {
    let has = |c: u32| caps & (1u64 << c) != 0;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        return Ok(());
    }
    let missing = [(CAP_BPF, "CAP_BPF"), (CAP_PERFMON, "CAP_PERFMON")]
        .iter()
        .filter(|(c, _)| !has(*c))
        .map(|(_, n)| *n)
        .collect();
    Err(MissingCaps(missing))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capget_says_what_proc_says() {
        let proc = fsprof_sys::proc_status::ProcStatus::of_self()
            .unwrap()
            .effective_caps();
        assert_eq!(capget(), proc);
    }

    #[test]
    fn capability_sets() {
        assert!(check(1 << CAP_SYS_ADMIN).is_ok());
        assert!(check((1 << CAP_BPF) | (1 << CAP_PERFMON)).is_ok());
        assert_eq!(check(1 << CAP_BPF).unwrap_err().to_string(), "CAP_PERFMON");
        assert_eq!(check(0).unwrap_err().to_string(), "CAP_BPF, CAP_PERFMON");
    }
}
