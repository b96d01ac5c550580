//! What the `fsprof` binary costs to start, as far as a test can pin it
//! without timing anything (the timings are in `bench/startup.sh`).

use std::path::Path;
use std::process::Command;

use fsprof_testkit::*;

/// The C compiler's path of one of its files, if it has it (its own
/// answer: the ground truth for what build.rs could link).
fn cc_file(name: &str) -> Option<String> {
    let p = Command::new("cc")
        .arg(format!("-print-file-name={name}"))
        .output()
        .map(|o| stdout(&o).trim().to_string())
        .ok()?;
    (Path::new(&p).is_absolute() && Path::new(&p).is_file()).then_some(p)
}

/// What the ELF file says about its loading: its type (2: ET_EXEC, at a
/// fixed address; 3: ET_DYN, a position-independent file), whether it names a program interpreter
/// (PT_INTERP), and the shared libraries it needs (DT_NEEDED).
struct Elf {
    kind: u16,
    interp: bool,
    /// A PT_DYNAMIC segment: what a static PIE relocates itself by.
    dynamic: bool,
    needed: Vec<String>,
    /// PT_GNU_RELRO's link-time address and size in memory.
    relro: Option<(usize, usize)>,
    /// DT_RELACOUNT: how many relative relocations (one pointer written
    /// each at every start of a static PIE) lead its relocation table.
    /// Read only by a release-build test (a debug build keeps more code).
    #[cfg_attr(debug_assertions, allow(dead_code))]
    relative: Option<usize>,
}

fn elf(bin: &[u8]) -> Elf {
    assert_eq!(&bin[..5], b"\x7fELF\x02", "a 64-bit ELF file");
    let u16_at = |at: usize| u16::from_le_bytes(bin[at..at + 2].try_into().unwrap());
    let u64_at = |at: usize| u64::from_le_bytes(bin[at..at + 8].try_into().unwrap()) as usize;
    let (phoff, phentsize, phnum) = (u64_at(32), u16_at(54) as usize, u16_at(56) as usize);
    let headers: Vec<usize> = (0..phnum).map(|k| phoff + k * phentsize).collect();
    let of_type = |t: u32| {
        headers
            .iter()
            .copied()
            .filter(move |&h| u32::from_le_bytes(bin[h..h + 4].try_into().unwrap()) == t)
    };
    let mut dynamic = Vec::new();
    for h in of_type(2) {
        let (off, size) = (u64_at(h + 8), u64_at(h + 32));
        dynamic.extend(
            (off..off + size)
                .step_by(16)
                .map(|e| (u64_at(e), u64_at(e + 8))),
        );
    }
    // DT_NEEDED (1) values are offsets into the string table, DT_STRTAB
    // (5) its address: in this file, the same as its offset for the
    // first (read-only) segment, where lld and ld put it.
    let strtab = dynamic.iter().find(|d| d.0 == 5).map_or(0, |d| d.1);
    let needed = dynamic
        .iter()
        .filter(|d| d.0 == 1)
        .map(|d| {
            let s = &bin[strtab + d.1..];
            String::from_utf8_lossy(&s[..s.iter().position(|&b| b == 0).unwrap()]).into_owned()
        })
        .collect();
    Elf {
        kind: u16_at(16),
        interp: of_type(3).next().is_some(),
        dynamic: of_type(2).next().is_some(),
        needed,
        relro: of_type(0x6474_e552)
            .next()
            .map(|h| (u64_at(h + 16), u64_at(h + 40))),
        relative: dynamic.iter().find(|d| d.0 == 0x6fff_fff9).map(|d| d.1),
    }
}

