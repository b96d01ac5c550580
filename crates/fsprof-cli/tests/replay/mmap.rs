//! Loads and stores through file mappings: traced as page faults (root,
//! eBPF), shown, compiled and replayed as touches of the replayer's own
//! mappings; hostile mapped accesses refused or kept under the root.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Output;

use fsprof_testkit::{canonical_tempdir, fsprof, need_program, need_root, HandTrace};
use fsprof_trace::event::{Access, Data};
use fsprof_trace::replayfile::Compiled;
use serde_json::Value;

const PAGE: u64 = 4096;

/// The issue's program: a 1 MiB file of a known pattern (made by the
/// program, or `argv[2]` = "old": already there, not rewritten); pages
/// 0-255 read through a private mapping at byte 11 of each; bytes 100-299
/// of every third page stored through a shared mapping; msync; munmap.
/// The pattern is written a page at a time: the page cache then holds
/// pages, not large folios, which the kernel may map writable whole at
/// the first store into one of their pages (no fault for the others).
const MM_C: &str = r#"#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#define SZ (1 << 20)
int main(int argc, char **argv) {
    int old = argc > 2;
    int fd = open(argv[1], old ? O_RDWR : (O_CREAT | O_RDWR | O_TRUNC), 0644);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) return 1;
    if (!old) {
        static unsigned char buf[SZ];
        for (int i = 0; i < SZ; i++) buf[i] = (unsigned char)(i * 7 + i / 4096);
        for (int p = 0; p < SZ; p += 4096)
            if (pwrite(fd, buf + p, 4096, p) != 4096) return 2;
    }
    volatile unsigned char *r = mmap(0, SZ, PROT_READ, MAP_PRIVATE, fd, 0);
    if (r == MAP_FAILED) return 3;
    unsigned s = 0;
    for (int i = 0; i < 256; i++) s += r[i * 4096 + 11];
    if (munmap((void *)r, SZ) != 0) return 4;
    unsigned char *w = mmap(0, SZ, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (w == MAP_FAILED) return 5;
    for (int i = 0; i < 256; i += 3) memset(w + i * 4096 + 100, 'A' + i % 26, 200);
    if (msync(w, SZ, MS_SYNC) != 0 || munmap(w, SZ) != 0) return 6;
    printf("%u\n", s);
    return close(fd);
}
"#;

fn ok(o: &Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "status {:?}: {err}", o.status);
    err
}

fn fsprof_in(dir: &Path, args: &[&std::ffi::OsStr]) -> Output {
    fsprof().args(args).current_dir(dir).output().unwrap()
}

fn os<S: AsRef<std::ffi::OsStr> + ?Sized>(s: &S) -> &std::ffi::OsStr {
    s.as_ref()
}

/// `fsprof trace --data full -o TRACE -- EXE ARGS` in `dir`: its
/// messages (notes and warnings, for a failing test to show).
fn trace(dir: &Path, trace: &Path, exe: &Path, args: &[&str]) -> String {
    let mut a = vec![os("trace"), os("--data"), os("full"), os("-o"), os(trace)];
    a.extend([os("--"), os(exe)]);
    a.extend(args.iter().map(os));
    ok(&fsprof_in(dir, &a))
}

fn compile(dir: &Path, trace: &Path, out: &Path) -> Compiled {
    ok(&fsprof_in(
        dir,
        &[os("compile"), os(trace), os("-o"), os(out)],
    ));
    Compiled::read(out).unwrap()
}

fn replay(dir: &Path, file: &Path, root: &Path, opts: &[&str]) -> Output {
    let mut a = vec![os("replay"), os(file), os("--root"), os(root)];
    a.extend(opts.iter().map(os));
    fsprof_in(dir, &a)
}

/// The trace's mapped records, as `trace show --format json` prints them.
fn mapped_records(dir: &Path, trace: &Path) -> Vec<Value> {
    let o = fsprof_in(
        dir,
        &[
            os("trace"),
            os("show"),
            os("--format"),
            os("jsonl"),
            os(trace),
        ],
    );
    ok(&o);
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == "mapped")
        .collect()
}

