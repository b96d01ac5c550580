//! Reads the per-process counter files while the processes still write
//! them. Every counter is a naturally aligned u64 with a single writer (or
//! atomic adds), read here with atomic loads, so values are never torn;
//! counters of a call in progress may be one step apart until it returns.

use std::fs::File;
use std::io;
use std::mem::{offset_of, size_of};
use std::path::Path;

use fsprof_core::{Correlations, Histogram, JointHistogram, OpStats};
use fsprof_shim::abi::{self, CtrHeader, ProcHeader};
use fsprof_shim::OPS;
use fsprof_sys::mmap::SharedMap;

/// One process image's counters, summed over its threads.
#[derive(Clone, Debug)]
pub struct ProcessCounters {
    pub seq: u64,
    pub pid: i32,
    pub ppid: i32,
    pub exe: String,
    pub argv: Vec<String>,
    pub start_mono_ns: u64,
    pub threads: u32,
    pub ops: Vec<OpStats>,
}

/// A copy of a counter file's header; only complete once `ready` is set.
fn header(m: &SharedMap) -> ProcHeader {
    const _: () = assert!(size_of::<ProcHeader>() <= abi::PROC_HDR_SIZE);
    assert!(m.len() >= abi::PROC_HDR_SIZE);
    // SAFETY: the mapping holds at least PROC_HDR_SIZE >= size_of ProcHeader
    // bytes (asserted), page aligned; any bit pattern is a valid ProcHeader.
    unsafe { std::ptr::read(m.as_ptr() as *const ProcHeader) }
}

/// Where things are in a counter file, from a header checked against this
/// fsprof's layout and the file's size.
struct Geometry {
    hdr_size: usize,
    slot_size: usize,
    ctr_size: usize,
    /// Offset of the value tables in a slot.
    corr_off: usize,
}

impl Geometry {
    /// `Err` names what does not match.
    fn of(h: &ProcHeader, nbuckets: u32, len: usize) -> Result<Geometry, &'static str> {
        if h.magic != abi::PROC_MAGIC || h.abi_version != abi::ABI_VERSION {
            return Err("not a counter file of this fsprof version");
        }
        if h.nops as usize != OPS.len()
            || h.nbuckets != nbuckets
            || h.ctr_size as usize != abi::ctr_size(nbuckets)
            || h.hdr_size as usize != abi::PROC_HDR_SIZE
        {
            return Err("counter layout differs from this fsprof's");
        }
        let g = Geometry {
            hdr_size: h.hdr_size as usize,
            slot_size: h.slot_size as usize,
            ctr_size: h.ctr_size as usize,
            corr_off: abi::SLOT_HDR_SIZE + OPS.len() * h.ctr_size as usize,
        };
        if h.corr_ops as usize != abi::CORR_OPS.len()
            || h.corr_lat as usize != abi::CORR_LAT
            || h.corr_val as usize != abi::CORR_VAL
            || h.corr_off as usize != g.corr_off
        {
            return Err("value-table layout differs from this fsprof's");
        }
        let slot_size = g.corr_off + abi::corr_size() + abi::FD_TRACK * abi::FD_STATE_SIZE;
        let end = (h.max_slots as usize)
            .checked_mul(g.slot_size)
            .and_then(|b| b.checked_add(g.hdr_size));
        if g.slot_size != slot_size || end.is_none_or(|e| e > len) {
            return Err("counter file is shorter than its header says");
        }
        Ok(g)
    }

    /// Offset of op `k`'s counters in slot `s`.
    fn ctr(&self, s: usize, k: usize) -> usize {
        self.slot(s) + abi::SLOT_HDR_SIZE + k * self.ctr_size
    }

    fn slot(&self, s: usize) -> usize {
        self.hdr_size + s * self.slot_size
    }
}

