//! Raw `bpf(2)` and `perf_event_open(2)`: maps, program loading and
//! tracepoint attachment. Every kernel object is held by an `OwnedFd`, so
//! programs are detached and maps freed when the fds close — on return, on
//! error, on panic unwinding and even when fsprof is killed, because nothing
//! is pinned.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::insn::Insn;

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
const BPF_MAP_GET_NEXT_KEY: libc::c_long = 4;
const BPF_MAP_LOOKUP_BATCH: libc::c_long = 24;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_TEST_RUN: libc::c_long = 10;

pub const MAP_HASH: u32 = 1;
pub const MAP_ARRAY: u32 = 2;
pub const MAP_PERCPU_HASH: u32 = 5;
pub const MAP_PERCPU_ARRAY: u32 = 6;
pub const MAP_LRU_HASH: u32 = 9;
pub const MAP_RINGBUF: u32 = 27;
pub const BPF_F_NO_PREALLOC: u32 = 1;
pub const BPF_ANY: u64 = 0;

pub const PROG_TRACEPOINT: u32 = 5;
pub const PROG_XDP: u32 = 6;
pub const PROG_PERF_EVENT: u32 = 7;
pub const PROG_RAW_TRACEPOINT: u32 = 17;
pub const PROG_TRACING: u32 = 26;
pub const ATTACH_TRACE_FENTRY: u32 = 24;
pub const ATTACH_TRACE_FEXIT: u32 = 25;

#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

#[repr(C)]
#[derive(Default)]
struct ElemAttr {
    map_fd: u32,
    pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct BatchAttr {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
    prog_btf_fd: u32,
    func_info_rec_size: u32,
    func_info: u64,
    func_info_cnt: u32,
    line_info_rec_size: u32,
    line_info: u64,
    line_info_cnt: u32,
    attach_btf_id: u32,
    attach_prog_fd: u32,
    pad: u32,
}

#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
}

fn sys_bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: attr is a live, fully initialised repr(C) bpf_attr prefix and
    // its size is passed along, as bpf(2) requires.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T as *mut libc::c_void,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn name16(name: &str) -> [u8; 16] {
    let mut n = [0u8; 16];
    for (d, s) in n.iter_mut().zip(name.bytes().take(15)) {
        *d = if s.is_ascii_alphanumeric() || s == b'_' {
            s
        } else {
            b'_'
        };
    }
    n
}

/// Number of possible CPUs: the stride of per-CPU map values.
pub fn possible_cpus() -> io::Result<usize> {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/possible")?;
    parse_cpu_list(s.trim()).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("cannot parse CPU list {s:?}"),
        )
    })
}

/// `0-3,5` → 6; the kernel sizes per-CPU values by the highest id + 1.
pub fn parse_cpu_list(s: &str) -> Option<usize> {
    let mut max = None::<usize>;
    for part in s.split(',') {
        let hi = match part.split_once('-') {
            Some((_, hi)) => hi.parse().ok()?,
            None => part.parse().ok()?,
        };
        max = Some(max.map_or(hi, |m: usize| m.max(hi)));
    }
    max.map(|m| m + 1)
}

/// A map entry: the key and one value per CPU (one for shared maps).
pub type Entry = (Vec<u8>, Vec<Vec<u8>>);

/// A BPF map.
#[derive(Debug)]
pub struct Map {
    fd: OwnedFd,
    pub key_size: usize,
    pub value_size: usize,
    pub max_entries: u32,
    percpu: bool,
    ncpus: usize,
}

impl Map {
    pub fn create(
        name: &str,
        map_type: u32,
        key_size: usize,
        value_size: usize,
        max_entries: u32,
        flags: u32,
    ) -> io::Result<Map> {
        let mut attr = MapCreateAttr {
            map_type,
            key_size: key_size as u32,
            value_size: value_size as u32,
            max_entries,
            map_flags: flags,
            map_name: name16(name),
            ..Default::default()
        };
        let fd = sys_bpf(BPF_MAP_CREATE, &mut attr)?;
        let percpu = map_type == MAP_PERCPU_HASH || map_type == MAP_PERCPU_ARRAY;
        Ok(Map {
            // SAFETY: the kernel just returned this fd to us.
            fd: unsafe { OwnedFd::from_raw_fd(fd as RawFd) },
            key_size,
            value_size,
            max_entries,
            percpu,
            ncpus: if percpu { possible_cpus()? } else { 1 },
        })
    }