/// File pages of faults of `op` on a file named `name`, with the byte of
/// the page each touched; pages mapped around them.
fn faults(recs: &[Value], op: &str, name: &str) -> (Vec<(u64, u64)>, BTreeSet<u64>) {
    let mut touched = Vec::new();
    let mut around = BTreeSet::new();
    for r in recs.iter().filter(|r| r["op"] == op) {
        let file = r["resolved"].as_str().unwrap_or("");
        assert!(file.ends_with(name), "a fault outside {name}: {r}");
        let off = r["offset"].as_u64().unwrap();
        touched.push((off / PAGE, r["addr"].as_u64().unwrap() % PAGE));
        if let (Some(a), Some(b)) = (
            r["around_first_page"].as_u64(),
            r["around_last_page"].as_u64(),
        ) {
            around.extend(a..=b);
        }
    }
    (touched, around)
}

#[test]
#[ignore = "needs root (eBPF)"]
fn mapped_reads_and_stores_are_traced_shown_and_replayed_byte_identical() {
    need_root("eBPF");
    let (_d, base) = canonical_tempdir();
    let exe = fsprof_testkit::compile_source("mm", MM_C, &base, &[]);
    let work = base.join("work");
    std::fs::create_dir(&work).unwrap();
    let t = base.join("m.trace");
    trace(&work, &t, &exe, &["data.bin"]);
    let recs = mapped_records(&base, &t);
    // Reads: one fault per page not mapped yet, each at byte 11 of a page
    // of 0-255; the pages the kernel mapped around them make up the rest.
    let (reads, around) = faults(&recs, "mapped_read", "/work/data.bin");
    let pages: BTreeSet<u64> = reads.iter().map(|r| r.0).collect();
    assert_eq!(pages.len(), reads.len(), "a page faulted twice: {reads:?}");
    assert!(reads.iter().all(|&(p, b)| p < 256 && b == 11), "{reads:?}");
    let seen: BTreeSet<u64> = pages.union(&around).copied().collect();
    assert_eq!(
        seen,
        (0..256).collect(),
        "reads {reads:?} around {around:?}"
    );
    // Stores: exactly every third page, once each, from byte 100 on.
    let (stores, _) = faults(&recs, "mapped_write", "/work/data.bin");
    let mut spages: Vec<u64> = stores.iter().map(|s| s.0).collect();
    spages.sort();
    assert_eq!(
        spages,
        (0..256).step_by(3).collect::<Vec<_>>(),
        "{stores:?}"
    );
    assert!(
        stores.iter().all(|&(_, b)| (100..300).contains(&b)),
        "{stores:?}"
    );
    let show = fsprof_in(&base, &[os("trace"), os("show"), os(&t)]);
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(
        text.contains("mapped_write(0x") && text.contains("/work/data.bin+0x3000>"),
        "{text}"
    );
    // Each mmap says how large the file was as it was mapped.
    let maps: Vec<&str> = text.lines().filter(|l| l.contains(" mmap(")).collect();
    assert_eq!(maps.len(), 2, "{text}");
    assert!(
        maps.iter().all(|l| l.ends_with("[file size 1048576]")),
        "{maps:?}"
    );
    let c = compile(&base, &t, &base.join("m.replay"));
    assert!(
        !c.header
            .skipped
            .keys()
            .any(|k| k.contains("mmap") || k.contains("mapping")),
        "{:?}",
        c.header.skipped
    );
    let n = |op: &str| c.commands.iter().filter(|k| k.op.is(op)).count();
    assert_eq!((n("mapped_read"), n("mapped_write")), (reads.len(), 86));
    let root = base.join("root");
    std::fs::create_dir(&root).unwrap();
    let o = replay(
        &base,
        &base.join("m.replay"),
        &root,
        &["--prepare", "--afap", "--verify", "strict"],
    );
    let msgs = ok(&o);
    assert!(msgs.contains("mismatches: 0"), "{msgs}");
    let replayed = root.join(work.strip_prefix("/").unwrap()).join("data.bin");
    let (a, b) = (
        std::fs::read(work.join("data.bin")).unwrap(),
        std::fs::read(&replayed).unwrap(),
    );
    assert_eq!(a.len(), b.len());
    let first = a.iter().zip(&b).position(|(x, y)| x != y);
    assert_eq!(first, None, "the replayed file differs from byte {first:?}");
}

