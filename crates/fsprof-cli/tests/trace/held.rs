//! The page-fault programs of `fsprof trace` (as root) are attached when a
//! traced process first maps a file (crates/fsprof-trace/src/faultword.rs):
//! the process waits in its `mmap` for the attach, however late it is up
//! to the shim's bound, and loses no first touch; past the bound it goes
//! on, and the capture says its faults until then are missing; a run
//! whose processes map no file keeps them behind their gate (no fault
//! kept) and detaches them 100 ms after their load. The attach is
//! delayed by a test knob (`FSPROF_TEST_ATTACH_DELAY_MS`): the program,
//! a few ms of work, would otherwise read every page before it.

use std::collections::BTreeSet;
use std::path::Path;

use fsprof_testkit::{fsprof, need_root};
use fsprof_trace::event::{Access, Record};
use fsprof_trace::TraceReader;

/// Writes the 1 MiB file `argv[1]` a page at a time (the page cache then
/// holds pages, not large folios, so the kernel maps at most its
/// fault-around window at once), then reads byte 0 of every page through
/// a private mapping.
const SCAN_C: &str = r#"#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int fd = open(argv[1], O_CREAT | O_RDWR | O_TRUNC, 0644);
    if (fd < 0) return 1;
    static unsigned char page[4096];
    for (int i = 0; i < 256; i++) {
        memset(page, i, sizeof page);
        if (pwrite(fd, page, sizeof page, (off_t)i * 4096) != 4096) return 2;
    }
    volatile unsigned char *p = mmap(0, 1 << 20, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) return 3;
    unsigned s = 0;
    for (int i = 0; i < 256; i++) s += p[i * 4096];
    printf("%u\n", s);
    return 0;
}
"#;

/// `fsprof trace -f -o DIR/t.trace -- SCAN DIR/data` in `dir` (the scan
/// compiled there), with the test knob `knob` set.
fn traced_scan(dir: &Path, knob: (&str, &str)) -> std::process::Command {
    let exe = fsprof_testkit::compile_source("scan", SCAN_C, dir, &[]);
    let mut c = fsprof();
    c.args(["trace", "-f", "-o"])
        .arg(dir.join("t.trace"))
        .arg("--")
        .arg(&exe)
        .arg(dir.join("data"))
        .env(knob.0, knob.1)
        .current_dir(dir);
    c
}

/// Asserts that the traced scan succeeded with its own result; its
/// fsprof's standard error.
fn ran_as_itself(o: &std::process::Output) -> String {
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{stderr}");
    // The sum of i for i in 0..256: the program's result is its own.
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "32640",
        "{stderr}"
    );
    stderr
}

/// The scan traced with the attach delayed `delay_ms`: fsprof's output,
/// and the pages of the data file the trace has reads of (fault-around
/// ranges included) with the number of faults.
fn scan_with_attach_delay(delay_ms: u32) -> (std::process::Output, BTreeSet<u64>, usize) {
    scan_with(("FSPROF_TEST_ATTACH_DELAY_MS", &delay_ms.to_string()))
}

/// [`scan_with_attach_delay`] with the test knob `knob` set.
fn scan_with(knob: (&str, &str)) -> (std::process::Output, BTreeSet<u64>, usize) {
    let (_keep, dir) = fsprof_testkit::canonical_tempdir();
    let (data, out) = (dir.join("data"), dir.join("t.trace"));
    let o = traced_scan(&dir, knob).output().unwrap();
    ran_as_itself(&o);
    let mut seen = BTreeSet::new();
    let mut faults = 0;
    for rec in TraceReader::open(&out).unwrap_or_else(|e| panic!("{e}")) {
        match rec.unwrap_or_else(|e| panic!("{e}")) {
            Record::Mapped(m)
                if m.access == Access::Read
                    && m.resolved.as_deref() == Some(data.as_os_str().as_encoded_bytes()) =>
            {
                faults += 1;
                seen.insert(m.offset.unwrap() / 4096);
                if let Some((a, b)) = m.around {
                    seen.extend(a..=b);
                }
            }
            _ => {}
        }
    }
    (o, seen, faults)
}

/// Asserts that the scan traced with `knob` has a read of every page of
/// its data file; fsprof's standard error.
fn every_page_read_with(knob: (&str, &str)) -> String {
    let (o, seen, faults) = scan_with(knob);
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(faults > 0, "no fault of the command was traced: {stderr}");
    assert_eq!(seen, (0..256).collect(), "{faults} faults: {stderr}");
    stderr
}

