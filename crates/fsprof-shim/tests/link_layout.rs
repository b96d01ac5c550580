//! How the built shim is linked (build.rs's `LINK_FLAGS`, shim/layout.ld):
//! what every process that preloads it pays to load it. These are facts of
//! the linker's output that no other test would notice lost: the shim
//! works the same linked either way, only slower to load.
//!
//! The ELF tables are read by hand (a few fixed offsets of ELF64, as
//! fsprof-cli's `startup::release_layout` does): the workspace has no ELF
//! crate, and these three lookups do not call for one.

use std::collections::HashMap;

use fsprof_shim::SHIM_SO;

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const PT_GNU_RELRO: u32 = 0x6474_e552;
const PF_X: u32 = 1;
const PF_W: u32 = 2;
const DT_NULL: u64 = 0;
const DT_FINI: u64 = 13;
/// The kernel's fault-around window (`fault_around_bytes`): one read fault
/// maps the file's cached pages of the 64 KiB around it.
const FAULT_WINDOW: u64 = 64 * 1024;
const STT_OBJECT: u8 = 1;
const STT_FUNC: u8 = 2;

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// A program header: (type, flags, file offset, address, size in memory).
struct Segment {
    kind: u32,
    flags: u32,
    offset: u64,
    addr: u64,
    file_size: u64,
    mem_size: u64,
}

fn segments(so: &[u8]) -> Vec<Segment> {
    let (phoff, phentsize, phnum) = (
        u64_at(so, 32) as usize,
        u16_at(so, 54) as usize,
        u16_at(so, 56),
    );
    (0..phnum as usize)
        .map(|k| phoff + k * phentsize)
        .map(|p| Segment {
            kind: u32_at(so, p),
            flags: u32_at(so, p + 4),
            offset: u64_at(so, p + 8),
            addr: u64_at(so, p + 16),
            file_size: u64_at(so, p + 32),
            mem_size: u64_at(so, p + 40),
        })
        .collect()
}

/// The address and size of the section named `name`.
fn section(so: &[u8], name: &str) -> Option<(u64, u64)> {
    let (shoff, shentsize, shnum, shstrndx) = (
        u64_at(so, 40) as usize,
        u16_at(so, 58) as usize,
        u16_at(so, 60) as usize,
        u16_at(so, 62) as usize,
    );
    let header = |k: usize| shoff + k * shentsize;
    let names = u64_at(so, header(shstrndx) + 24) as usize;
    (0..shnum).map(header).find_map(|s| {
        let n = &so[names + u32_at(so, s) as usize..];
        let n = &n[..n.iter().position(|&b| b == 0).unwrap()];
        (n == name.as_bytes()).then(|| (u64_at(so, s + 16), u64_at(so, s + 32)))
    })
}

/// The functions of the shim's symbol table (`.symtab`): name → (address,
/// size in bytes).
fn functions(so: &[u8]) -> HashMap<String, (u64, u64)> {
    symbols(so, STT_FUNC)
}

/// The symbols of type `kind` of the shim's symbol table (`.symtab`), as
/// [`functions`].
fn symbols(so: &[u8], kind: u8) -> HashMap<String, (u64, u64)> {
    let (shoff, shentsize, shnum) = (
        u64_at(so, 40) as usize,
        u16_at(so, 58) as usize,
        u16_at(so, 60) as usize,
    );
    let header = |k: usize| shoff + k * shentsize;
    let mut out = HashMap::new();
    // SHT_SYMTAB (2), its names in the section it links to.
    for s in (0..shnum).map(header).filter(|&s| u32_at(so, s + 4) == 2) {
        let (off, size) = (u64_at(so, s + 24) as usize, u64_at(so, s + 32) as usize);
        let names = u64_at(so, header(u32_at(so, s + 40) as usize) + 24) as usize;
        for e in (off..off + size).step_by(24) {
            // Of the type asked for, defined (st_shndx != 0).
            if so[e + 4] & 0xf != kind || u16_at(so, e + 6) == 0 {
                continue;
            }
            let name = &so[names + u32_at(so, e) as usize..];
            let name = &name[..name.iter().position(|&b| b == 0).unwrap()];
            out.insert(
                String::from_utf8_lossy(name).into_owned(),
                (u64_at(so, e + 8), u64_at(so, e + 16)),
            );
        }
    }
    out
}

fn is_elf64_le(so: &[u8]) -> bool {
    so.starts_with(b"\x7fELF\x02\x01")
}