/// `sectors read` of `/sys/block/DEV/stat`.
fn sectors_read(dev: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/sys/block/{dev}/stat")).unwrap();
    text.split_whitespace().nth(2).unwrap().parse().unwrap()
}

fn drop_caches(fs: &crate::loopfs::LoopFs) {
    fs.settle();
    std::fs::write("/proc/sys/vm/drop_caches", "3").unwrap();
}

#[test]
#[ignore = "needs root (eBPF, a loop mount)"]
fn a_cold_replay_reads_the_device_as_much_as_the_original() {
    need_root("eBPF");
    let fs = crate::loopfs::LoopFs::ext4(64);
    let (_d, base) = canonical_tempdir();
    let exe = fsprof_testkit::compile_source("mm", MM_C, &base, &[]);
    let work = fs.mnt().join("work");
    std::fs::create_dir(&work).unwrap();
    std::fs::write(work.join("data.bin"), vec![7u8; 1 << 20]).unwrap();
    drop_caches(&fs);
    let before = sectors_read(&fs.name());
    let t = base.join("m.trace");
    let msgs = trace(&work, &t, &exe, &["data.bin", "old"]);
    let original = sectors_read(&fs.name()) - before;
    let recs = mapped_records(&base, &t);
    let faults: Vec<&Value> = recs
        .iter()
        .filter(|r| r["op"] != "mapped_contents")
        .collect();
    // Seen once in about 60 runs: a trace with the contents records but
    // no fault at all; the capture's messages say what it knew.
    assert!(
        faults.iter().any(|r| r["major"] == true),
        "no read waited for the device; trace messages: {msgs}; faults: {faults:?}"
    );
    let r = base.join("m.replay");
    compile(&base, &t, &r);
    let root = fs.mnt().join("root");
    std::fs::create_dir(&root).unwrap();
    ok(&replay(
        &base,
        &r,
        &root,
        &["--prepare", "--afap", "--max-mismatches", "1000"],
    ));
    // The replayed file as the program found it: rewritten, then cold.
    let file = root.join(work.strip_prefix("/").unwrap()).join("data.bin");
    std::fs::write(&file, vec![7u8; 1 << 20]).unwrap();
    drop_caches(&fs);
    let before = sectors_read(&fs.name());
    ok(&replay(
        &base,
        &r,
        &root,
        &["--afap", "--max-mismatches", "1000"],
    ));
    let replayed = sectors_read(&fs.name()) - before;
    let ra_kb: u64 =
        std::fs::read_to_string(format!("/sys/block/{}/queue/read_ahead_kb", fs.name()))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
    let window = ra_kb * 2;
    assert!(
        original >= 2048 && replayed.abs_diff(original) <= window,
        "sectors read: original {original}, replay {replayed}, read-ahead {ra_kb} KiB"
    );
}

/// A trace whose mapped accesses reach past the file's end, past their
/// mapping, and (by `..`) out of the root.
fn hostile_mapped_trace(path: &Path, outside: &Path) {
    let mut w = HandTrace::create(path, "full", "/");
    let o = outside.to_str().unwrap();
    let escape = format!("/../../..{o}/mapped");
    let mut open = w.next(1, "openat", Some(&escape), 3);
    (open.flags, open.mode) = (Some((libc::O_CREAT | libc::O_RDWR) as i64), Some(0o644));
    open.fd = Some(libc::AT_FDCWD);
    w.push(open);
    let mut pw = w.next(1, "pwrite", None, 8192);
    (pw.fd, pw.offset, pw.len, pw.data) =
        (Some(3), Some(0), Some(8192), Data::Full(vec![b'x'; 8192]));
    w.push(pw);
    let mut mm = w.next(1, "mmap", None, 0x10000);
    mm.fd = Some(3);
    (mm.len, mm.offset) = (Some(4 * PAGE), Some(0));
    (mm.flags, mm.mode) = (
        Some(libc::MAP_SHARED as i64),
        Some((libc::PROT_READ | libc::PROT_WRITE) as u32),
    );
    w.push(mm);
    // Page 0 stored (lands inside the root), page 3 loaded (past the end
    // of an 8 KiB file), page 9 (past the mapping: left out).
    w.push_mapped(
        1,
        Access::Contents,
        0x10000,
        Data::Full(vec![b'y'; PAGE as usize]),
    );
    w.push_mapped(1, Access::Read, 0x10000 + 3 * PAGE, Data::None);
    w.push_mapped(1, Access::Read, 0x10000 + 9 * PAGE, Data::None);
    w.finish();
}