    pub fn fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// Bytes one lookup returns: per-CPU values are 8-byte aligned per CPU.
    pub fn value_buf_len(&self) -> usize {
        if self.percpu {
            self.value_size.div_ceil(8) * 8 * self.ncpus
        } else {
            self.value_size
        }
    }

    pub fn update(&self, key: &[u8], value: &[u8], flags: u64) -> io::Result<()> {
        assert_eq!(key.len(), self.key_size);
        assert_eq!(value.len(), self.value_buf_len());
        let mut attr = ElemAttr {
            map_fd: self.fd() as u32,
            key: key.as_ptr() as u64,
            value: value.as_ptr() as u64,
            flags,
            ..Default::default()
        };
        sys_bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(|_| ())
    }

    /// The value of `key`, `None` when absent.
    pub fn lookup(&self, key: &[u8]) -> io::Result<Option<Vec<u8>>> {
        assert_eq!(key.len(), self.key_size);
        let mut v = vec![0u8; self.value_buf_len()];
        let mut attr = ElemAttr {
            map_fd: self.fd() as u32,
            key: key.as_ptr() as u64,
            value: v.as_mut_ptr() as u64,
            ..Default::default()
        };
        match sys_bpf(BPF_MAP_LOOKUP_ELEM, &mut attr) {
            Ok(_) => Ok(Some(v)),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// All keys. Keys deleted while iterating may be skipped or restart the
    /// walk, which only matters for the short-lived start maps, read once
    /// at the end.
    pub fn keys(&self) -> io::Result<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        let mut cur: Option<Vec<u8>> = None;
        loop {
            let mut next = vec![0u8; self.key_size];
            let mut attr = ElemAttr {
                map_fd: self.fd() as u32,
                key: cur.as_ref().map_or(0, |k| k.as_ptr() as u64),
                value: next.as_mut_ptr() as u64,
                ..Default::default()
            };
            match sys_bpf(BPF_MAP_GET_NEXT_KEY, &mut attr) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(out),
                Err(e) => return Err(e),
            }
            out.push(next.clone());
            if out.len() > 10_000_000 {
                return Err(io::Error::other("map iteration does not terminate"));
            }
            cur = Some(next);
        }
    }

    /// Deletes `key`; ENOENT if it is not there.
    pub fn delete(&self, key: &[u8]) -> io::Result<()> {
        assert_eq!(key.len(), self.key_size);
        let mut attr = ElemAttr {
            map_fd: self.fd() as u32,
            key: key.as_ptr() as u64,
            ..Default::default()
        };
        sys_bpf(BPF_MAP_DELETE_ELEM, &mut attr).map(|_| ())
    }

