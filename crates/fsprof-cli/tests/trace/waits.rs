//! A command that loads the shim is not held before its `execve` while
//! `fsprof trace` (as root) attaches its page-fault programs: it starts at
//! once and waits for them in the shim's set-up, before any code of the
//! program runs. The attach is slowed down here by a test knob
//! (`FSPROF_TEST_ATTACH_DELAY_MS`), so that a command that did not wait
//! would have mapped and read its file long before the programs were
//! there.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Output;

use fsprof_testkit::{canonical_tempdir, fsprof, need_root};
use fsprof_trace::event::Record;
use fsprof_trace::TraceReader;

/// Pages of the data file, each read once at byte 11 through a shared
/// mapping, as soon as the program starts.
const PAGES: u64 = 64;
const READ_C: &str = r#"#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
int main(int argc, char **argv) {
    int fd = open(argv[1], O_RDONLY);
    volatile unsigned char *p = mmap(0, 64 * 4096, PROT_READ, MAP_SHARED, fd, 0);
    if (fd < 0 || p == MAP_FAILED) return 3;
    unsigned s = 0;
    for (int i = 0; i < 64; i++) s += p[i * 4096 + 11];
    printf("%u\n", s);
    return 0;
}
"#;

/// `fsprof trace -o TRACE -- read DATA` with the attach delayed by
/// `delay_ms` and the environment `env`: fsprof's output, the trace's
/// notes, and the data file's pages its faults touched or mapped around.
fn traced(delay_ms: u32, env: &[(&str, &str)]) -> (Output, Vec<String>, BTreeSet<u64>) {
    need_root("eBPF");
    let (_d, base) = canonical_tempdir();
    let exe = fsprof_testkit::compile_source("read", READ_C, &base, &[]);
    let data = base.join("data.bin");
    let bytes: Vec<u8> = (0..PAGES * 4096).map(|i| (i % 251) as u8).collect();
    std::fs::write(&data, bytes).unwrap();
    let t = base.join("r.trace");
    let o = fsprof()
        .env("FSPROF_TEST_ATTACH_DELAY_MS", delay_ms.to_string())
        .envs(env.iter().copied())
        .args(["trace", "-q", "-o"])
        .arg(&t)
        .arg("--")
        .arg(&exe)
        .arg(&data)
        .current_dir(&base)
        .output()
        .unwrap();
    let (notes, pages) = if o.status.success() {
        pages_of(&t, &data)
    } else {
        Default::default()
    };
    (o, notes, pages)
}

fn pages_of(t: &Path, data: &Path) -> (Vec<String>, BTreeSet<u64>) {
    let mut r = TraceReader::open(t).unwrap_or_else(|e| panic!("{e}"));
    let notes = r.header.notes.clone();
    let mut maps = Vec::new();
    let mut faults = Vec::new();
    for rec in r.by_ref() {
        match rec.unwrap_or_else(|e| panic!("{e}")) {
            Record::Mapped(m) => faults.push(m),
            Record::Call(c) if c.op.is("mmap") && c.ret != -1 => maps.push(c.ret as u64),
            _ => {}
        }
    }
    let name = data.as_os_str().as_encoded_bytes();
    let mut pages = BTreeSet::new();
    for m in faults.iter().filter(|m| m.resolved.as_deref() == Some(name)) {
        pages.extend(m.offset.map(|o| o / 4096));
        if let Some((a, b)) = m.around {
            pages.extend(a..=b);
        }
    }
    assert!(!maps.is_empty(), "the program's mmap is not in the trace");
    (notes, pages)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The programs take 400 ms more to attach: the command, started at once,
/// waits for them, and every page it reads is in the trace.
#[test]
#[ignore = "needs root (eBPF)"]
fn the_command_waits_in_the_shim_until_the_fault_programs_are_attached() {
    let (o, notes, pages) = traced(400, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(pages, (0..PAGES).collect(), "{}", stderr(&o));
    assert!(
        !notes.iter().any(|n| n.contains("did not wait")),
        "{notes:?}"
    );
}

/// The wait is bounded: with the programs 1.5 s late and the shim waiting
/// 50 ms at most, the command goes on, succeeds, and the trace says that
/// its early faults are missing.
#[test]
#[ignore = "needs root (eBPF)"]
fn a_command_whose_wait_runs_out_goes_on_and_the_trace_says_so() {
    let (o, notes, _) = traced(1500, &[("FSPROF_TEST_START_WAIT_MS", "50")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let sum: u64 = (0..PAGES).map(|p| (p * 4096 + 11) % 251).sum();
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), sum.to_string());
    assert!(
        notes.iter().any(|n| n.contains("did not wait")),
        "{notes:?}"
    );
    assert!(stderr(&o).contains("did not wait"), "{}", stderr(&o));
}