/// One mmap for the headers, code and constants, one for the data: the
/// default (`-z separate-code`) maps four segments, the headers, the code
/// and the constants each in a VMA of its own that faults in on its own.
/// Nothing is mapped writable and executable, and the GOT and constructor
/// table still become read-only once relocated (RELRO).
#[test]
fn the_shim_loads_as_two_segments_with_relro() {
    assert!(is_elf64_le(SHIM_SO));
    let segs = segments(SHIM_SO);
    let loads: Vec<&Segment> = segs.iter().filter(|s| s.kind == PT_LOAD).collect();
    let described: Vec<String> = loads
        .iter()
        .map(|s| {
            format!(
                "{:#x}+{:#x} {}{}",
                s.addr,
                s.mem_size,
                if s.flags & PF_W != 0 { "w" } else { "-" },
                if s.flags & PF_X != 0 { "x" } else { "-" }
            )
        })
        .collect();
    assert_eq!(
        loads.len(),
        2,
        "the shim's loadable segments: {described:?} (is -z noseparate-code still in build.rs's LINK_FLAGS?)"
    );
    assert_eq!(
        (loads[0].offset, loads[0].flags & (PF_W | PF_X)),
        (0, PF_X),
        "the first segment holds the headers and the code, not writable: {described:?}"
    );
    assert_eq!(
        loads[1].flags & (PF_W | PF_X),
        PF_W,
        "the second segment holds the data, not executable: {described:?}"
    );
    let relro = segs.iter().find(|s| s.kind == PT_GNU_RELRO);
    assert!(
        relro.is_some_and(|r| r.addr >= loads[1].addr && r.mem_size > 0),
        "no RELRO part in the shim's data segment (is -z relro still in build.rs's LINK_FLAGS?)"
    );
}

/// The constants lie before the code, within the fault-around window of
/// the program headers the loader reads first, so that one fault maps
/// both (shim/layout.ld); behind 360 KiB of code they fault in on their
/// own in every process that reads one (the constructor's getenv does).
#[test]
fn the_constants_share_the_headers_fault_window() {
    let (rodata, rodata_size) = section(SHIM_SO, ".rodata").expect("a .rodata section");
    let (text, _) = section(SHIM_SO, ".text").expect("a .text section");
    assert!(
        rodata < text && rodata + rodata_size <= FAULT_WINDOW,
        ".rodata at {rodata:#x}+{rodata_size:#x}, .text at {text:#x}: is shim/layout.ld still passed to the linker?"
    );
}

/// The code starts on a page (shim/layout.ld), as a default link starts
/// it, so that each wrapper's hot path falls where it would there: right
/// after the constants, pread's wrapper measured +2.3 ns a call.
#[test]
fn the_code_starts_on_a_page() {
    let (init, _) = section(SHIM_SO, ".init").expect("an .init section");
    let (rodata, _) = section(SHIM_SO, ".rodata").expect("a .rodata section");
    assert!(
        init % 4096 == 0 && rodata < init,
        ".init at {init:#x}, .rodata at {rodata:#x}: is shim/layout.ld's ALIGN still there?"
    );
}

/// The functions a `cat` under `fsprof run` runs (valgrind --tool=callgrind,
/// the eleventh session) and those a shell's child runs between fork and
/// exec: the C runtime's and the shim's constructors and destructors, the
/// set-up, the real functions' lookup, the wrappers it calls.
const A_SHORT_PROCESS_RUNS: &[&str] = &[
    "frame_dummy",
    "__do_global_dtors_aux",
    "fsprof_init",
    "nextsym_init",
    "set_fork_hook",
    "stream_gap_at_exit",
    "fsprof_mapwrite_at_exit",
    "fsprof_next_sym",
    "fsprof_resolve",
    "fsprof_slot_slow",
    "fsprof_ctr_slow",
    "fsprof_corr_slow",
    "fsprof_fd_slow",
    "fsprof_fd_classify",
    "fsprof_own_fire",
    "fsprof_trace_process",
    "process_ready",
    "before_fork_in_parent",
    "after_fork_in_child",
    "fsprof_capture_env",
    "fsprof_open_run_dir",
    "fsprof_control_valid",
    "fsprof_attach_control",
    "fsprof_attach_control_direct",
    "attach_control_fd",
    "fsprof_take_block",
    "fsprof_block",
    "fsprof_pool_thread_slot",
    "fsprof_pool_create_in_block",
    "fsprof_pool_argv",
    "fsprof_pool_names_kept",
    "pool_alloc",
    "pool_alloc_table",
    "fill_header",
    "copy_argv",
    "alloc_in_last",
    "fsprof_parse_u64",
    "new_slot",
    "fd_new",
    "fsprof_fd_opened",
    "env_for",
    "open",
    "read",
    "write",
    "fstat",
    "close",
    "posix_fadvise",
    "fclose",
    "fflush",
    "dup2",
    "execve",
];

/// What a short process runs of the shim lies in the first 64 KiB of the
/// file (shim/layout.ld), which the loader's first fault, on the program
/// headers, maps whole: a `cat` then faults in none of the shim's code
/// on its own. Laid out as the linker would (the set-up files' code after
/// every common wrapper, the C runtime's behind them) it spans 0x4000 to
/// 0x12000, two or three faults. Fails too when most of the names are gone
/// (renamed): list what a short process runs now.
#[test]
fn what_a_short_process_runs_lies_in_the_headers_fault_window() {
    let functions = functions(SHIM_SO);
    let found: Vec<(&str, u64, u64)> = A_SHORT_PROCESS_RUNS
        .iter()
        .filter_map(|n| functions.get(*n).map(|&(a, s)| (*n, a, s)))
        .collect();
    assert!(
        found.len() * 4 >= A_SHORT_PROCESS_RUNS.len() * 3,
        "only {} of the {} functions a short process runs are in the shim: update A_SHORT_PROCESS_RUNS",
        found.len(),
        A_SHORT_PROCESS_RUNS.len()
    );
    let outside: Vec<String> = found
        .iter()
        .filter(|(_, a, s)| a + s > FAULT_WINDOW)
        .map(|(n, a, s)| format!("{n} at {a:#x}+{s:#x}"))
        .collect();
    assert!(
        outside.is_empty(),
        "past the first {FAULT_WINDOW:#x} bytes (is shim/layout.ld's .text.fsprof.first still there?): {outside:?}"
    );
}

