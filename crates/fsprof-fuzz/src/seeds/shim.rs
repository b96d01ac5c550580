//! The files the preload shim shares with fsprof: trace chunks and
//! counter files, laid out by the shim's ABI structs.

use fsprof_shim::trace_abi::TCHUNK_HDR;
use fsprof_trace::event::Op;

/// The bytes of a plain-data struct.
fn bytes_of<T: Copy>(v: &T) -> Vec<u8> {
    // SAFETY: T is one of the shim's repr(C) integer structs, read as the
    // bytes it is made of.
    unsafe { std::slice::from_raw_parts(v as *const T as *const u8, std::mem::size_of::<T>()) }
        .to_vec()
}

/// One shim trace record: header, arguments, items (tag, arg, bytes),
/// each padded to 8 bytes as the shim pads them.
fn shim_record(kind: u16, t0: u64, args: &[u64], items: &[(u16, u16, &[u8])]) -> Vec<u8> {
    use fsprof_shim::trace_abi::{ItemHeader, RecordHeader};
    let mut body = Vec::new();
    for a in args {
        body.extend_from_slice(&a.to_ne_bytes());
    }
    for &(tag, arg, b) in items {
        body.extend(bytes_of(&ItemHeader {
            tag,
            arg,
            len: b.len() as u32,
        }));
        body.extend_from_slice(b);
        body.resize(body.len().next_multiple_of(8), 0);
    }
    let mut out = bytes_of(&RecordHeader {
        len: (std::mem::size_of::<RecordHeader>() + body.len()) as u32,
        kind,
        nargs: args.len() as u8,
        failed: 0,
        t0,
        t1: t0 + 5,
        ret: 3,
        err: 0,
        nitems: items.len() as u32,
    });
    out.extend(body);
    out
}

/// Chunk files as the shim leaves them: a header, then a process record
/// with its fds and a few calls.
pub fn chunk_files() -> Vec<Vec<u8>> {
    use fsprof_shim::trace_abi::{self as t, ChunkHeader};
    let op = |name: &str| Op::named(name).0;
    let records = [
        shim_record(
            t::TREC_PROC,
            10,
            &[7, 1, 1],
            &[
                (t::TI_CWD, 0, b"/w"),
                (t::TI_EXE, 0, b"/bin/cat"),
                (t::TI_ARGV, 0, b"cat\0a\0"),
            ],
        ),
        shim_record(t::TREC_FD, 10, &[0, 2, 0], &[(t::TI_PATH, 0, b"/dev/null")]),
        shim_record(
            op("openat"),
            20,
            &[-100i64 as u64, 0, 0o101, 0o644],
            &[(t::TI_STR, 1, b"a/b")],
        ),
        shim_record(op("write"), 30, &[3, 0, 5], &[(t::TI_DATA, 0, b"hello")]),
        shim_record(
            op("pread"),
            40,
            &[3, 0, 4096, 0],
            &[(t::TI_DIGEST, 0, &7u64.to_ne_bytes())],
        ),
        shim_record(
            op("stat"),
            50,
            &[0, 0],
            &[
                (t::TI_STR, 0, b"/w/a"),
                (t::TI_STAT, 0, &[5, 0, 0, 0, 0, 0, 0, 0, 0o244, 0o201, 0, 0]),
            ],
        ),
        shim_record(op("fwrite"), 60, &[0, 4, 3, 9], &[]),
        shim_record(
            op("readlink"),
            70,
            &[0, 0, 99],
            &[(t::TI_STR, 0, b"l"), (t::TI_RESULT, 0, b"target")],
        ),
    ];
    let body: Vec<u8> = records.concat();
    let mut files = Vec::new();
    for sealed in [0, 1] {
        let size = TCHUNK_HDR + body.len();
        let mut f = bytes_of(&ChunkHeader {
            magic: t::TCHUNK_MAGIC,
            abi_version: t::TRACE_ABI_VERSION,
            hdr_size: TCHUNK_HDR as u32,
            proc_seq: 1,
            pid: 7,
            tid: 8,
            index: 0,
            sealed,
            committed: body.len() as u64,
            size: size as u64,
            dropped: 0,
            dropped_after: 0,
            seq: 0,
            reserved: [0; 6],
        });
        f.resize(TCHUNK_HDR, 0);
        f.extend_from_slice(&body);
        files.push(f);
    }
    files
}

/// Buckets per counter in the counter-file seeds (resolution 1).
pub const COUNTER_BUCKETS: u32 = 64;

