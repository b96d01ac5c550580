//! The command of `fsprof trace` (as root) is held before its `execve`
//! until the page-fault programs are attached, however late that is: the
//! attach starts before the command line's outputs are checked and runs
//! beside the rest of the set-up, and the command must still wait for
//! it. With the attach delayed 300 ms (a test knob), a program that writes
//! a file and reads every page of it through a mapping, a few ms of work,
//! still has each of those pages in the trace; one let go before the
//! attach would have read them all, unseen, well before it.

use std::collections::BTreeSet;

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

#[test]
#[ignore = "needs root (eBPF)"]
fn a_late_attach_still_sees_every_page_the_command_reads() {
    need_root("eBPF");
    let (_keep, dir) = fsprof_testkit::canonical_tempdir();
    let (data, out) = (dir.join("data"), dir.join("t.trace"));
    let exe = fsprof_testkit::compile_source("scan", SCAN_C, &dir, &[]);
    let o = fsprof()
        .args(["trace", "-f", "-o"])
        .arg(&out)
        .arg("--")
        .arg(&exe)
        .arg(&data)
        .env("FSPROF_TEST_ATTACH_DELAY_MS", "300")
        .current_dir(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
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
    assert!(faults > 0, "no fault of the command was traced: {stderr}");
    assert_eq!(seen, (0..256).collect(), "{faults} faults: {stderr}");
}