#[test]
fn hostile_mapped_accesses_are_refused_or_kept_under_the_root() {
    let (_d, base) = canonical_tempdir();
    let (t, r, outside) = (
        base.join("h.trace"),
        base.join("h.replay"),
        base.join("outside"),
    );
    std::fs::create_dir(&outside).unwrap();
    hostile_mapped_trace(&t, &outside);
    let c = compile(&base, &t, &r);
    assert!(
        c.header
            .skipped
            .keys()
            .any(|k| k.contains("mapping the trace did not see made")),
        "{:?}",
        c.header.skipped
    );
    // By hand, past the compiler: a load past the mapping's end.
    let mut hand = c.clone();
    let load = hand.commands.iter().position(|k| k.op.is("mapped_read"));
    let mut far = hand.commands[load.unwrap()].clone();
    far.offset = 1 << 40;
    far.t_ns += 1;
    hand.commands.push(far);
    let hr = base.join("hand.replay");
    hand.write(&hr, false).unwrap();
    let differs = |file: &Path, name: &str| -> String {
        let root = base.join(name);
        std::fs::create_dir(&root).unwrap();
        let o = replay(&base, file, &root, &["--prepare", "--afap"]);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(1), "{err}");
        let landed = root.join(outside.strip_prefix("/").unwrap()).join("mapped");
        // The replay's messages with any failure: one CI run found no
        // file here after an exit of 1, and said nothing more.
        let bytes = std::fs::read(&landed)
            .unwrap_or_else(|e| panic!("{}: {e}; the replay said:\n{err}", landed.display()));
        assert_eq!(bytes.len(), 8192, "{err}");
        assert!(
            bytes[..PAGE as usize].iter().all(|&b| b == b'y'),
            "the store landed"
        );
        err
    };
    // The load past the file's end is refused (EFAULT), the store kept
    // under the root; by hand, the load past the mapping is ENOMEM.
    let compiled = differs(&r, "root1");
    assert!(
        compiled.contains("mapped_read(") && compiled.contains("replayed -1 EFAULT"),
        "{compiled}"
    );
    let by_hand = differs(&hr, "root2");
    assert!(
        by_hand.contains("replayed -1 EFAULT") && by_hand.contains("replayed -1 ENOMEM"),
        "{by_hand}"
    );
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        0,
        "nothing outside the roots"
    );
}

/// Replays `r` with `--prepare --afap --verify strict` into `base/root`,
/// which it returns, with no difference from the trace.
fn replayed_strictly(base: &Path, r: &Path) -> std::path::PathBuf {
    let root = base.join("root");
    std::fs::create_dir(&root).unwrap();
    let opts = ["--prepare", "--afap", "--verify", "strict"];
    let msgs = ok(&replay(base, r, &root, &opts));
    assert!(msgs.contains("mismatches: 0"), "{msgs}");
    root
}

/// A trace `write` makes in `base`, compiled: the replay file and its path.
fn hand_compiled(base: &Path, write: fn(&Path)) -> (Compiled, std::path::PathBuf) {
    let (t, r) = (base.join("hand.trace"), base.join("hand.replay"));
    write(&t);
    (compile(base, &t, &r), r)
}

/// `mmap(NULL, 8192, PROT_READ|PROT_WRITE, MAP_SHARED, 3, 0)` = 0x10000.
fn two_page_shared_mapping(w: &mut HandTrace) {
    let mut mm = w.next(1, "mmap", None, 0x10000);
    (mm.fd, mm.len, mm.offset) = (Some(3), Some(2 * PAGE), Some(0));
    mm.flags = Some(libc::MAP_SHARED as i64);
    mm.mode = Some((libc::PROT_READ | libc::PROT_WRITE) as u32);
    w.push(mm);
}