/// Where within a 64-byte cache line the hot wrappers start: shim/layout.ld
/// anchors each group of them at the offset it had when their per-call
/// cost was measured (bench/selfcost_bound.py, output_cost.py), so that
/// code of the set-up before them, which changes from session to session,
/// does not move them (fstat's wrapper moved 16 bytes down: +2.7 ns a call,
/// fifteenth session). A wrapper's own change that moves these is measured
/// per call before the offsets here are changed.
const HOT_WRAPPER_LINE_OFFSETS: &[(&str, u64)] = &[
    ("read", 0x10),
    ("write", 0x20),
    ("close", 0x00),
    ("fstat", 0x30),
    ("openat", 0x30),
    ("pread", 0x30),
    ("fprintf", 0x10),
];

#[test]
fn the_hot_wrappers_keep_their_place_in_a_cache_line() {
    let functions = functions(SHIM_SO);
    let moved: Vec<String> = HOT_WRAPPER_LINE_OFFSETS
        .iter()
        .filter_map(|&(name, want)| {
            let &(at, _) = functions
                .get(name)
                .unwrap_or_else(|| panic!("no {name} in the shim"));
            (at % 64 != want)
                .then(|| format!("{name} at {at:#x} (offset {:#x}, was {want:#x})", at % 64))
        })
        .collect();
    assert!(
        moved.is_empty(),
        "hot wrappers moved within their cache line: {moved:?}"
    );
}

/// No DT_FINI (build.rs, `-fini=fsprof_no_fini`): glibc calls a library's
/// _fini at exit, which does nothing on x86-64 and lies at the far end of
/// the text, a fault of its own in every exiting process.
#[test]
fn the_shim_has_no_fini_function() {
    let dynamic = segments(SHIM_SO)
        .into_iter()
        .find(|s| s.kind == PT_DYNAMIC)
        .expect("a dynamic segment");
    let tags: Vec<u64> = (dynamic.offset as usize..)
        .step_by(16)
        .map(|e| u64_at(SHIM_SO, e))
        .take_while(|&t| t != DT_NULL)
        .collect();
    assert!(!tags.is_empty());
    assert!(
        !tags.contains(&DT_FINI),
        "the shim has a DT_FINI entry: is -fini=fsprof_no_fini still in build.rs's LINK_FLAGS?"
    );
}

/// What every profiled process writes of the shim's own memory at its
/// start: its state, its pool's first chunk and its first thread's slot
/// record (shim/pool.c), the classes of its first descriptors.
const EVERY_PROCESS_WRITES: &[&str] = &[
    "g_state",
    "g_run",
    "g_path_short",
    "g_ctl",
    "g_proc",
    "g_chunk0",
    "g_first_rec",
    "real_read",
    "real_close",
];

/// All of it lies on the page of .bss that the loader writes in every
/// process (it zeroes the rest of the page that holds the file's last
/// bytes of data), so that none of it is a page fault of its own: a page
/// zero-filled in an exec'd image, copied in a forked child, ~2-3 us
/// (docs/benchmarks/history.md, fourteenth session, shim14). The first 64
/// descriptors' classes too.
#[test]
fn what_every_process_writes_lies_on_the_page_the_loader_writes() {
    let data = segments(SHIM_SO)
        .into_iter()
        .find(|s| s.kind == PT_LOAD && s.flags & PF_W != 0)
        .expect("a writable segment");
    let page = (data.addr + data.file_size) & !0xfff;
    let objects = symbols(SHIM_SO, STT_OBJECT);
    let mut places: Vec<(&str, u64, u64)> = EVERY_PROCESS_WRITES
        .iter()
        .map(|n| {
            let &(a, s) = objects
                .get(*n)
                .unwrap_or_else(|| panic!("no {n} in the shim: update EVERY_PROCESS_WRITES"));
            (*n, a, s)
        })
        .collect();
    let &(classes, _) = objects.get("g_fdclass").expect("no g_fdclass in the shim");
    places.push(("g_fdclass[..64]", classes, 64));
    let outside: Vec<String> = places
        .iter()
        .filter(|(_, a, s)| *a < page || a + s > page + 0x1000)
        .map(|(n, a, s)| format!("{n} at {a:#x}+{s:#x}"))
        .collect();
    assert!(
        outside.is_empty(),
        "off the page the loader writes ({page:#x}; .bss and .lbss in shim/*.c: what went into .bss?): {outside:?}"
    );
}
