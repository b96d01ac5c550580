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
fn install_is_idempotent_and_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir();
    let a = install(&dir).unwrap();
    let b = install(&dir).unwrap();
    assert_eq!(a, b);
    let mode = std::fs::metadata(a.parent().unwrap())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "shim directory must be private");
}

/// The C side's op list is the one vocabulary's, name for name and in
/// order (the compiled shim's op count and data-op indices are checked by
/// `rust_layout_matches_compiled_shim`).
#[test]
fn ops_def_is_the_core_op_list() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/shim/ops.def");
    let have = std::fs::read_to_string(path).unwrap();
    let want = fsprof_core::ops::libc::ops_def();
    assert!(
        have == want,
        "{path} differs from fsprof_core::ops::libc::OPS; write this into it:\n{want}"
    );
}

/// The value-table list in abi.h is the core's data ops, in order.
#[test]
fn abi_h_data_ops_are_the_core_data_ops() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/shim/abi.h");
    let h = std::fs::read_to_string(path).unwrap();
    let start = h
        .find("#define FSPROF_CORR_OPS_LIST")
        .expect("the list in abi.h");
    let list: String = h[start..]
        .lines()
        .take_while(|l| !l.trim().is_empty() && !l.starts_with("#define FSPROF_CORR_MAX"))
        .collect();
    let names: Vec<&str> = list
        .split("C(")
        .skip(1)
        .filter_map(|s| s.split(')').next())
        .collect();
    assert_eq!(names, fsprof_core::ops::libc::DATA_OPS);
}

fn tempdir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "fsprof-shim-test-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
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