    /// [`Map::entries`] of a hash map in batches (`BPF_MAP_LOOKUP_BATCH`,
    /// Linux 5.6): a few system calls for thousands of entries instead of
    /// two per entry. Falls back to [`Map::entries`] where the kernel has
    /// no batch operations.
    pub fn entries_batch(&self) -> io::Result<Vec<Entry>> {
        let mut chunk = 256usize;
        let mut out = Vec::new();
        // The hash maps' batch token is a bucket number (u32); room for more.
        let (mut token, mut next) = ([0u8; 8], [0u8; 8]);
        let mut first = true;
        loop {
            let mut keys = vec![0u8; chunk * self.key_size];
            let mut vals = vec![0u8; chunk * self.value_buf_len()];
            let mut attr = BatchAttr {
                in_batch: if first { 0 } else { token.as_ptr() as u64 },
                out_batch: next.as_mut_ptr() as u64,
                keys: keys.as_mut_ptr() as u64,
                values: vals.as_mut_ptr() as u64,
                count: chunk as u32,
                map_fd: self.fd() as u32,
                ..Default::default()
            };
            let r = sys_bpf(BPF_MAP_LOOKUP_BATCH, &mut attr);
            let done = match r {
                Ok(_) => false,
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => true,
                // A bucket holds more entries than a chunk: a bigger one.
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) && chunk < 1 << 20 => {
                    chunk *= 4;
                    continue;
                }
                Err(e)
                    if first
                        && matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOTSUP | 524)) =>
                {
                    return self.entries();
                }
                Err(e) => return Err(e),
            };
            for k in 0..attr.count as usize {
                let key = keys[k * self.key_size..(k + 1) * self.key_size].to_vec();
                let v = &vals[k * self.value_buf_len()..(k + 1) * self.value_buf_len()];
                out.push((key, self.split(v)));
            }
            if done {
                return Ok(out);
            }
            token = next;
            first = false;
        }
    }

    /// A looked-up value, per CPU for per-CPU maps.
    fn split(&self, v: &[u8]) -> Vec<Vec<u8>> {
        let stride = if self.percpu {
            self.value_size.div_ceil(8) * 8
        } else {
            self.value_size
        };
        v.chunks(stride)
            .map(|c| c[..self.value_size].to_vec())
            .collect()
    }

    /// Every (key, value) with per-CPU values split per CPU.
    pub fn entries(&self) -> io::Result<Vec<Entry>> {
        let mut out = Vec::new();
        for k in self.keys()? {
            if let Some(v) = self.lookup(&k)? {
                out.push((k, self.split(&v)));
            }
        }
        Ok(out)
    }
}

/// A loaded program.
#[derive(Debug)]
pub struct Prog {
    fd: OwnedFd,
}

/// Why the kernel refused a program; the verifier log says where.
#[derive(Debug)]
pub struct LoadError {
    pub errno: io::Error,
    pub log: String,
}

impl Prog {
    pub fn load(name: &str, prog_type: u32, insns: &[Insn]) -> Result<Prog, LoadError> {
        Self::load_full(name, prog_type, insns, 0, 0)
    }

    pub fn load_full(
        name: &str,
        prog_type: u32,
        insns: &[Insn],
        expected_attach_type: u32,
        attach_btf_id: u32,
    ) -> Result<Prog, LoadError> {
        let license = b"GPL\0";
        let try_load = |log: &mut Vec<u8>, level: u32| {
            let mut attr = ProgLoadAttr {
                prog_type,
                insn_cnt: insns.len() as u32,
                insns: insns.as_ptr() as u64,
                license: license.as_ptr() as u64,
                log_level: level,
                log_size: log.len() as u32,
                log_buf: if log.is_empty() {
                    0
                } else {
                    log.as_mut_ptr() as u64
                },
                prog_name: name16(name),
                expected_attach_type,
                attach_btf_id,
                ..Default::default()
            };
            sys_bpf(BPF_PROG_LOAD, &mut attr)
        };
        // Load without a log first (the log costs verifier time); on failure
        // load again with one so the error says why.
        match try_load(&mut Vec::new(), 0) {
            Ok(fd) => Ok(Prog {
                // SAFETY: a program fd the kernel just returned.
                fd: unsafe { OwnedFd::from_raw_fd(fd as RawFd) },
            }),
            Err(errno) => {
                let mut log = vec![0u8; 1 << 20];
                let _ = try_load(&mut log, 1);
                let end = log.iter().position(|&b| b == 0).unwrap_or(0);
                let text = String::from_utf8_lossy(&log[..end]);
                // The tail names the failing instruction and the reason.
                let lines: Vec<&str> = text.lines().collect();
                let tail = lines[lines.len().saturating_sub(12)..].join("\n");
                Err(LoadError { errno, log: tail })
            }
        }
    }