#[test]
#[ignore = "needs root (eBPF)"]
fn a_first_mapping_waits_for_a_late_attach_and_loses_no_first_touch() {
    need_root("eBPF");
    // Well within the shim's bound (250 ms).
    let stderr = every_page_read_with(("FSPROF_TEST_ATTACH_DELAY_MS", "100"));
    assert!(!stderr.contains("went on after waiting"), "{stderr}");
}

#[test]
#[ignore = "needs root (eBPF)"]
fn faults_made_before_the_rings_reader_starts_are_in_the_trace() {
    need_root("eBPF");
    // The reader starts after the waiting process is woken; here 300 ms
    // after, when the scan (a few ms) is long over: the capture's last
    // drain waits for it, and the ring kept every fault until then.
    every_page_read_with(("FSPROF_TEST_READER_DELAY_MS", "300"));
}

#[test]
#[ignore = "needs root (eBPF)"]
fn a_first_mapping_after_the_waiting_events_were_closed_loses_no_first_touch() {
    need_root("eBPF");
    // The end programs' events, opened with their load, closed before any
    // request (as after 100 ms without one): the attach opens them again.
    every_page_read_with(("FSPROF_TEST_EVENTS_OPEN_MS", "0"));
}

#[test]
#[ignore = "needs root (eBPF)"]
fn an_attach_later_than_the_bound_lets_the_program_go_on_and_says_so() {
    need_root("eBPF");
    let t = std::time::Instant::now();
    let (o, seen, faults) = scan_with_attach_delay(1500);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("1 process(es) went on after waiting 250 ms"),
        "{stderr}"
    );
    // It read every page while the programs were still off.
    assert_eq!((faults, seen.len()), (0, 0), "{stderr}");
    // fsprof waited for its thread, not the program for fsprof.
    assert!(t.elapsed().as_millis() >= 1500, "{:?}", t.elapsed());
}

/// The links of fsprof's descriptors, as `/proc/PID/fdinfo` names them:
/// what the command, fsprof's child, prints of its parent's. A descriptor
/// listed may be closed before it is read (the fault programs' waiting
/// events, 100 ms after their load): skipped.
const LINKS: &str = r#"for f in /proc/$PPID/fdinfo/*; do sed -n 's/^tp_name:[[:space:]]*/link /p' "$f" 2>/dev/null || :; done"#;

/// `fsprof trace -- sh -c SCRIPT` in `dir`: its standard output.
fn traced_sh(dir: &Path, script: &str) -> String {
    let o = fsprof()
        .args(["trace", "-q", "-f", "-o"])
        .arg(dir.join("t.trace"))
        .args(["--", "sh", "-c", script])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

#[test]
#[ignore = "needs root (eBPF)"]
fn processes_that_map_no_file_leave_the_fault_programs_unattached() {
    need_root("eBPF");
    let (_keep, dir) = fsprof_testkit::canonical_tempdir();
    let exe = fsprof_testkit::compile_source("scan", SCAN_C, &dir, &[]);
    // Past the 100 ms the fault programs wait behind their gate for a
    // first mapping: detached.
    let quiet = traced_sh(
        &dir,
        &format!(
            "for i in 1 2 3 4 5 6 7 8; do cat /etc/hostname >/dev/null; done; sleep 0.4; {LINKS}"
        ),
    );
    // The tree is followed from the start; no fault program is on.
    assert!(quiet.contains("link sched_process_fork"), "{quiet}");
    assert!(!quiet.contains("link page_fault_user"), "{quiet}");
    let mapping = traced_sh(&dir, &format!("{} data >/dev/null; {LINKS}", exe.display()));
    assert!(mapping.contains("link page_fault_user"), "{mapping}");
    assert!(mapping.contains("link sched_process_fork"), "{mapping}");
}

#[test]
#[ignore = "needs root (eBPF)"]
fn a_fault_session_that_cannot_be_made_leaves_a_trace_of_the_calls() {
    need_root("eBPF");
    let (_keep, dir) = fsprof_testkit::canonical_tempdir();
    let mut child = traced_scan(&dir, ("FSPROF_TEST_FAULT_SESSION_FAILS", "1"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A capture that waited for the attaching thread, which waited for a
    // control file never sent, hung here.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("fsprof trace did not end within 20 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let stderr = ran_as_itself(&child.wait_with_output().unwrap());
    assert!(
        stderr.contains("loads and stores through file mappings are not in this trace"),
        "{stderr}"
    );
}