/// The functions of the binary's symbol table (`.symtab`): name → (address,
/// size in bytes).
fn functions(bin: &[u8]) -> std::collections::HashMap<String, (u64, u64)> {
    let u16_at = |at: usize| u16::from_le_bytes(bin[at..at + 2].try_into().unwrap()) as usize;
    let u32_at = |at: usize| u32::from_le_bytes(bin[at..at + 4].try_into().unwrap()) as usize;
    let u64_at = |at: usize| u64::from_le_bytes(bin[at..at + 8].try_into().unwrap());
    let (shoff, shentsize, shnum) = (u64_at(40) as usize, u16_at(58), u16_at(60));
    let section = |k: usize| shoff + k * shentsize;
    let mut out = std::collections::HashMap::new();
    // SHT_SYMTAB (2), its names in the section it links to.
    for s in (0..shnum).map(section).filter(|&s| u32_at(s + 4) == 2) {
        let (off, size) = (u64_at(s + 24) as usize, u64_at(s + 32) as usize);
        let names = u64_at(section(u32_at(s + 40)) + 24) as usize;
        for e in (off..off + size).step_by(24) {
            // STT_FUNC (2) or STT_GNU_IFUNC (10), defined (st_shndx != 0).
            if ![2, 10].contains(&(bin[e + 4] & 0xf)) || u16_at(e + 6) == 0 {
                continue;
            }
            let name = &bin[names + u32_at(e)..];
            let name = &name[..name.iter().position(|&b| b == 0).unwrap()];
            out.insert(
                String::from_utf8_lossy(name).into_owned(),
                (u64_at(e + 8), u64_at(e + 16)),
            );
        }
    }
    out
}

/// The crates of the PNG renderer (resvg and what it draws text with),
/// as their names appear in mangled symbols (`<length><name>`, in legacy
/// and v0 mangling alike).
const RENDERER_CRATES: [&str; 6] = [
    "5resvg",
    "4usvg",
    "9rustybuzz",
    "10ttf_parser",
    "6fontdb",
    "9tiny_skia",
];

/// fsprof links no part of the PNG renderer: it runs `fsprof-render`
/// beside it (`src/png.rs`), so that the renderer's relocated data is not
/// copied at every fsprof start (docs/benchmarks/history.md, start15 and
/// start16). The renderer itself has them (so that a change of their
/// names fails here rather than passing unseen).
#[test]
fn fsprof_links_no_part_of_the_png_renderer() {
    let linked = |bin: &Path| {
        let functions = functions(&std::fs::read(bin).unwrap());
        assert!(
            !functions.is_empty(),
            "{} has no symbol table",
            bin.display()
        );
        let mut found: Vec<String> = functions
            .into_keys()
            .filter(|f| RENDERER_CRATES.iter().any(|c| f.contains(c)))
            .collect();
        found.sort();
        found
    };
    let fsprof = fsprof_path();
    let found = linked(&fsprof);
    assert!(
        found.is_empty(),
        "fsprof links {} functions of the PNG renderer, e.g. {:?}",
        found.len(),
        &found[..found.len().min(5)]
    );
    let renderer = linked(&fsprof.with_file_name("fsprof-render"));
    for c in RENDERER_CRATES {
        assert!(
            renderer.iter().any(|f| f.contains(c)),
            "fsprof-render has no function of {c}"
        );
    }
}

