//! Puts the git commit fsprof is built from into `FSPROF_GIT_COMMIT` for
//! `fsprof --version` ("unknown" outside a git checkout: a source tarball,
//! a crate package). Only the commit: whether the work tree differed from
//! it cannot be kept current without re-running on every edit.
//!
//! Also links the `fsprof` binary statically where the C toolchain has
//! glibc's static archives (see [`link_static`]): a dynamically linked
//! fsprof spent ~0.3 ms of every `fsprof run` in the dynamic loader
//! (relocating and faulting in libc, libm and its own GOT) before `main`
//! (docs/benchmarks.md, "Start-up cost"). Elsewhere the unwinder alone is
//! linked from `libgcc_eh.a` instead of loading `libgcc_s.so.1`, whose
//! constructor detects CPU features with CPUID instructions, each a trap
//! to the hypervisor in a VM (~0.2 ms). Unwinding (panics, backtraces)
//! works the same in every form.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let o = Command::new("git").args(args).output().ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    // Re-run when HEAD moves: a commit changes the branch's ref (loose or
    // packed), a checkout changes HEAD. `--git-path` finds them in a
    // worktree too.
    let mut watch = vec!["HEAD".to_string(), "packed-refs".to_string()];
    watch.extend(git(&["symbolic-ref", "-q", "HEAD"]));
    for path in &watch {
        // A path that does not exist would make cargo re-run this (and
        // rebuild fsprof) on every build.
        let found =
            git(&["rev-parse", "--git-path", path]).filter(|p| std::path::Path::new(p).exists());
        if let Some(p) = found {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=FSPROF_GIT_COMMIT={commit}");
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-env-changed=FSPROF_LINK");
    println!("cargo:rustc-check-cfg=cfg(fsprof_entry)");
    let linked = if let Some(form) = link_static() {
        form
    } else if let Some(form) = musl_static_pie() {
        form
    } else if static_unwinder() {
        "dynamic, static unwinder"
    } else {
        "dynamic"
    };
    // For the tests (`startup.rs`), which check the binary is this.
    println!("cargo:rustc-env=FSPROF_LINKED={linked}");
    let ordered = start_up_order();
    println!(
        "cargo:rustc-env=FSPROF_START_UP_ORDER={}",
        u8::from(ordered)
    );
    println!("cargo:rustc-env=FSPROF_LINK_REQUEST={}", env("FSPROF_LINK"));
}

fn env(k: &str) -> String {
    std::env::var(k).unwrap_or_default()
}

/// A glibc Linux target built on itself (not cross-compiled, where the
/// host's `cc` would answer for the wrong C library).
fn native_gnu() -> bool {
    env("CARGO_CFG_TARGET_OS") == "linux"
        && env("CARGO_CFG_TARGET_ENV") == "gnu"
        && env("TARGET") == env("HOST")
        && !env("CARGO_CFG_TARGET_FEATURE")
            .split(',')
            .any(|f| f == "crt-static")
}

/// The C compiler's path of one of its files (`libc.a`), if it has it.
fn cc_file(name: &str) -> Option<PathBuf> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let o = Command::new(cc)
        .arg(format!("-print-file-name={name}"))
        .output()
        .ok()?;
    let p = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
    // A compiler that does not know the file prints the bare name.
    (p.is_absolute() && p.is_file()).then(|| p.canonicalize().unwrap_or(p))
}

