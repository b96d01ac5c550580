//! The Rust mirror of the shim's file layout must match the compiled C.

use fsprof_shim::{abi, install, LoadedShim};

#[test]
fn rust_layout_matches_compiled_shim() {
    let dir = tempdir();
    let path = install(&dir).expect("install shim");
    let shim = LoadedShim::load(&path).expect("load shim");
    assert_eq!(shim.layout().unwrap(), abi::expected_layout());
}

#[test]
fn install_is_idempotent_and_writable_by_us_alone() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir();
    let a = install(&dir).unwrap();
    let b = install(&dir).unwrap();
    assert_eq!(a, b);
    let mode = std::fs::metadata(a.parent().unwrap())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(
        mode & 0o7777,
        0o711,
        "shim directory: ours to write, searchable by a workload that drops privileges"
    );
}

/// Where the tests install the shim: one directory for the whole test
/// process (a loaded shim is never unloaded). A copy of the shim loaded from
/// another path takes static TLS of its own (its variables are
/// initial-exec, as a preloaded library's should be), and glibc keeps
/// room for few such copies: under `cargo test`, which runs these tests
/// as threads of one process, one directory a thread failed with "cannot
/// allocate memory in static TLS block" (nextest runs each test in its
/// own process). A path already loaded is loaded again without new TLS.
fn tempdir() -> std::path::PathBuf {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("fsprof-shim-test-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        // Installed before any test's own install, which then finds it
        // there: install's temporary name is one per process, so threads
        // writing it at once would collide.
        install(&d).unwrap();
        d
    })
    .clone()
}

#[test]
fn rust_trace_layout_matches_compiled_shim() {
    let dir = tempdir();
    let shim = LoadedShim::load(&install(&dir).unwrap()).unwrap();
    assert_eq!(
        shim.trace_layout().unwrap(),
        fsprof_shim::trace_abi::expected_trace_layout()
    );
}

#[test]
fn shim_digest_is_xxh64_however_the_bytes_arrive() {
    let dir = tempdir();
    let shim = LoadedShim::load(&install(&dir).unwrap()).unwrap();
    let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + i / 3) as u8).collect();
    for len in [0usize, 1, 3, 4, 7, 8, 31, 32, 33, 63, 64, 100, 1000] {
        let want = xxhash_rust::xxh64::xxh64(&data[..len], 0);
        for step in [1u64, 5, 32, 1000] {
            assert_eq!(
                shim.xxh64(&data[..len], step).unwrap(),
                want,
                "len {len} step {step}"
            );
        }
    }
}

/// A control block (header and `nbuckets` thresholds) with these fields.
fn control(edit: impl Fn(&mut abi::ControlHeader)) -> Vec<u8> {
    let mut h = abi::ControlHeader {
        magic: abi::CTL_MAGIC,
        abi_version: abi::ABI_VERSION,
        resolution: 1,
        nbuckets: 65,
        clock: abi::CLOCK_MONOTONIC,
        tsc_mult: 1 << 32,
        tsc_shift: 32,
        max_slots: abi::MAX_SLOTS,
        ..Default::default()
    };
    edit(&mut h);
    // SAFETY: ControlHeader is repr(C) plain data, viewed as its bytes.
    let mut out = unsafe {
        std::slice::from_raw_parts(
            &h as *const abi::ControlHeader as *const u8,
            std::mem::size_of::<abi::ControlHeader>(),
        )
    }
    .to_vec();
    for j in 0..65u64 {
        out.extend_from_slice(&(1u64 << j.saturating_sub(1).min(63)).to_ne_bytes());
    }
    out
}

/// The shim validates every field of the control file before it records
/// anything: a forged one (here, through the self-test entry point that
/// uses the same check) is refused, not trusted into out-of-bounds writes.
#[test]
fn shim_refuses_control_blocks_it_cannot_record_safely() {
    let dir = tempdir();
    let shim = LoadedShim::load(&install(&dir).unwrap()).unwrap();
    let ok = control(|_| {});
    assert_eq!(shim.bucket_slot(&ok, 1000).unwrap(), Some(10));
    let forged: Vec<(&str, Vec<u8>)> = vec![
        // 64 * 2^26 + 1 wraps to 1 in 32 bits: the attack of issue 11.
        (
            "resolution 2^26",
            control(|h| {
                h.resolution = 1 << 26;
                h.nbuckets = 1;
            }),
        ),
        (
            "resolution 3",
            control(|h| {
                h.resolution = 3;
                h.nbuckets = 193;
            }),
        ),
        ("nbuckets", control(|h| h.nbuckets = 64)),
        ("tsc_shift", control(|h| h.tsc_shift = 31)),
        ("tsc_mult 0", control(|h| h.tsc_mult = 0)),
        ("clock", control(|h| h.clock = 7)),
        ("max_slots 1", control(|h| h.max_slots = 1)),
        ("max_slots", control(|h| h.max_slots = 1 << 20)),
        ("lost_max", control(|h| h.lost_max = 1 << 20)),
        ("version", control(|h| h.abi_version = 2)),
        ("truncated", ok[..ok.len() - 8].to_vec()),
    ];
    for (what, c) in forged {
        assert_eq!(shim.bucket_slot(&c, 1000).unwrap(), None, "{what} accepted");
    }
}

/// `fsprof run` reads only the value-table rows between an op's least and
/// greatest latency, by `abi::corr_cell`: it must be the shim's own.
#[test]
fn corr_cell_is_the_shims() {
    let dir = tempdir();
    let shim = LoadedShim::load(&install(&dir).unwrap()).unwrap();
    let mut vs: Vec<u64> = (0..70).map(|k| 1u64 << k.min(63)).collect();
    vs.extend((0..64).flat_map(|k| [(1u64 << k) - 1, (1u64 << k) + 1]));
    vs.extend([0, 1, 2, 3, u64::MAX]);
    for v in vs {
        for n in [abi::CORR_LAT as u32, abi::CORR_VAL as u32] {
            assert_eq!(
                shim.corr_cell(v, n).unwrap() as usize,
                abi::corr_cell(v, n as usize),
                "v {v} n {n}"
            );
        }
    }
}