/// Where the C toolchain has glibc's static archives, the binary is
/// linked as a static PIE (no dynamic loader; its own code and data at a
/// random address), or statically at a fixed address when
/// `FSPROF_LINK=static` trades that for no self-relocation at start-up
/// (its file then has no dynamic section at all);
/// elsewhere it is dynamically linked, with the unwinder linked in from
/// `libgcc_eh.a` where that exists, so that it does not load
/// `libgcc_s.so.1` (whose constructor's CPUID instructions cost ~0.2 ms
/// per start in a VM). The ground truth is the compiler's own answer and
/// the binary's ELF headers, read here.
#[test]
fn binary_is_linked_as_build_rs_says_and_the_toolchain_allows() {
    let has = |f: &str| cc_file(f).is_some();
    let request = env!("FSPROF_LINK_REQUEST");
    let pie = request != "static";
    let crt = if pie { "rcrt1.o" } else { "crt1.o" };
    let static_possible = ["libc.a", "libm.a", "libgcc.a", "libgcc_eh.a", crt]
        .iter()
        .all(|f| has(f))
        && request != "dynamic";
    let expected = match (static_possible, pie) {
        // musl links statically by itself (build.rs, `musl_static_pie`).
        _ if cfg!(target_env = "musl") => "static-pie, musl",
        (true, false) => "static",
        (true, true) => "static-pie",
        (false, _) if has("libgcc_eh.a") => "dynamic, static unwinder",
        (false, _) => "dynamic",
    };
    assert_eq!(env!("FSPROF_LINKED"), expected, "build.rs's choice");
    let e = elf(&std::fs::read(fsprof_path()).unwrap());
    if expected == "static" {
        assert_eq!(e.kind, 2, "an executable linked at a fixed address");
        assert!(
            !e.dynamic,
            "a dynamic section (relocations to apply at start)"
        );
    } else {
        assert_eq!(e.kind, 3, "a position-independent executable (ASLR)");
    }
    if expected.starts_with("static") {
        assert!(!e.interp, "a static binary names no program interpreter");
        assert!(e.needed.is_empty(), "needs {:?}", e.needed);
    } else {
        assert!(e.interp);
        assert!(
            e.needed.iter().any(|n| n.starts_with("libc.so")),
            "{:?}",
            e.needed
        );
        let gcc_s = e.needed.iter().any(|n| n.starts_with("libgcc_s"));
        assert_eq!(gcc_s, expected == "dynamic", "{:?}", e.needed);
    }
    // And it still starts and runs a command.
    let o = fsprof()
        .args(["run", "-q", "-o", "-", "--", "true"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

/// How the release binary's code is laid out: a debug build is linked as
/// the compiler lays it out, so these exist only in release tests, which
/// `scripts/test-all` runs after the debug suite (`cargo nextest run
/// --release -p fsprof --test cli startup::`).
#[cfg(not(debug_assertions))]
mod release_layout {
    use super::*;

    /// The functions a start runs (build.rs's `startup.order`) lie side by
    /// side, so that they fault in as a few windows of the file rather than
    /// one each (build.rs, `start_up_order`). Spread as the compiler left
    /// them they span ~9 MB of text for ~0.4 MB of code. Fails too when most
    /// names are not in the binary any more (a toolchain or dependency
    /// update changed their hashes): run `bench/startup_order.py` again.
    /// Release builds only (`cargo nextest run --release -p fsprof --test
    /// cli startup`): a debug build is linked as the compiler lays it out.
    #[test]
    fn the_start_up_functions_are_laid_out_together() {
        if env!("FSPROF_START_UP_ORDER") != "1" {
            eprintln!("not a release build linked by rustc's own lld: no start-up order applied");
            return;
        }
        let order =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/startup.order")).unwrap();
        let names: Vec<&str> = order.lines().filter(|l| !l.is_empty()).collect();
        let functions = functions(&std::fs::read(fsprof_path()).unwrap());
        let found: Vec<(u64, u64)> = names
            .iter()
            .filter_map(|n| functions.get(*n).copied())
            .collect();
        // All but a few: the names of fsprof's own crates do not depend on
        // the checkout (one codegen unit each, Cargo.toml), so only a
        // dependency's renamed function (`NAME.llvm.<hash>`) or a change of
        // the start-up's code may be missing.
        assert!(
            found.len() * 100 >= names.len() * 98,
            "only {} of the {} functions of startup.order are in the binary: run `python3 bench/startup_order.py` \
             after a release build, then build again (or a crate of the start-up lost `codegen-units = 1`)",
            found.len(),
            names.len()
        );
        let code: u64 = found.iter().map(|f| f.1).sum();
        let start = found.iter().map(|f| f.0).min().unwrap();
        let end = found.iter().map(|f| f.0 + f.1).max().unwrap();
        // Alignment and the other functions of a C object file (glibc's
        // archives keep several in one section) lie between them.
        assert!(
            end - start <= 2 * code,
            "the start-up's {code} bytes of code span {} bytes",
            end - start
        );
    }
}

/// The static PIE's self-relocation stays bounded: glibc's start writes
/// one pointer per relative relocation (`DT_RELACOUNT`), ~13 instructions
/// each, into pages that the entry point then has to copy (`src/entry.rs`,
/// ~2–3 µs a page); at 19,462 they were 56% of the user-space instructions
/// of `run -q -- true`. A `const` table with pointers is copied into every
/// codegen unit that names it (the libc op table was nine copies, 1,751
/// relocations), a table of names indexed at run time is a pointer a name
/// (`fsprof_core::name_table` keeps them without), and a dependency's
/// feature can bring thousands: find where they come from before raising
/// the bounds (docs/benchmarks/history.md, reloc12 and start15).
/// Release builds only: a debug build keeps much more code.
#[cfg(not(debug_assertions))]
#[test]
fn the_static_pie_relocates_few_pointers_at_start() {
    if env!("FSPROF_LINKED") != "static-pie" {
        eprintln!("not a glibc static PIE: nothing relocated by fsprof itself");
        return;
    }
    let e = elf(&std::fs::read(fsprof_path()).unwrap());
    let relative = e.relative.expect("a static PIE has DT_RELACOUNT");
    // 12,279 with fat LTO (17,746 without: lto13); 11,492 with the syscall,
    // FUSE opcode and errno names packed (start15); 7,370 with the PNG
    // renderer in `fsprof-render` (start16), whose crates (usvg's text
    // layout, rustybuzz, fontdb) brought ~4,100.
    assert!(
        relative <= 7_600,
        "{relative} relative relocations at start (readelf -d: RELACOUNT); see this test's doc"
    );
    // What the entry point copies: 55 pages, 51 with the names packed and
    // the segment on a page of its own (build.rs: separate-loadable-segments),
    // 28 without the PNG renderer (start16).
    let (at, size) = e.relro.expect("a static PIE has a RELRO segment");
    assert_eq!(
        at % 4096,
        0,
        "RELRO at {at:#x}: not page-aligned (see build.rs)"
    );
    let pages = (at + size).div_ceil(4096) - at / 4096;
    assert!(
        pages <= 29,
        "RELRO spans {pages} pages (readelf -lW: GNU_RELRO); see this test's doc"
    );
}

/// What a statically linked glibc program could lose still works: the
/// shim's self-test `dlopen`s it (run here with an empty TMPDIR, where
/// no earlier run has kept the figure) and `--serve-metrics localhost:0`
/// resolves a host name.
#[test]
fn the_self_test_and_name_lookups_work_in_the_built_binary() {
    let tmp = tempfile::tempdir().unwrap();
    let o = fsprof()
        .env("TMPDIR", tmp.path())
        .current_dir(tmp.path())
        .args([
            "run",
            "-q",
            "--serve-metrics",
            "localhost:0",
            "-o",
            "p.json",
        ])
        .args(["--", "cat", "/etc/hostname"])
        .output()
        .unwrap();
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("serving live metrics on http://127.0.0.1:")
            || err.contains("serving live metrics on http://[::1]:"),
        "{err}"
    );
    let p = load(&tmp.path().join("p.json"));
    // The figure is the overhead tests' business; here, that the self-test
    // ran at all (it is there only when the shim could be loaded).
    let own = p.meta.overhead.as_ref();
    assert!(
        own.is_some_and(|o| o.per_call_ns.is_finite() && o.min_recordable_ns.is_finite()),
        "{own:?}; {err}"
    );
    assert!(!err.contains("could not measure"), "{err}");
    let kept = std::fs::read_dir(tmp.path().join(format!("fsprof-{}", uid())))
        .unwrap()
        .filter_map(|e| e.ok())
        .any(|e| e.file_name().to_string_lossy().starts_with("selfcost-"));
    assert!(kept, "the self-test ran in this run and kept its figure");
}

fn uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// A run killed before it could clean up leaves its run directory in
/// /dev/shm; the next run removes it (while its command runs, off the
/// start-up's path), and leaves a live run's alone.
#[test]
fn the_next_run_removes_a_killed_runs_directory() {
    let shm = Path::new("/dev/shm");
    assert!(shm.is_dir(), "/dev/shm is where run directories go");
    let mut gone = Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let stale = shm.join(format!("fsprof-run-{dead}-0-startup-test"));
    let live = shm.join(format!("fsprof-run-{}-0-startup-test", std::process::id()));
    for d in [&stale, &live] {
        std::fs::create_dir(d).unwrap();
        std::fs::write(d.join("p0"), b"counters").unwrap();
    }
    let o = fsprof()
        .args(["run", "-q", "-o", "-", "--", "true"])
        .output()
        .unwrap();
    let removed = !stale.exists();
    let kept = live.join("p0").exists();
    let _ = std::fs::remove_dir_all(&stale);
    let _ = std::fs::remove_dir_all(&live);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(removed, "the killed run's directory is still there");
    assert!(kept, "a live run's directory was removed");
}

/// The static PIE's entry (`src/entry.rs`) asks the kernel, before glibc's
/// self-relocation, for private copies of exactly the pages that
/// relocation writes: its first system call is
/// `madvise(<RELRO rounded out to pages>, MADV_POPULATE_WRITE)`, with the
/// range the binary's own ELF headers give (read here from the file), and
/// the kernel accepts it. Then the binary runs as before (every other test
/// runs it).
#[test]
#[ignore = "needs strace"]
fn the_static_pie_prefaults_its_relocated_pages_in_one_call() {
    let strace = need_program("strace", "strace");
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("s.log");
    let o = Command::new(strace)
        .arg("-o")
        .arg(&log)
        .arg(fsprof_path())
        .arg("--version")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("fsprof "), "{}", stdout(&o));
    let text = std::fs::read_to_string(&log).unwrap();
    let first = text
        .lines()
        .find(|l| !l.starts_with("execve("))
        .unwrap_or_default();
    if !env!("FSPROF_LINKED").starts_with("static-pie") {
        assert!(!first.starts_with("madvise("), "{first}");
        return;
    }
    let e = elf(&std::fs::read(fsprof_path()).unwrap());
    let (at, size) = e.relro.expect("a static PIE has a RELRO segment");
    let page = 4096;
    let len = (at + size).next_multiple_of(page) - at / page * page;
    let args = first
        .strip_prefix("madvise(")
        .unwrap_or_else(|| panic!("first system call: {first}"));
    let fields: Vec<&str> = args.split([',', ')']).map(str::trim).collect();
    let addr = usize::from_str_radix(fields[0].trim_start_matches("0x"), 16).unwrap();
    assert_eq!(addr % page, 0, "{first}");
    assert_eq!(fields[1], len.to_string(), "{first}");
    assert_eq!(fields[2], "MADV_POPULATE_WRITE", "{first}");
    // The kernel has it since 5.14; an older one says EINVAL and the
    // pages fault in one by one as before.
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut v = release
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (v.next().unwrap_or(0), v.next().unwrap_or(0));
    if (major, minor) >= (5, 14) {
        assert!(first.ends_with("= 0"), "{first}");
    }
}

/// fsprof's own `main` (`src/rt.rs`, in place of std's runtime set-up)
/// keeps what std's set-up gave: started with descriptors 0–2 closed, it
/// opens `/dev/null` on them before anything else, so its own files
/// (the run directory's control file, the profile) never become its
/// stdin, stdout or stderr. The ground truth is the kernel's
/// `/proc/<fsprof>/fd`, listed by the profiled command.
#[test]
fn closed_standard_descriptors_are_opened_on_dev_null() {
    use std::os::unix::process::CommandExt;
    let tmp = tempfile::tempdir().unwrap();
    let fds = tmp.path().join("fds");
    let mut cmd = fsprof();
    cmd.current_dir(tmp.path())
        .args(["run", "-q", "-o", "p.json", "--", "sh", "-c"])
        .arg(format!(
            "for fd in 0 1 2; do readlink /proc/$PPID/fd/$fd; done > {}",
            fds.display()
        ));
    // SAFETY: only close(2) between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            for fd in 0..3 {
                libc::close(fd);
            }
            Ok(())
        });
    }
    let status = cmd.status().unwrap();
    assert!(status.success(), "{status:?}");
    let seen = std::fs::read_to_string(&fds).unwrap();
    assert_eq!(seen, "/dev/null\n".repeat(3), "fsprof's fds 0-2");
    // And the profile is whole (no diagnostic went into it).
    load(&tmp.path().join("p.json"));
}