/// Links the `fsprof` binary (only it: tests, build scripts and proc
/// macros stay as they are) statically, and says how: `static-pie` (the
/// default) or `static` at a fixed address (`FSPROF_LINK=static`). rustc
/// has no per-binary `crt-static`, and for glibc targets it always asks
/// for `-Bdynamic -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc`; so
/// `-static-pie` (or `-static`) is added to this binary's link and a
/// directory is put on its library path where each of those names is a
/// linker script naming the static archive (`libc.so` →
/// `GROUP(libc.a libgcc.a libgcc_eh.a)`): the linker takes the script for
/// the `.so` it was asked for. Off with `FSPROF_LINK=dynamic`, and
/// wherever an archive is missing.
///
/// Why position-independent by default although it costs start-up time:
/// fsprof runs as root and parses files and shared memory written by
/// other users, so its own code and data keep a random address, as every
/// distribution requires of programs run with privileges. The price is
/// the self-relocation at every start: a pointer written per relative
/// relocation into the pages of `.data.rel.ro` and `.got` (how to count
/// both: `src/entry.rs`, which pre-faults those pages in one call),
/// 0.1–0.4 ms of every `fsprof run` (docs/benchmarks/overhead.md,
/// "fsprof's own start-up"). Weighed again with figures paired in one
/// loop ("Start-up, seventh session"): the fixed address saves ~0.13 ms
/// before the clone and ~0.17 ms in all of `fsprof run -q -- true`, once
/// per run, not per process of the command. Again on the fat-LTO build
/// (history, "### start14": one object linked both ways): −0.16 to −0.21
/// ms before the clone, −0.19 to −0.27 ms in all, which does bring the run
/// within its +0.3 ms target (+0.15 ms over the launcher, the PIE +0.40 in
/// the same loop at load 8). Still the PIE: the fixed address would give
/// every gadget in 10 MB of code a known address in a root process that
/// reads other users' shared memory, for 0.2 ms once per run (not per
/// process of the command). Packed relative relocations
/// (`-z pack-relative-relocs`) were measured twice with no gain: the time
/// is in copying and writing the pages, not in reading the table.
/// `FSPROF_LINK=static` links at a fixed address instead, with no
/// relocation to do, for whoever prefers that time to the randomisation
/// (the stack, the heap and every mapping stay randomised either way).
///
/// fsprof stays able to do what needs the dynamic loader: the self-test
/// `dlopen`s the shim (glibc loads ld.so for it), and name lookups for
/// `--serve-metrics` use glibc's built-in `files`/`dns` services.
fn link_static() -> Option<&'static str> {
    let request = env("FSPROF_LINK");
    if !native_gnu() || request == "dynamic" {
        return None;
    }
    let pie = request != "static";
    let crt = if pie { "rcrt1.o" } else { "crt1.o" };
    let archives = ["libc.a", "libm.a", "libgcc.a", "libgcc_eh.a", crt].map(cc_file);
    let [Some(c), Some(m), Some(gcc), Some(eh), Some(_)] = archives else {
        return None;
    };
    let (c, m, gcc, eh) = (c.display(), m.display(), gcc.display(), eh.display());
    let dir = PathBuf::from(env("OUT_DIR")).join("static-libs");
    let scripts = [
        ("libc.so", format!("GROUP ( {c} {gcc} {eh} )")),
        ("libgcc_s.so", format!("INPUT ( {eh} {gcc} )")),
        ("libm.so", format!("INPUT ( {m} )")),
        // Empty since glibc 2.34 (their functions are in libc.a); named so
        // the linker finds no shared object under these names either.
        ("libutil.so", format!("INPUT ( {c} )")),
        ("librt.so", format!("INPUT ( {c} )")),
        ("libpthread.so", format!("INPUT ( {c} )")),
        ("libdl.so", format!("INPUT ( {c} )")),
    ];
    let written = std::fs::create_dir_all(&dir).and_then(|()| {
        scripts
            .iter()
            .try_for_each(|(name, text)| std::fs::write(dir.join(name), format!("{text}\n")))
    });
    if written.is_err() {
        return None;
    }
    if pie {
        println!("cargo:rustc-link-arg-bin=fsprof=-static-pie");
        // Pre-faults the pages the self-relocation writes (src/entry.rs).
        println!("cargo:rustc-cfg=fsprof_entry");
        println!("cargo:rustc-link-arg-bin=fsprof=-Wl,--entry=fsprof_entry");
    } else {
        // After rustc's own `-pie`, which the last of the two overrides.
        println!("cargo:rustc-link-arg-bin=fsprof=-static");
        println!("cargo:rustc-link-arg-bin=fsprof=-no-pie");
    }
    println!("cargo:rustc-link-arg-bin=fsprof=-L{}", dir.display());
    // Each segment at a page-aligned address (lld pads the file, by less
    // than a page a segment). Left packed, `.data` and `.bss` start at an
    // offset into a page that any change in the size of the code or the
    // constants before them moves, and where their hot variables fall
    // across page boundaries moves with it: glibc's exit list and the
    // `__exit_funcs_done` it writes at exit, or the first entry of its
    // pthread key table, on a page of their own cost a run two page faults
    // more (+11 µs after the command's exit, docs/benchmarks/history.md,
    // start15). Aligned, their pages depend on the writable data alone;
    // and the RELRO segment, which the entry point copies whole pages of,
    // starts on a page instead of sharing a partial first one.
    println!("cargo:rustc-link-arg-bin=fsprof=-Wl,-z,separate-loadable-segments");
    Some(if pie { "static-pie" } else { "static" })
}

