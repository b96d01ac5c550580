//! Compiles the C shim into a shared object that `src/lib.rs` embeds.
//! `shim/ops.def`, the op list the C side reads, is checked against
//! `fsprof_core::ops::libc::OPS` by `tests/abi.rs`.

use std::env;
use std::fs;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("shim");
    // Every C file and header in shim/ is part of the shim.
    let mut sources: Vec<PathBuf> = fs::read_dir(&dir)
        .expect("read shim/")
        .map(|e| e.expect("read shim/").path())
        .collect();
    sources.sort();
    println!("cargo:rerun-if-changed=shim");
    for f in &sources {
        println!("cargo:rerun-if-changed={}", f.display());
    }
    let c_files: Vec<&PathBuf> = sources
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "c"))
        .collect();
    println!("cargo:rerun-if-env-changed=CC");

    let cc = env::var("CC").unwrap_or_else(|_| "cc".into());
    let so = out.join("libfsprof_shim.so");
    let status = Command::new(&cc)
        .args([
            "-shared",
            "-fPIC",
            "-O2",
            "-g0",
            "-std=gnu11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-Wno-unused-parameter",
            "-fvisibility=hidden",
            "-ftls-model=initial-exec",
            "-fno-stack-protector",
            // glibc's header inlines (getline, fread_unlocked ...) would clash
            // with the definitions that interpose them.
            "-D__NO_INLINE__",
            "-U_FORTIFY_SOURCE",
            "-Wl,-soname,libfsprof_shim.so",
            "-Wl,--no-undefined",
            "-o",
        ])
        .arg(&so)
        .args(&c_files)
        .args(["-ldl", "-lpthread"])
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}` to build the preload shim: {e}; install gcc or set CC"));
    assert!(
        status.success(),
        "building the preload shim with `{cc}` failed"
    );

    // The installed copy is named after its content; hashing here keeps
    // 200 KB of hashing off every `fsprof run`.
    let bytes = fs::read(&so).expect("read the built shim");
    let hash = bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    });
    fs::write(
        out.join("shim_hash.rs"),
        format!("/// FNV-1a of [`SHIM_SO`], computed at build time.\npub const SHIM_HASH: u64 = {hash:#018x};\n"),
    )
    .unwrap();
}