/// SIGPIPE stays ignored (as std's set-up leaves it): a report written
/// into a pipe nobody reads ends fsprof normally, not by the signal.
#[test]
fn a_pipe_without_a_reader_does_not_kill_fsprof() {
    use std::os::fd::FromRawFd;
    use std::os::unix::process::ExitStatusExt;
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("p.json");
    let o = capture_in(tmp.path(), &["run", "-q"], &p, &["cat", "/etc/hostname"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut ends = [0; 2];
    // SAFETY: `ends` has room for the two descriptors pipe(2) returns.
    assert_eq!(unsafe { libc::pipe(ends.as_mut_ptr()) }, 0);
    // SAFETY: the read end is ours and closed once.
    unsafe { libc::close(ends[0]) };
    // SAFETY: the write end is ours; the Stdio takes it over.
    let writer = unsafe { std::process::Stdio::from_raw_fd(ends[1]) };
    let o = fsprof()
        .arg("report")
        .arg(&p)
        .stdout(writer)
        .output()
        .unwrap();
    assert_eq!(o.status.signal(), None, "{:?} {}", o.status, stderr(&o));
}

/// fsprof starts the command on its own CPU (pinned for the clone), but
/// the command runs with the CPU mask fsprof was given, as it would
/// without fsprof, and fsprof gets that mask back too (the command gives
/// it back before its `execve`: fsprof, woken there, runs on the other
/// CPU). The ground truth is the kernel's `Cpus_allowed_list` of this
/// test process, of the command and of fsprof while the command runs.
/// With the child claiming to have given fsprof's mask back without the
/// call, fsprof's read `1` against `0-1`.
#[test]
fn the_command_and_fsprof_run_with_the_cpu_mask_fsprof_was_given() {
    let allowed = |status: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .map(|v| v.trim().to_string())
            .unwrap()
    };
    let ours = allowed(&std::fs::read_to_string("/proc/self/status").unwrap());
    let tmp = tempfile::tempdir().unwrap();
    let (seen, fsprofs) = (tmp.path().join("status"), tmp.path().join("fsprof"));
    let script = format!(
        "cat /proc/self/status > {}; sleep 0.2; cat /proc/$PPID/status > {}",
        seen.display(),
        fsprofs.display()
    );
    let o = fsprof()
        .current_dir(tmp.path())
        .args(["run", "-q", "-o", "p.json", "--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(allowed(&std::fs::read_to_string(&seen).unwrap()), ours);
    let fsprof_mask = allowed(&std::fs::read_to_string(&fsprofs).unwrap());
    assert_eq!(fsprof_mask, ours, "fsprof's own mask");
}

/// fsprof reads its umask once, first thing (`src/rt.rs`), not from
/// /proc when it writes: a new profile still gets `0666` less the umask
/// fsprof was started with (never world-writable).
#[test]
fn a_new_profile_gets_the_umask_fsprof_was_started_with() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    for (mask, want) in [(0o027, 0o640), (0o000, 0o664), (0o077, 0o600)] {
        let tmp = tempfile::tempdir().unwrap();
        let mut cmd = fsprof();
        cmd.current_dir(tmp.path())
            .args(["run", "-q", "-o", "p.json", "--", "true"]);
        // SAFETY: only umask(2) between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                libc::umask(mask);
                Ok(())
            });
        }
        let o = cmd.output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let mode = std::fs::metadata(tmp.path().join("p.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, want, "umask {mask:03o}");
    }
}

/// The run directory goes with the run: removed by name when the control
/// file is all it holds, walked when a process left something else in it.
/// The command reports where it was (`FSPROF_SHM` ends with its path).
#[test]
fn the_run_directory_is_removed_at_the_end() {
    for extra in ["", "touch \"$d/p-left-by-a-process\"; "] {
        let script = format!("d=${{FSPROF_SHM#*:*:*:*:}}; {extra}printf %s \"$d\"");
        let o = fsprof()
            .args(["run", "-q", "-o", "/dev/null", "--", "sh", "-c", &script])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let dir = String::from_utf8(o.stdout).unwrap();
        assert!(dir.contains("fsprof-run-"), "the command saw {dir:?}");
        assert!(
            !Path::new(&dir).exists(),
            "{dir} is still there ({extra:?})"
        );
    }
}

/// fsprof's relocated data (vtables, function pointers, the GOT: the
/// `PT_GNU_RELRO` segment) is read-only while it runs: glibc's start-up
/// protects it after relocating, and a musl build, whose static start-up
/// does not, does it itself (`src/relro.rs`). Seen from the profiled
/// command in `/proc/<fsprof>/maps`.
#[test]
fn the_relocated_data_is_read_only_while_fsprof_runs() {
    let bin = fsprof_path();
    let e = elf(&std::fs::read(&bin).unwrap());
    let (at, size) = e.relro.expect("fsprof has a RELRO segment");
    let tmp = tempfile::tempdir().unwrap();
    let maps = tmp.path().join("maps");
    let o = fsprof()
        .args(["run", "-q", "-o", "/dev/null", "--", "sh", "-c"])
        .arg(format!("cat /proc/$PPID/maps > {}", maps.display()))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&maps).unwrap();
    let bin = std::fs::canonicalize(&bin).unwrap();
    // (start, end, permissions, file offset) of each of fsprof's own mappings.
    let own: Vec<(usize, usize, String, usize)> = text
        .lines()
        .filter(|l| l.ends_with(&*bin.to_string_lossy()))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (lo, hi) = f[0].split_once('-').unwrap();
            let hex = |s: &str| usize::from_str_radix(s, 16).unwrap();
            (hex(lo), hex(hi), f[1].to_string(), hex(f[2]))
        })
        .collect();
    // A position-independent file is loaded at a random base: where its
    // first page (file offset 0) is mapped.
    let bias = if e.kind == 3 {
        own.iter()
            .find(|m| m.3 == 0)
            .expect("fsprof's first page")
            .0
    } else {
        0
    };
    let page = 4096;
    let (start, end) = ((bias + at) / page * page, (bias + at + size) / page * page);
    assert!(
        end > start,
        "RELRO at {at:#x}+{size:#x} holds no whole page"
    );
    for p in (start..end).step_by(page) {
        let m = own
            .iter()
            .find(|m| m.0 <= p && p < m.1)
            .unwrap_or_else(|| panic!("{p:#x} not mapped from fsprof:\n{text}"));
        assert_eq!(m.2, "r--p", "page {p:#x} of the relocated data:\n{text}");
    }
}
