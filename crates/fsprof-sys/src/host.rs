//! Facts about the host that a profile records and that benchmarks size
//! their working sets by: name, kernel, CPU, CPU caches and memory.
//!
//! Each fact is read from `uname(2)`, `/proc` or `/sys` when asked for; a
//! fact the system does not publish (a container without sysfs, a CPU
//! without cache information) is empty or absent, never an error.

use std::path::Path;

fn uname_fields<const N: usize>(pick: [fn(&libc::utsname) -> &[libc::c_char]; N]) -> [String; N] {
    // SAFETY: utsname is plain data that uname fills in.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out-pointer.
    if unsafe { libc::uname(&mut u) } != 0 {
        return std::array::from_fn(|_| String::new());
    }
    pick.map(|pick| {
        let bytes: Vec<u8> = pick(&u)
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// The host name (uname's nodename).
pub fn hostname() -> String {
    let [name] = uname_fields([|u| &u.nodename]);
    name
}

/// The running kernel's release, e.g. `6.12.9-amd64`.
pub fn kernel_release() -> String {
    let [release] = uname_fields([|u| &u.release]);
    release
}

/// [`hostname`] and [`kernel_release`] from one `uname`.
pub fn hostname_and_release() -> (String, String) {
    let [name, release] = uname_fields([|u| &u.nodename, |u| &u.release]);
    (name, release)
}

/// The value of the `key: value` line of a /proc file such as
/// /proc/cpuinfo, /proc/meminfo or /proc/self/status (the first such line),
/// trimmed.
pub fn proc_field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim())
}

/// The 1-minute load average (/proc/loadavg).
pub fn load_average() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// CPU 0's frequency scaling governor (`performance`, `powersave`, ...);
/// `None` where cpufreq is not exposed (most VMs).
pub fn cpu_governor() -> Option<String> {
    std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
        .ok()
        .map(|s| s.trim().to_string())
}

/// CPU time (user + system) used so far by every process but this one,
/// by pid, with its command name (`comm`), ns: what other processes,
/// kernel threads included, took of the CPUs between two readings (a
/// kernel worker renames itself after the queue it serves, so two
/// readings are matched by pid, not name). Kernel threads are named in
/// brackets as `ps` shows them (`[kdamond.0]`, `[jbd2/vda1-8]`).
pub fn cpu_time_by_process() -> std::collections::BTreeMap<u32, (String, u64)> {
    // SAFETY: sysconf has no memory effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let me = std::process::id();
    let mut out = std::collections::BTreeMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Some((comm, ticks)) = parse_stat_cpu(&stat) {
            // schedstat's run time is in ns; stat's in clock ticks (10 ms),
            // too coarse for a loop of a few ms.
            let ns = std::fs::read_to_string(format!("/proc/{pid}/schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse().ok())
                .unwrap_or_else(|| ticks.saturating_mul(1_000_000_000 / hz));
            out.insert(pid, (comm, ns));
        }
    }
    out
}

/// `PF_KTHREAD` in `/proc/PID/stat`'s flags.
const PF_KTHREAD: u64 = 0x0020_0000;

/// `(comm, utime + stime)` of a `/proc/PID/stat` line, a kernel thread's
/// command in brackets; the command is between the first `(` and the last
/// `)`, which it may contain itself.
fn parse_stat_cpu(stat: &str) -> Option<(String, u64)> {
    let (open, close) = (stat.find('(')?, stat.rfind(')')?);
    let comm = stat.get(open + 1..close)?;
    let rest: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    // After the command: state is field 3, flags 9, utime 14 and stime 15.
    let flags: u64 = rest.get(6)?.parse().ok()?;
    let comm = if flags & PF_KTHREAD != 0 {
        format!("[{comm}]")
    } else {
        comm.to_string()
    };
    let utime: u64 = rest.get(11)?.parse().ok()?;
    let stime: u64 = rest.get(12)?.parse().ok()?;
    Some((comm, utime + stime))
}

/// The CPU's model name from /proc/cpuinfo (empty where it has none).
pub fn cpu_model() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    proc_field(&info, "model name")
        .unwrap_or_default()
        .to_string()
}

/// CPUs online now.
pub fn cpus_online() -> usize {
    // SAFETY: sysconf has no memory effects.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    n.max(1) as usize
}

/// The size of a memory page.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory effects.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

/// Memory sizes from /proc/meminfo, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    pub total: u64,
    /// Free now (MemFree).
    pub free: u64,
    /// What could be had without swapping (MemAvailable): free memory plus
    /// the page cache and other memory the kernel can reclaim.
    pub available: u64,
    /// The page cache (Cached).
    pub cached: u64,
}