/// Reads one counter file; `Ok(None)` if the process has not finished
/// setting it up (it is still starting, or died doing so).
pub fn read_process(path: &Path, nbuckets: u32) -> io::Result<Option<ProcessCounters>> {
    let file = File::open(path)?;
    let len = file.metadata()?.len() as usize;
    if len < abi::PROC_HDR_SIZE {
        return Ok(None);
    }
    let m = SharedMap::new(&file, len)?;
    if m.u32_at(offset_of!(ProcHeader, ready)) != 1 {
        return Ok(None);
    }
    // The header is complete once `ready` is set (release/acquire).
    let h = header(&m);
    let g = Geometry::of(&h, nbuckets, len).map_err(|what| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {what}", path.display()),
        )
    })?;
    let used = (m.u32_at(offset_of!(ProcHeader, slots_used)) as usize).min(h.max_slots as usize);
    let ops = OPS
        .iter()
        .enumerate()
        .filter_map(|(k, o)| read_op(&m, &g, used, nbuckets, k, o.name))
        .collect();
    Ok(Some(ProcessCounters {
        seq: h.seq,
        pid: h.pid,
        ppid: h.ppid,
        exe: String::from_utf8_lossy(&h.exe[..(h.exe_len as usize).min(abi::EXE_MAX)]).into_owned(),
        argv: h.cmdline[..(h.cmdline_len as usize).min(abi::CMDLINE_MAX)]
            .split(|&b| b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
        start_mono_ns: h.start_ns,
        threads: (used as u32).saturating_sub(1),
        ops,
    }))
}

/// Op `k`'s counters summed over the `used` slots; `None` if no call
/// entered it.
fn read_op(
    m: &SharedMap,
    g: &Geometry,
    used: usize,
    nbuckets: u32,
    k: usize,
    name: &str,
) -> Option<OpStats> {
    let mut op = OpStats::new(name);
    let (mut zero, mut min, mut max) = (0, u64::MAX, 0);
    let mut buckets = vec![0u64; nbuckets as usize];
    for s in 0..used {
        let base = g.ctr(s, k);
        let word = |field: usize| m.u64_at(base + field);
        let pre = word(offset_of!(CtrHeader, pre));
        if pre == 0 {
            continue;
        }
        op.pre += pre;
        op.post += word(offset_of!(CtrHeader, post));
        op.errors += word(offset_of!(CtrHeader, errors));
        op.total_ns += word(offset_of!(CtrHeader, total_ns));
        let mn = word(offset_of!(CtrHeader, min_ns));
        if mn != 0 {
            min = min.min(mn);
        }
        max = max.max(word(offset_of!(CtrHeader, max_ns)));
        zero += word(offset_of!(CtrHeader, zero));
        for (j, b) in buckets.iter_mut().enumerate() {
            *b += word(size_of::<CtrHeader>() + j * 8);
        }
    }
    if op.pre == 0 {
        return None;
    }
    op.histogram = Histogram::from_slots(zero, &buckets);
    if let Some(c) = abi::CORR_OPS.iter().position(|n| *n == name) {
        op.correlations = read_correlations(m, g, used, c);
    }
    if op.histogram.total() > 0 {
        op.min_ns = Some(if zero > 0 { 0 } else { min });
        op.max_ns = Some(max);
    }
    Some(op)
}

/// The size and seek tables of data op `c` (index into `abi::CORR_OPS`),
/// summed over the used slots; `None` if no call was filed.
fn read_correlations(m: &SharedMap, g: &Geometry, used: usize, c: usize) -> Option<Correlations> {
    let mut out = Correlations::default();
    for s in 0..used {
        let slot = g.slot(s);
        for kind in 0..abi::CORR_KINDS {
            let table = slot + g.corr_off + ((c * abi::CORR_KINDS + kind) * abi::CORR_CELLS) * 8;
            let joint: &mut JointHistogram = if kind == 0 {
                &mut out.size
            } else {
                &mut out.seek
            };
            for cell in 0..abi::CORR_CELLS {
                let n = m.u64_at(table + cell * 8);
                if n != 0 {
                    joint.add(
                        abi::corr_index(cell / abi::CORR_VAL),
                        abi::corr_index(cell % abi::CORR_VAL),
                        n,
                    );
                }
            }
        }
    }
    (!out.is_empty()).then_some(out)
}