/// A counter file as the shim leaves it (`shim/abi.h`): the header, the
/// slot directory, a shared and a private thread slot, counters of two
/// ops and a value table.
pub fn counter_files() -> Vec<Vec<u8>> {
    use fsprof_shim::abi::{self, CtrHeader, OwnSample, SlotHeader};
    let nb = COUNTER_BUCKETS;
    let (ctr, slot) = (abi::ctr_size(nb), abi::slot_size().next_multiple_of(64));
    // Slot 1 after the header, the shared slot 0 after it, then the
    // directory (its 4 entries: max_slots), which names slot 0.
    let slots = [abi::PROC_HDR_SIZE + slot, abi::PROC_HDR_SIZE];
    let dir = slots[0] + slot;
    let mut h = proc_header(nb, ctr);
    h.dir_off = dir as u32;
    let mut f = bytes_of(&h);
    f.resize(dir + 64, 0);
    f[dir..dir + 4].copy_from_slice(&(slots[0] as u32).to_ne_bytes());
    let counters = dir + 64;
    let table = counters + 2 * ctr;
    f.resize(table + abi::corr_size(), 0);
    let read = fsprof_shim::OPS
        .iter()
        .position(|o| o.name == "read")
        .expect("read");
    let read_corr = abi::CORR_OPS
        .iter()
        .position(|&o| o == "read")
        .expect("read's table");
    for (s, &at) in slots.iter().enumerate() {
        let (k, c) = if s == 0 {
            (0, counters)
        } else {
            (read, counters + ctr)
        };
        // The bitmap names the offsets set (abi.h).
        let mut used = [0u64; abi::SLOT_USED_WORDS];
        used[k / 64] |= 1 << (k % 64);
        if s == 1 {
            let bit = abi::nctr() + read_corr;
            used[bit / 64] |= 1 << (bit % 64);
        }
        let sh = SlotHeader {
            tid: 42 + s as u32,
            shared: u32::from(s == 0),
            nctr: abi::nctr() as u32,
            ncorr: abi::CORR_OPS.len() as u32,
            own: OwnSample {
                samples: 3,
                ns: 300,
                sq_ns: 30_000,
                over: 1,
            },
            used,
        };
        f[at..at + std::mem::size_of::<SlotHeader>()].copy_from_slice(&bytes_of(&sh));
        let offs = at + std::mem::size_of::<SlotHeader>();
        f[offs + 4 * k..offs + 4 * k + 4].copy_from_slice(&(c as u32).to_ne_bytes());
        if s == 1 {
            let corr = offs + 4 * abi::nctr() + 4 * read_corr;
            f[corr..corr + 4].copy_from_slice(&(table as u32).to_ne_bytes());
        }
        let ch = CtrHeader {
            pre: 10,
            post: 10,
            errors: 1,
            total_ns: 50_000,
            min_ns: 900,
            max_ns: 20_000,
            zero: 0,
            reserved: 0,
        };
        f[c..c + std::mem::size_of::<CtrHeader>()].copy_from_slice(&bytes_of(&ch));
        let b = c + std::mem::size_of::<CtrHeader>() + 8 * 10;
        f[b..b + 8].copy_from_slice(&10u64.to_ne_bytes());
    }
    for cell in [
        abi::corr_at(0, 0, 5),
        abi::corr_at(0, 2, 16),
        abi::corr_at(1, 0, 7),
    ] {
        f[table + 8 * cell..table + 8 * cell + 8].copy_from_slice(&4u64.to_ne_bytes());
    }
    vec![f]
}

/// The counter file's header: a process `cat a` with two thread slots.
fn proc_header(nb: u32, ctr: usize) -> fsprof_shim::abi::ProcHeader {
    use fsprof_shim::abi::{self, ProcHeader};
    let exe = b"/usr/bin/cat";
    let cmdline = b"cat\0a\0";
    let mut h = ProcHeader {
        magic: abi::PROC_MAGIC,
        abi_version: abi::ABI_VERSION,
        hdr_size: abi::PROC_HDR_SIZE as u32,
        nops: fsprof_shim::OPS.len() as u32,
        nctr: abi::nctr() as u32,
        nfdops: abi::FD_OPS.len() as u32,
        nbuckets: nb,
        ctr_size: ctr as u32,
        max_slots: 4,
        pid: 42,
        ppid: 1,
        start_ticks: 1_000,
        seq: 3,
        nslots: 2,
        ready: 1,
        dropped: 2,
        dropped_err: 12,
        exe_len: exe.len() as u32,
        cmdline_len: cmdline.len() as u32,
        corr_ops: abi::CORR_OPS.len() as u32,
        corr_lat: abi::CORR_LAT as u32,
        corr_val: abi::CORR_VAL as u32,
        slot_size: abi::slot_size() as u32,
        // A counter file of its own (not an arena block).
        block: 0,
        file: 1,
        used: 0,
        top_used: 0,
        dir_off: 0,
        exe: [0; abi::EXE_MAX],
        cmdline: [0; abi::CMDLINE_MAX],
    };
    h.exe[..exe.len()].copy_from_slice(exe);
    h.cmdline[..cmdline.len()].copy_from_slice(cmdline);
    h
}