/// `msync(0x10000, 8192, MS_SYNC)`, the trace's last call.
fn msync_two_pages_and_finish(mut w: HandTrace) {
    let mut sync = w.next(1, "msync", None, 0);
    (sync.arg, sync.len, sync.flags) = (Some(0x10000), Some(2 * PAGE), Some(libc::MS_SYNC as i64));
    w.push(sync);
    w.finish();
}

/// A shared mapping of an 8 KiB file: a store fault on page 0 and the
/// contents of pages 0 and 1 (page 1 made writable without a fault of its
/// own, as a large folio is), then msync.
fn contents_trace(path: &Path) {
    let mut w = HandTrace::create(path, "full", "/w");
    let mut open = w.next(1, "openat", Some("/w/f"), 3);
    (open.flags, open.mode) = (Some((libc::O_CREAT | libc::O_RDWR) as i64), Some(0o644));
    open.fd = Some(libc::AT_FDCWD);
    w.push(open);
    let mut pw = w.next(1, "pwrite", None, 8192);
    (pw.fd, pw.offset, pw.len) = (Some(3), Some(0), Some(8192));
    pw.data = Data::Full(vec![b'x'; 8192]);
    w.push(pw);
    two_page_shared_mapping(&mut w);
    w.push_mapped(1, Access::Write, 0x10000 + 5, Data::None);
    let mut bytes = vec![b'y'; PAGE as usize];
    bytes.extend(vec![b'z'; PAGE as usize]);
    w.push_mapped(1, Access::Contents, 0x10000, Data::Full(bytes));
    msync_two_pages_and_finish(w);
}

/// The bytes of a page whose store fault the trace saw go into that
/// store; those of a page it did not see one for are a store of their
/// own, before the msync: the replayed file holds both.
#[test]
fn contents_without_a_store_fault_are_stored_before_the_msync() {
    let (_d, base) = canonical_tempdir();
    let (c, r) = hand_compiled(&base, contents_trace);
    let stores: Vec<(i64, u64, u64)> = c
        .commands
        .iter()
        .filter(|k| k.op.is("mapped_write"))
        .map(|k| (k.offset, k.len, k.t_ns))
        .collect();
    assert_eq!(stores.len(), 2, "{stores:?}");
    assert_eq!(
        (stores[0].0, stores[0].1),
        (0, PAGE),
        "the faulted store, page 0"
    );
    assert_eq!(
        (stores[1].0, stores[1].1),
        (PAGE as i64, PAGE),
        "page 1, of its own"
    );
    assert!(
        stores[0].2 < stores[1].2,
        "the fault's time first: {stores:?}"
    );
    let root = replayed_strictly(&base, &r);
    let got = std::fs::read(root.join("w/f")).unwrap();
    assert_eq!(&got[..PAGE as usize], &vec![b'y'; PAGE as usize][..]);
    assert_eq!(&got[PAGE as usize..], &vec![b'z'; PAGE as usize][..]);
}

/// A file that existed before the trace, opened and mapped (the mmap's
/// record holds its size, as the shim's fstat gave it) and read at page 0
/// only: the prepared file is as large as the traced one, not one page.
fn mapped_size_trace(path: &Path, size: u64) {
    let mut w = HandTrace::create(path, "digest", "/w");
    let mut open = w.next(1, "openat", Some("/w/f"), 3);
    (open.flags, open.fd) = (Some(libc::O_RDONLY as i64), Some(libc::AT_FDCWD));
    w.push(open);
    let mut mm = w.next(1, "mmap", None, 0x10000);
    (mm.fd, mm.len, mm.offset) = (Some(3), Some(4 * PAGE), Some(0));
    (mm.flags, mm.mode) = (Some(libc::MAP_SHARED as i64), Some(libc::PROT_READ as u32));
    (mm.size, mm.st_mode) = (Some(size), Some(libc::S_IFREG | 0o640));
    w.push(mm);
    w.push_mapped(1, Access::Read, 0x10000 + 7, Data::None);
    w.finish();
}