/// Memory sizes now; zeros where /proc/meminfo cannot be read.
pub fn memory() -> Memory {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let kib = |name: &str| -> u64 {
        proc_field(&text, name)
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .map_or(0, |k| k.saturating_mul(1024))
    };
    Memory {
        total: kib("MemTotal"),
        free: kib("MemFree"),
        available: kib("MemAvailable"),
        cached: kib("Cached"),
    }
}

/// One CPU cache as sysfs describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuCache {
    /// 1 for L1, 2 for L2, ...
    pub level: u32,
    /// `Data`, `Instruction` or `Unified`.
    pub kind: String,
    pub size_bytes: u64,
    pub line_bytes: u32,
    /// How many CPUs share this cache.
    pub shared_by: usize,
}

/// The caches of CPU 0, smallest level first (empty where sysfs has none).
pub fn cpu_caches() -> Vec<CpuCache> {
    cpu_caches_in(Path::new("/sys/devices/system/cpu/cpu0/cache"))
}

fn cpu_caches_in(dir: &Path) -> Vec<CpuCache> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<CpuCache> = rd
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("index"))
        .filter_map(|e| {
            let read = |f: &str| std::fs::read_to_string(e.path().join(f)).ok();
            Some(CpuCache {
                level: read("level")?.trim().parse().ok()?,
                kind: read("type")?.trim().to_string(),
                size_bytes: parse_size(read("size")?.trim())?,
                line_bytes: read("coherency_line_size")
                    .and_then(|s| s.trim().parse().ok())
                    .unwrap_or(0),
                shared_by: read("shared_cpu_list").map_or(1, |s| count_cpu_list(s.trim())),
            })
        })
        .collect();
    out.sort_by(|a, b| (a.level, &a.kind).cmp(&(b.level, &b.kind)));
    out
}

/// sysfs cache sizes: `32K`, `1024K`, `16M`.
fn parse_size(s: &str) -> Option<u64> {
    let (num, mult) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 1 << 10),
        b'M' => (&s[..s.len() - 1], 1 << 20),
        b'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mult)
}

/// CPUs in a list like `0-3,8,10-11`.
fn count_cpu_list(s: &str) -> usize {
    s.split(',')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('-') {
            Some((a, b)) => match (a.parse::<usize>(), b.parse::<usize>()) {
                (Ok(a), Ok(b)) if b >= a => b - a + 1,
                _ => 1,
            },
            None => 1,
        })
        .sum::<usize>()
        .max(1)
}

/// Everything above, read once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostFacts {
    pub hostname: String,
    pub kernel: String,
    pub cpu_model: String,
    pub cpus: usize,
    pub page_size: usize,
    pub memory: Memory,
    pub caches: Vec<CpuCache>,
}

impl HostFacts {
    pub fn read() -> HostFacts {
        HostFacts {
            hostname: hostname(),
            kernel: kernel_release(),
            cpu_model: cpu_model(),
            cpus: cpus_online(),
            page_size: page_size(),
            memory: memory(),
            caches: cpu_caches(),
        }
    }