    /// The kernel's own verification time of `insns`, µs: a load of its
    /// own with `BPF_LOG_STATS` (its log's "verification time N usec").
    pub fn verification_us(prog_type: u32, insns: &[Insn]) -> Option<u64> {
        let mut log = vec![0u8; 4096];
        let license = b"GPL\0";
        let mut attr = ProgLoadAttr {
            prog_type,
            insn_cnt: insns.len() as u32,
            insns: insns.as_ptr() as u64,
            license: license.as_ptr() as u64,
            log_level: 4,
            log_size: log.len() as u32,
            log_buf: log.as_mut_ptr() as u64,
            ..Default::default()
        };
        let fd = sys_bpf(BPF_PROG_LOAD, &mut attr).ok()?;
        // SAFETY: a program fd the kernel just returned, closed here.
        drop(unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
        let text = String::from_utf8_lossy(&log);
        let line = text.lines().find(|l| l.starts_with("verification time"))?;
        line.split_whitespace().nth(2)?.parse().ok()
    }

    pub fn fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// How many times the kernel skipped this program because it was
    /// already running on the same CPU (an interrupt arriving inside it
    /// fired the same tracepoint): events the program never saw.
    /// `struct bpf_prog_info.recursion_misses` (UAPI, offset 208; kernels
    /// before 5.12 do not fill it and report 0).
    pub fn recursion_misses(&self) -> io::Result<u64> {
        let info = self.info()?;
        Ok(u64::from_le_bytes(info[208..216].try_into().unwrap()))
    }

    /// `struct bpf_prog_info` up to `recursion_misses`.
    fn info(&self) -> io::Result<[u8; 216]> {
        let mut info = [0u8; 216];
        let mut ia = InfoAttr {
            bpf_fd: self.fd() as u32,
            info_len: info.len() as u32,
            info: info.as_mut_ptr() as u64,
        };
        sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &mut ia)?;
        Ok(info)
    }

    /// The program's name and, while the kernel's run-time statistics are
    /// on ([`enable_stats`]), how often it ran and for how long:
    /// `struct bpf_prog_info` `name[16]` (offset 64), `run_time_ns` (192),
    /// `run_cnt` (200).
    pub fn run_stats(&self) -> io::Result<RunStats> {
        let info = self.info()?;
        let name = &info[64..80];
        let end = name.iter().position(|&b| b == 0).unwrap_or(16);
        let word = |at: usize| u64::from_le_bytes(info[at..at + 8].try_into().unwrap());
        Ok(RunStats {
            name: String::from_utf8_lossy(&name[..end]).into_owned(),
            run_ns: word(192),
            runs: word(200),
        })
    }

    /// Runs the program once on `data` (BPF_PROG_TEST_RUN) and returns r0.
    pub fn test_run(&self, data: &[u8]) -> io::Result<u32> {
        let mut attr = TestRunAttr {
            prog_fd: self.fd() as u32,
            data_size_in: data.len() as u32,
            data_in: data.as_ptr() as u64,
            repeat: 1,
            ..Default::default()
        };
        sys_bpf(BPF_PROG_TEST_RUN, &mut attr)?;
        Ok(attr.retval)
    }

    /// Runs a raw tracepoint program once with `args` as the tracepoint's
    /// arguments (BPF_PROG_TEST_RUN with a context) and returns r0.
    pub fn test_run_args(&self, args: &[u64]) -> io::Result<u32> {
        let mut attr = TestRunAttr {
            prog_fd: self.fd() as u32,
            ctx_size_in: std::mem::size_of_val(args) as u32,
            ctx_in: args.as_ptr() as u64,
            ..Default::default()
        };
        sys_bpf(BPF_PROG_TEST_RUN, &mut attr)?;
        Ok(attr.retval)
    }
}

/// A program's run-time statistics ([`Prog::run_stats`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunStats {
    pub name: String,
    /// Nanoseconds spent in the program, summed over its runs.
    pub run_ns: u64,
    pub runs: u64,
}

const BPF_ENABLE_STATS: libc::c_long = 32;

/// Turns on the kernel's run-time statistics of every BPF program until
/// the returned descriptor is closed (`BPF_ENABLE_STATS`,
/// `BPF_STATS_RUN_TIME`): each run then costs two clock reads more, so
/// only a measurement asks for it.
pub fn enable_stats() -> io::Result<OwnedFd> {
    let mut attr = 0u32; // BPF_STATS_RUN_TIME
    let fd = sys_bpf(BPF_ENABLE_STATS, &mut attr)?;
    // SAFETY: a descriptor the kernel just returned.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved: u16,
}