#[test]
fn the_mapped_files_size_at_mmap_is_the_prepared_files() {
    let (_d, base) = canonical_tempdir();
    let (t, r) = (base.join("z.trace"), base.join("z.replay"));
    let size = 3 * PAGE + 100;
    mapped_size_trace(&t, size);
    let show = fsprof_in(&base, &[os("trace"), os("show"), os(&t)]);
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(text.contains(&format!("[file size {size}]")), "{text}");
    compile(&base, &t, &r);
    let root = replayed_strictly(&base, &r);
    let meta = std::fs::metadata(root.join("w/f")).unwrap();
    assert_eq!(meta.len(), size, "the prepared file's size");
}

/// A `--data digest` trace: a store fault on page 1 of a shared mapping,
/// then msync, and no bytes (the shim takes mapped contents with `--data
/// full` only).
fn digest_store_trace(path: &Path) {
    let mut w = HandTrace::create(path, "digest", "/w");
    let mut open = w.next(1, "openat", Some("/w/f"), 3);
    (open.flags, open.fd) = (Some(libc::O_RDWR as i64), Some(libc::AT_FDCWD));
    w.push(open);
    two_page_shared_mapping(&mut w);
    w.push_mapped(1, Access::Write, 0x10000 + PAGE + 9, Data::None);
    msync_two_pages_and_finish(w);
}

/// Without the stored bytes the replay stores each recorded page's bytes
/// as they are: the page is written back, the file's contents stay.
#[test]
fn a_store_without_its_bytes_keeps_the_replayed_files_contents() {
    let (_d, base) = canonical_tempdir();
    let (c, r) = hand_compiled(&base, digest_store_trace);
    let store = c.commands.iter().find(|k| k.op.is("mapped_write"));
    assert_eq!(store.map(|k| (k.offset, k.buf)), Some((PAGE as i64, None)));
    let root = base.join("root");
    std::fs::create_dir_all(root.join("w")).unwrap();
    let before: Vec<u8> = (0..2 * PAGE).map(|i| (i % 251) as u8 + 1).collect();
    std::fs::write(root.join("w/f"), &before).unwrap();
    let msgs = ok(&replay(&base, &r, &root, &["--afap", "--verify", "strict"]));
    assert!(msgs.contains("mismatches: 0"), "{msgs}");
    assert_eq!(std::fs::read(root.join("w/f")).unwrap(), before);
}

/// SQLite reading its database through mmap (`PRAGMA mmap_size`): the
/// replay leaves a database identical to the original, intact.
#[test]
#[ignore = "needs root (eBPF) and sqlite3"]
fn sqlite_with_mmap_replays_to_an_identical_database() {
    need_root("eBPF");
    let sqlite = need_program("sqlite3", "sqlite3");
    let (_d, base) = canonical_tempdir();
    let work = base.join("work");
    std::fs::create_dir(&work).unwrap();
    let sql = "PRAGMA mmap_size=268435456;\
        CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB);\
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<20000)\
        INSERT INTO t SELECT i, randomblob(200) FROM n;\
        CREATE INDEX tv ON t(v);\
        SELECT count(*), sum(length(v)) FROM t WHERE k % 7 = 0;\
        UPDATE t SET v = zeroblob(50) WHERE k % 5 = 0;\
        SELECT count(*) FROM t WHERE v > x'80';";
    let t = base.join("s.trace");
    trace(&work, &t, &sqlite, &["db", sql]);
    let recs = mapped_records(&base, &t);
    assert!(
        recs.iter().any(|r| r["op"] == "mapped_read"
            && r["resolved"]
                .as_str()
                .is_some_and(|p| p.ends_with("/work/db"))),
        "no read of the database through its mapping"
    );
    let r = base.join("s.replay");
    compile(&base, &t, &r);
    let root = base.join("root");
    std::fs::create_dir(&root).unwrap();
    let msgs = ok(&replay(&base, &r, &root, &["--prepare", "--afap"]));
    assert!(msgs.contains("mismatches: 0"), "{msgs}");
    let replayed = root.join(work.strip_prefix("/").unwrap()).join("db");
    let digest = |p: &Path| xxhash_rust::xxh64::xxh64(&std::fs::read(p).unwrap(), 0);
    assert_eq!(digest(&work.join("db")), digest(&replayed));
    let check = std::process::Command::new(&sqlite)
        .arg(&replayed)
        .arg("PRAGMA integrity_check;")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&check.stdout).trim(), "ok");
}
