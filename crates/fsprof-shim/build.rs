//! Compiles the C shim into a shared object that `src/lib.rs` embeds.
//!
//! The op lists the C side reads (`ops.def`, `fdops.def`, `dataops.def`)
//! are written here from `fsprof_core::ops::libc`, the one vocabulary,
//! rather than kept by hand beside it. Each C file is compiled to its own
//! object in `OUT_DIR/obj`, where `tests/c_layers.rs` reads which file
//! calls which (the calls must form layers, not cycles).

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// How every C file here is compiled, the shim's and the runner's.
const COMMON_CFLAGS: &[&str] = &["-O2", "-g0", "-std=gnu11", "-Wall", "-Wextra", "-Werror"];

/// How every C file of the shim is compiled, besides [`COMMON_CFLAGS`].
const CFLAGS: &[&str] = &[
    "-fPIC",
    "-Wno-unused-parameter",
    "-fvisibility=hidden",
    "-ftls-model=initial-exec",
    "-fno-stack-protector",
    // The text's layout (shim/layout.h): a function per section, so that
    // the linker can put the set-up code and the common wrappers together,
    // and each function's rarely taken paths beside it, not in a `.cold`
    // part at the far end of the text.
    "-ffunction-sections",
    "-fno-reorder-blocks-and-partition",
    // glibc's header inlines (getline, fread_unlocked ...) would clash
    // with the definitions that interpose them.
    "-D__NO_INLINE__",
    "-U_FORTIFY_SOURCE",
];

/// The C files whose code a process runs at start-up and on its first
/// calls, linked first (in this order); shim/layout.ld places their code
/// in the file's first 64 KiB, the other files' after it.
/// fdclass.c comes first for its data too: the descriptor classes then
/// follow the small variables, and a process's first descriptors share
/// their page.
const LINK_FIRST: &[&str] = &[
    "fdclass.c",
    "process.c",
    "run.c",
    "pool.c",
    "util.c",
    "nextsym.c",
    "exec.c",
    "own.c",
    "trace.c",
    "mapwrite.c",
];

/// How the shim is linked, besides `-shared`: its load costs every process
/// that preloads it. One read-only, executable segment and the constants
/// at the front (shim/layout.ld): two mmaps and two page faults fewer a
/// process than the default's separate code; `fsprof run` -13.4 us a
/// process [-16.8, -10.3] on a shell loop of `cat`s, -20.5 [-23.3, -17.3]
/// on `xargs wc` (docs/benchmarks/history.md, eleventh session, floor11).
/// `tests/link_layout.rs` checks the built shim's segments.
const LINK_FLAGS: &[&str] = &[
    "-Wl,-soname,libfsprof_shim.so",
    "-Wl,--no-undefined",
    // No DT_FINI: the C runtime's _fini does nothing on x86-64
    // (destructors run from .fini_array), and it lies at the far
    // end of the text, a page fault of its own in every exiting
    // process (shim/layout.h).
    "-Wl,-fini=fsprof_no_fini",
    "-Wl,-z,noseparate-code",
    "-Wl,-z,relro",
];

fn main() {
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("shim");
    // Every C file and header in shim/ is part of the shim, and its
    // linker script (layout.ld).
    let mut sources: Vec<PathBuf> = fs::read_dir(&dir)
        .expect("read shim/")
        .map(|e| e.expect("read shim/").path())
        .collect();
    sources.sort_by_key(|p| {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let rank = LINK_FIRST.iter().position(|f| *f == name);
        (rank.unwrap_or(LINK_FIRST.len()), name)
    });
    println!("cargo:rerun-if-changed=shim");
    for f in &sources {
        println!("cargo:rerun-if-changed={}", f.display());
    }
    println!("cargo:rerun-if-env-changed=CC");
    let cc = env::var("CC").unwrap_or_else(|_| "cc".into());

    let gen = out.join("gen");
    fs::create_dir_all(&gen).unwrap();
    for (name, text) in fsprof_core::ops::libc::c_op_lists() {
        write_if_changed(&gen.join(name), &text);
    }
    let obj = out.join("obj");
    let _ = fs::remove_dir_all(&obj);
    fs::create_dir_all(&obj).unwrap();
    let objects = compile(&cc, &sources, &gen, &obj);
    let so = out.join("libfsprof_shim.so");
    let status = Command::new(&cc)
        .arg("-shared")
        .args(LINK_FLAGS)
        .arg(format!("-Wl,-T,{}", dir.join("layout.ld").display()))
        .arg("-o")
        .arg(&so)
        .args(&objects)
        .args(["-ldl", "-lpthread"])
        .status()
        .unwrap_or_else(|e| panic!("cannot run `{cc}` to link the preload shim: {e}"));
    assert!(
        status.success(),
        "linking the preload shim with `{cc}` failed"
    );

    // The self-test runner (runner/selftest.c): a plain glibc program,
    // linked against the C library the shim is built for.
    let runner_src =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("runner/selftest.c");
    println!("cargo:rerun-if-changed={}", runner_src.display());
    let status = Command::new(&cc)
        .args(COMMON_CFLAGS)
        .arg("-o")
        .arg(out.join("fsprof-selftest"))
        .arg(&runner_src)
        .arg("-ldl")
        .status()
        .unwrap_or_else(|e| panic!("cannot run `{cc}` to build the self-test runner: {e}"));
    assert!(
        status.success(),
        "building the self-test runner with `{cc}` failed"
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

/// Compiles each C file of `sources` to `obj/<name>.o`, all at once, and
/// returns the objects.
fn compile(cc: &str, sources: &[PathBuf], gen: &Path, obj: &Path) -> Vec<PathBuf> {
    let jobs: Vec<(PathBuf, std::process::Child)> = sources
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "c"))
        .map(|c| {
            let o = obj.join(c.file_stem().unwrap()).with_extension("o");
            let child = Command::new(cc)
                .args(COMMON_CFLAGS)
                .args(CFLAGS)
                .arg("-I")
                .arg(gen)
                .arg("-c")
                .arg(c)
                .arg("-o")
                .arg(&o)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}` to build the preload shim: {e}; install gcc or set CC"));
            (o, child)
        })
        .collect();
    let mut objects = Vec::new();
    for (o, mut child) in jobs {
        let st = child.wait().expect("wait for the C compiler");
        assert!(st.success(), "compiling {} with `{cc}` failed", o.display());
        objects.push(o);
    }
    objects
}

/// Keeps the file's time when its text is unchanged.
fn write_if_changed(path: &Path, text: &str) {
    if fs::read_to_string(path).ok().as_deref() != Some(text) {
        fs::write(path, text).unwrap();
    }
}