const PERF_TYPE_TRACEPOINT: u32 = 2;
const PERF_TYPE_SOFTWARE: u32 = 1;
/// `PERF_COUNT_SW_PAGE_FAULTS_MIN` and `_MAJ`: counted when a fault is done.
pub const PERF_COUNT_SW_PAGE_FAULTS_MIN: u64 = 5;
pub const PERF_COUNT_SW_PAGE_FAULTS_MAJ: u64 = 6;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_SET_BPF: libc::c_ulong = 0x4004_2408;

/// A program attached to a tracepoint; closing the fd detaches it.
#[derive(Debug)]
pub struct Attachment {
    /// The BPF link of an attachment made with one (a cookie), closed
    /// before its event.
    _link: Option<OwnedFd>,
    event: OwnedFd,
}

impl Attachment {
    /// Enables a perf event opened disabled ([`prepare_software_event`]).
    pub fn enable(&self) -> io::Result<()> {
        // SAFETY: an ioctl on our own perf event fd with an int argument.
        if unsafe { libc::ioctl(self.event.as_raw_fd(), PERF_EVENT_IOC_ENABLE as _, 0) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// Attaches a raw tracepoint program (no record formatting: cheaper per
/// event than a perf tracepoint).
pub fn attach_raw_tracepoint(prog: &Prog, name: &str) -> io::Result<Attachment> {
    let cname =
        std::ffi::CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut attr = RawTpAttr {
        name: cname.as_ptr() as u64,
        prog_fd: prog.fd() as u32,
        ..Default::default()
    };
    let fd = sys_bpf(BPF_RAW_TRACEPOINT_OPEN, &mut attr)?;
    Ok(Attachment {
        _link: None,
        // SAFETY: a link fd the kernel just returned.
        event: unsafe { OwnedFd::from_raw_fd(fd as RawFd) },
    })
}

/// [`attach_raw_tracepoint`] with a cookie, which the program reads with
/// `bpf_get_attach_cookie` (raw tracepoints: Linux 6.10): one program
/// serves several tracepoints, told apart by their cookies.
pub fn attach_raw_tracepoint_cookie(
    prog: &Prog,
    name: &str,
    cookie: u64,
) -> io::Result<Attachment> {
    let cname =
        std::ffi::CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut attr = RawTpCookieAttr {
        name: cname.as_ptr() as u64,
        prog_fd: prog.fd() as u32,
        pad: 0,
        cookie,
    };
    let fd = sys_bpf(BPF_RAW_TRACEPOINT_OPEN, &mut attr)?;
    Ok(Attachment {
        _link: None,
        // SAFETY: a link fd the kernel just returned.
        event: unsafe { OwnedFd::from_raw_fd(fd as RawFd) },
    })
}

/// `bpf_attr.raw_tracepoint` with its cookie (Linux 6.10); an older
/// kernel refuses the non-zero bytes past what it knows (E2BIG).
#[repr(C)]
struct RawTpCookieAttr {
    name: u64,
    prog_fd: u32,
    pad: u32,
    cookie: u64,
}

/// Attaches `prog` to the tracepoint with tracefs id `tp_id`. A tracepoint
/// program hangs off the event itself, so one perf event on CPU 0 makes it
/// run on every CPU.
pub fn attach_tracepoint(prog: &Prog, tp_id: u64) -> io::Result<Attachment> {
    attach_perf(prog, PERF_TYPE_TRACEPOINT, tp_id, 0)
}

/// Attaches a perf-event program to a software event (`PERF_COUNT_SW_*`)
/// counting every task on `cpu`, sampled at every event: the program runs
/// on each one, in the task's context.
pub fn attach_software_event(prog: &Prog, config: u64, cpu: i32) -> io::Result<Attachment> {
    attach_perf(prog, PERF_TYPE_SOFTWARE, config, cpu)
}

/// [`attach_software_event`] through a BPF link carrying `cookie`, which
/// the program reads with `bpf_get_attach_cookie` (Linux 5.15): one
/// program serves several events, told apart by their cookies.
pub fn attach_software_event_cookie(
    prog: &Prog,
    config: u64,
    cpu: i32,
    cookie: u64,
) -> io::Result<Attachment> {
    let att = prepare_software_event(prog, config, cpu, Some(cookie))?;
    att.enable()?;
    Ok(att)
}

/// A software event on `cpu` with `prog` on it (through a link carrying
/// `cookie`, or without one: `PERF_EVENT_IOC_SET_BPF`), opened disabled:
/// the program runs on nothing until [`Attachment::enable`]. Opening one
/// is most of an attach's cost (the kernel patches the event's call
/// sites, ~90 µs the first one of a kind on this project's 2-CPU test
/// machine); enabling it is a call on its CPU. While it waits, every
/// event of its kind on the machine looks up its CPU's (empty) list of
/// enabled events, tens of ns a page fault.
pub fn prepare_software_event(
    prog: &Prog,
    config: u64,
    cpu: i32,
    cookie: Option<u64>,
) -> io::Result<Attachment> {
    let event = perf_event_as(PERF_TYPE_SOFTWARE, config, cpu, ATTR_DISABLED)?;
    let Some(cookie) = cookie else {
        // SAFETY: an ioctl on our own perf event fd with an int argument.
        if unsafe { libc::ioctl(event.as_raw_fd(), PERF_EVENT_IOC_SET_BPF as _, prog.fd()) } < 0 {
            return Err(io::Error::last_os_error());
        }
        return Ok(Attachment { _link: None, event });
    };
    let mut attr = LinkCreatePerfAttr {
        prog_fd: prog.fd() as u32,
        target_fd: event.as_raw_fd() as u32,
        attach_type: ATTACH_PERF_EVENT,
        flags: 0,
        bpf_cookie: cookie,
    };
    let link = sys_bpf(BPF_LINK_CREATE, &mut attr)?;
    Ok(Attachment {
        // SAFETY: a link fd the kernel just returned.
        _link: Some(unsafe { OwnedFd::from_raw_fd(link as RawFd) }),
        event,
    })
}

const BPF_LINK_CREATE: libc::c_long = 28;
/// `BPF_PERF_EVENT`, the attach type of a perf event link.
const ATTACH_PERF_EVENT: u32 = 41;

/// `bpf_attr.link_create` for a perf event: the prefix up to its cookie.
#[repr(C)]
struct LinkCreatePerfAttr {
    prog_fd: u32,
    target_fd: u32,
    attach_type: u32,
    flags: u32,
    bpf_cookie: u64,
}

/// `perf_event_attr.disabled`, the first of its flag bits.
const ATTR_DISABLED: u64 = 1;

/// A perf event counting every task on `cpu`, sampled at every event.
fn perf_event(type_: u32, config: u64, cpu: i32) -> io::Result<OwnedFd> {
    perf_event_as(type_, config, cpu, 0)
}

/// [`perf_event`] with `perf_event_attr`'s flag bits `flags`.
fn perf_event_as(type_: u32, config: u64, cpu: i32, flags: u64) -> io::Result<OwnedFd> {
    let mut attr = PerfEventAttr {
        type_,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config,
        sample_period: 1,
        wakeup_events: 1,
        flags,
        ..Default::default()
    };
    // SAFETY: attr is a valid perf_event_attr of the size it declares.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &mut attr as *mut PerfEventAttr,
            -1 as libc::pid_t,
            cpu as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just returned by perf_event_open.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

fn attach_perf(prog: &Prog, type_: u32, config: u64, cpu: i32) -> io::Result<Attachment> {
    let event = perf_event(type_, config, cpu)?;
    // SAFETY: ioctls on our own perf event fd with an int argument.
    unsafe {
        if libc::ioctl(event.as_raw_fd(), PERF_EVENT_IOC_SET_BPF as _, prog.fd()) < 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::ioctl(event.as_raw_fd(), PERF_EVENT_IOC_ENABLE as _, 0) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(Attachment { _link: None, event })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0"), Some(1));
        assert_eq!(parse_cpu_list("0-1"), Some(2));
        assert_eq!(parse_cpu_list("0-3,5"), Some(6));
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn attr_layouts_match_the_uapi_sizes() {
        // perf_event_attr VER5 is 112 bytes; bpf_attr prog-load prefix up to
        // attach_prog_fd is 116 (padded to 120).
        assert_eq!(std::mem::size_of::<PerfEventAttr>(), 112);
        assert_eq!(std::mem::size_of::<ProgLoadAttr>(), 120);
        assert_eq!(std::mem::size_of::<TestRunAttr>(), 64);
    }
}

const BPF_RAW_TRACEPOINT_OPEN: libc::c_long = 17;

#[repr(C)]
#[derive(Default)]
struct RawTpAttr {
    name: u64,
    prog_fd: u32,
    pad: u32,
}

/// Attaches a tracing (fentry/fexit) program; the link closes on drop.
pub fn raw_tracepoint_open(prog: &Prog) -> io::Result<OwnedFd> {
    let mut attr = RawTpAttr {
        prog_fd: prog.fd() as u32,
        ..Default::default()
    };
    let fd = sys_bpf(BPF_RAW_TRACEPOINT_OPEN, &mut attr)?;
    // SAFETY: a link fd the kernel just returned.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// [`raw_tracepoint_open`] as an [`Attachment`], for sessions that hold
/// tracing links next to tracepoint events.
pub fn attach_tracing(prog: &Prog) -> io::Result<Attachment> {
    Ok(Attachment {
        _link: None,
        event: raw_tracepoint_open(prog)?,
    })
}

const BPF_PROG_GET_NEXT_ID: libc::c_long = 11;
const BPF_PROG_GET_FD_BY_ID: libc::c_long = 13;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;

#[repr(C)]
#[derive(Default)]
struct IdAttr {
    id: u32,
    next_id: u32,
    open_flags: u32,
}

#[repr(C)]
#[derive(Default)]
struct InfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// Names of every BPF program loaded in the kernel (any owner).
pub fn loaded_prog_names() -> io::Result<Vec<String>> {
    // struct bpf_prog_info: name[16] at offset 64.
    loaded_names(BPF_PROG_GET_NEXT_ID, BPF_PROG_GET_FD_BY_ID, 64)
}

/// Names of every BPF map in the kernel (any owner).
pub fn loaded_map_names() -> io::Result<Vec<String>> {
    // struct bpf_map_info: name[16] at offset 24.
    loaded_names(BPF_MAP_GET_NEXT_ID, BPF_MAP_GET_FD_BY_ID, 24)
}

const BPF_MAP_GET_NEXT_ID: libc::c_long = 12;
const BPF_MAP_GET_FD_BY_ID: libc::c_long = 14;

/// The names of every object of one kind, walked by id; `name_at` is the
/// offset of `name[16]` in the kind's info struct.
fn loaded_names(
    next: libc::c_long,
    by_id: libc::c_long,
    name_at: usize,
) -> io::Result<Vec<String>> {
    let mut names = Vec::new();
    let mut id = 0u32;
    loop {
        let mut a = IdAttr {
            id,
            ..Default::default()
        };
        match sys_bpf(next, &mut a) {
            Ok(_) => id = a.next_id,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(names),
            Err(e) => return Err(e),
        }
        let mut g = IdAttr {
            id,
            ..Default::default()
        };
        // The object may be gone already: skip it.
        let Ok(fd) = sys_bpf(by_id, &mut g) else {
            continue;
        };
        // SAFETY: fd just returned by the kernel.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
        let mut info = [0u8; 80];
        let mut ia = InfoAttr {
            bpf_fd: fd.as_raw_fd() as u32,
            info_len: info.len() as u32,
            info: info.as_mut_ptr() as u64,
        };
        if sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &mut ia).is_ok() {
            let n = &info[name_at..name_at + 16];
            let end = n.iter().position(|&b| b == 0).unwrap_or(16);
            names.push(String::from_utf8_lossy(&n[..end]).into_owned());
        }
    }
}