/// Lays out the functions a start of fsprof runs in its own process
/// (`startup.order`, written by `bench/startup_order.py`: `run -q --
/// CMD` with and without a profile file, `--version`) side by side at the
/// front of the text, with lld's `--symbol-ordering-file`. Why: they lay
/// spread over 9 MB of code, each in a 64 KiB window of the file of its
/// own, which a start faulted in one read fault at a time: ~30 faults of
/// `fsprof --version`'s 76, each 2–4 µs in this VM (trap, page-cache
/// lookup, 16 page-table entries). Together they fill seven windows.
/// `fsprof --version` 76 → 47 faults; `fsprof run -q -- true` 134 → 109
/// (docs/benchmarks/overhead.md, "Start-up, tenth session").
///
/// Names the binary no longer has (their hashes change with the
/// toolchain and the dependencies) are skipped silently;
/// `cli::startup::the_start_up_functions_are_laid_out_together` fails
/// when most are, and says to run the script again. Only where rustc
/// links with its own lld (GNU ld before 2.43 has no such option), and in
/// release builds: the list is the release build's (a debug build's
/// functions are others, and their names' hashes differ).
fn start_up_order() -> bool {
    let order = PathBuf::from(env("CARGO_MANIFEST_DIR")).join("startup.order");
    println!("cargo:rerun-if-changed={}", order.display());
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    if env("PROFILE") != "release" || !rust_lld_links() || !order.is_file() {
        return false;
    }
    println!(
        "cargo:rustc-link-arg-bin=fsprof=-Wl,--symbol-ordering-file={}",
        order.display()
    );
    println!("cargo:rustc-link-arg-bin=fsprof=-Wl,--no-warn-symbol-ordering");
    true
}

/// Whether rustc links this binary with its own lld: its default for
/// x86_64-unknown-linux-gnu since Rust 1.90, unless a linker is chosen
/// (cargo's `linker` setting, `-C linker`, `-C linker-features`,
/// `-C link-self-contained`, `-fuse-ld`).
fn rust_lld_links() -> bool {
    let flags = env("CARGO_ENCODED_RUSTFLAGS");
    let chosen = std::env::var_os("RUSTC_LINKER").is_some()
        || ["linker", "link-self-contained", "fuse-ld"]
            .iter()
            .any(|f| flags.contains(f));
    if env("TARGET") != "x86_64-unknown-linux-gnu" || chosen {
        return false;
    }
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = Command::new(rustc)
        .arg("-vV")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    // "release: 1.95.0"
    let minor = version
        .lines()
        .find_map(|l| l.strip_prefix("release: 1."))
        .and_then(|v| v.split('.').next()?.parse::<u32>().ok());
    minor.is_some_and(|m| m >= 90)
}

/// A musl target links fsprof as a static PIE by itself (rustc's
/// default there); it gets the same entry point as the glibc static PIE
/// (`src/entry.rs`: musl's start-up relocates the same pages), and
/// `src/relro.rs` makes its relocated data read-only after the relocation,
/// which glibc's start-up does and musl's static start-up does not.
fn musl_static_pie() -> Option<&'static str> {
    // Static unless asked otherwise (cargo leaves `crt-static` out of
    // CARGO_CFG_TARGET_FEATURE where it is the target's default).
    let dynamic = env("CARGO_ENCODED_RUSTFLAGS").contains("-crt-static");
    if env("CARGO_CFG_TARGET_ENV") != "musl" || dynamic {
        return None;
    }
    println!("cargo:rustc-cfg=fsprof_entry");
    println!("cargo:rustc-link-arg-bin=fsprof=-Wl,--entry=fsprof_entry");
    Some("static-pie, musl")
}

/// On glibc targets rustc links `-lgcc_s` for the unwinder. Linking every
/// object of `libgcc_eh.a` first defines the same `_Unwind_*` functions in
/// the binary, so `--as-needed` (rustc's default) leaves libgcc_s out.
/// Skipped where the C compiler has no libgcc_eh.a (then libgcc_s is
/// loaded as before).
fn static_unwinder() -> bool {
    let Some(archive) = cc_file("libgcc_eh.a").filter(|_| native_gnu()) else {
        return false;
    };
    println!("cargo:rustc-link-arg-bins=-Wl,--whole-archive");
    println!("cargo:rustc-link-arg-bins={}", archive.display());
    println!("cargo:rustc-link-arg-bins=-Wl,--no-whole-archive");
    true
}