    /// The largest data (or unified) cache: the size above which a working
    /// set no longer fits in any CPU cache.
    pub fn last_level_cache(&self) -> Option<&CpuCache> {
        self.caches
            .iter()
            .filter(|c| c.kind != "Instruction")
            .max_by_key(|c| (c.level, c.size_bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_fields_are_found_by_their_whole_key() {
        let text =
            "MemTotal:       24683656 kB\nmodel name\t: AMD EPYC\nCapEff:\t000001ffffffffff\n";
        assert_eq!(proc_field(text, "MemTotal"), Some("24683656 kB"));
        assert_eq!(proc_field(text, "model name"), Some("AMD EPYC"));
        assert_eq!(proc_field(text, "CapEff"), Some("000001ffffffffff"));
        assert_eq!(proc_field(text, "Mem"), None);
    }

    #[test]
    fn cpu_time_is_read_from_stat_lines_whatever_the_command_holds() {
        let line = "4242 (cc1 (plus) x) R 1 2 3 4 5 6 7 8 9 10 120 35 0 0 20 0 1 0 100";
        assert_eq!(
            parse_stat_cpu(line),
            Some(("cc1 (plus) x".to_string(), 155))
        );
        let kthread = "77 (jbd2/vda1-8) S 2 0 0 0 -1 2129984 0 0 0 0 3 4 0 0 20 0 1 0 9";
        assert_eq!(
            parse_stat_cpu(kthread),
            Some(("[jbd2/vda1-8]".to_string(), 7))
        );
        assert_eq!(parse_stat_cpu("garbage"), None);
        // This machine's processes, this one left out: pid 1 at least.
        let all = cpu_time_by_process();
        assert!(!all.is_empty());
    }

    /// Against getloadavg(3), another interface to the same figure (the
    /// kernel updates it every 5 s, so the two reads may straddle one).
    #[test]
    fn the_load_average_is_the_kernels() {
        let mut v = [0f64; 3];
        // SAFETY: a valid out-array of three doubles.
        assert_eq!(unsafe { libc::getloadavg(v.as_mut_ptr(), 3) }, 3);
        let ours = load_average().unwrap();
        assert!(
            ours >= 0.0 && (ours - v[0]).abs() < 2.0,
            "{ours} vs {}",
            v[0]
        );
        assert!(cpu_governor().is_none_or(|g| !g.is_empty() && !g.contains('\n')));
    }

    #[test]
    fn sizes_and_cpu_lists_parse_as_sysfs_writes_them() {
        assert_eq!(parse_size("32K"), Some(32 << 10));
        assert_eq!(parse_size("16M"), Some(16 << 20));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("K"), None);
        assert_eq!(parse_size("x"), None);
        assert_eq!(count_cpu_list("0-3,8,10-11"), 7);
        assert_eq!(count_cpu_list("5"), 1);
    }

    #[test]
    fn caches_are_read_from_a_sysfs_tree() {
        let d = tempfile::tempdir().unwrap();
        for (i, level, kind, size) in [
            (0, "1", "Data", "48K"),
            (1, "1", "Instruction", "32K"),
            (2, "2", "Unified", "2048K"),
            (3, "3", "Unified", "32M"),
        ] {
            let idx = d.path().join(format!("index{i}"));
            std::fs::create_dir(&idx).unwrap();
            std::fs::write(idx.join("level"), format!("{level}\n")).unwrap();
            std::fs::write(idx.join("type"), format!("{kind}\n")).unwrap();
            std::fs::write(idx.join("size"), format!("{size}\n")).unwrap();
            std::fs::write(idx.join("coherency_line_size"), "64\n").unwrap();
            std::fs::write(idx.join("shared_cpu_list"), "0-7\n").unwrap();
        }
        let caches = cpu_caches_in(d.path());
        assert_eq!(caches.len(), 4);
        assert_eq!((caches[0].level, caches[0].kind.as_str()), (1, "Data"));
        assert_eq!(caches[0].size_bytes, 48 << 10);
        assert_eq!(caches[3].size_bytes, 32 << 20);
        assert_eq!(caches[3].shared_by, 8);
        let host = HostFacts {
            caches,
            ..HostFacts::read()
        };
        assert_eq!(host.last_level_cache().unwrap().size_bytes, 32 << 20);
    }

    #[test]
    fn this_host_is_described() {
        let h = HostFacts::read();
        assert!(!h.hostname.is_empty() && !h.kernel.is_empty());
        assert!(h.cpus >= 1 && h.page_size >= 4096);
        assert!(h.memory.total > 0 && h.memory.available <= h.memory.total);
        assert!(h.memory.free <= h.memory.total);
    }
}
