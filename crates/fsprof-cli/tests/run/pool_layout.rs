//! Where a process's counters lie in its arena block (shim/pool.c): the
//! small records (slot record, counters, the first descriptor states) from
//! the block's start, the tables from its end, so that a short process
//! writes a few pages; and a thread that moves on to a descriptor above the
//! first few keeps what it knew of the others.

use std::path::Path;

use fsprof_shim::abi;
use fsprof_testkit::{compile_source, fsprof, stderr};

/// A short program's calls, then its own block's offsets, read from the
/// control file it maps (the run directory from FSPROF_SHM) with raw system
/// calls, which the shim does not count.
const PROGRAM: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "abi.h"

/* Sequential reads of one file on fd 3, then on fd 200 (above the first
 * FSPROF_FD_FEW), then on fd 3 again: that last read's seek distance (0)
 * needs fd 3's end as the shim knew it before fd 200 moved its states. */
static void calls(const char *path)
{
    static char b[16];
    int fd = open(path, O_RDONLY);
    read(fd, b, 10);
    read(fd, b, 10);
    int hi = dup2(open(path, O_RDONLY), 200);
    read(hi, b, 10);
    read(hi, b, 10);
    read(fd, b, 10);
}

/* A file of /proc/self into buf (NUL-terminated), with raw system calls,
 * which the shim does not count. */
static void read_self(const char *path, char *buf, long cap)
{
    long f = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY), len = 0, r;
    while (f >= 0 && (r = syscall(SYS_read, f, buf + len, cap - 1 - len)) > 0)
        len += r;
    buf[len] = 0;
    if (f >= 0)
        syscall(SYS_close, f);
}

/* Where the shim's mapping of the control file starts (0: not found). */
static uint64_t g_shim_ctl;

/* Of the n pages from `at`, those mapped in this process
 * (/proc/self/pagemap's present bit); -1 if unknown. */
static int pages_mapped(uint64_t at, int n)
{
    uint64_t e[32];
    long pm = syscall(SYS_openat, AT_FDCWD, "/proc/self/pagemap", O_RDONLY);
    if (n > 32 || syscall(SYS_pread64, pm, e, n * 8, (long)(at / 4096 * 8)) != n * 8)
        return -1;
    syscall(SYS_close, pm);
    int k = 0;
    for (int i = 0; i < n; i++)
        k += (int)(e[i] >> 63);
    return k;
}

/* Pages of the first 64 KiB (the control header, its offer ring, lost
 * table and thresholds) of the shim's mapping of the control file that
 * are mapped in this process. */
static int control_pages_mapped(void)
{
    static char maps[1 << 16];
    read_self("/proc/self/maps", maps, sizeof maps);
    char *l = strstr(maps, "/" FSPROF_CTL_NAME "\n");
    if (l == NULL)
        return -1;
    while (l > maps && l[-1] != '\n')
        l--;
    g_shim_ctl = strtoull(l, NULL, 16);
    return pages_mapped(g_shim_ctl, 16);
}

/* KiB of the shim's own writable memory (its data and .bss, the mapping
 * of the file and the anonymous one after it) that are this process's
 * alone (smaps' Private_Dirty): in a forked child whose parent still
 * lives, the pages it wrote. */
static long shim_private_kb(void)
{
    static char s[1 << 20];
    read_self("/proc/self/smaps", s, sizeof s);
    long kb = 0;
    int ours = 0, after_shim = 0;
    for (char *l = strtok(s, "\n"); l; l = strtok(NULL, "\n")) {
        if ((l[0] >= '0' && l[0] <= '9') || (l[0] >= 'a' && l[0] <= 'f')) {
            /* A mapping: start-end perms offset dev inode [path] */
            char perms[8] = "", path[512] = "";
            sscanf(l, "%*s %7s %*s %*s %*s %511s", perms, path);
            int shim = strstr(path, "libfsprof_shim") != NULL;
            ours = (shim && perms[1] == 'w') || (after_shim && path[0] == 0);
            after_shim = shim;
        } else if (ours && strncmp(l, "Private_Dirty:", 14) == 0) {
            kb += strtol(l + 14, NULL, 10);
        }
    }
    return kb;
}

int main(int argc, char **argv)
{
    calls(argv[1]);
    int ctl = control_pages_mapped();
    printf("ctl_pages %d\n", ctl < 0 ? 99 : ctl); /* 99: not found */
    /* A forked child maps none of its parent's pages of the file. */
    fflush(stdout);
    if (fork() == 0) {
        close(open(argv[1], O_RDONLY));
        ctl = control_pages_mapped();
        printf("child_ctl_pages %d\n", ctl < 0 ? 99 : ctl);
        printf("child_shim_private_kb %ld\n", shim_private_kb());
        fflush(stdout);
        _exit(0);
    }
    wait(NULL);
    const char *v = getenv(FSPROF_ENV);
    for (int k = 0; v && k < 4; k++)
        v = strchr(v, ':') ? strchr(v, ':') + 1 : NULL;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", v ? v : "", FSPROF_CTL_NAME);
    long c = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY);
    struct stat st;
    if (c < 0 || syscall(SYS_fstat, c, &st) != 0)
        return 2;
    char *m = (char *)syscall(SYS_mmap, 0, st.st_size, PROT_READ, MAP_SHARED, c, 0);
    if (m == MAP_FAILED)
        return 3;
    /* This image's block: the last one of its pid (a shell that exec'd it
     * had one of its own, the same pid). */
    struct fsprof_proc *p = NULL;
    for (long k = 0; FSPROF_ARENA_OFF + (k + 1) * FSPROF_FIRST_CHUNK <= st.st_size; k++) {
        struct fsprof_proc *q = (void *)(m + FSPROF_ARENA_OFF + k * FSPROF_FIRST_CHUNK);
        if (q->pid == getpid() && q->ready && (p == NULL || q->seq > p->seq))
            p = q;
    }
    if (p != NULL) {
        /* Slot 1, the first thread's, on the header's page. */
        uint32_t rec = p->nslots >= 2 ? FSPROF_PROC_HDR_SIZE : 0;
        if (rec == 0)
            return 5;
        /* Of its block's first 16 pages (the header's, the slot
         * record's, the counters'), those the shim's mapping has here. */
        int low = g_shim_ctl ? pages_mapped(g_shim_ctl + ((char *)p - m), 16) : -1;
        printf("low_pages %d\ndir_off %u\n", low, p->dir_off);
        uint32_t *offs = (uint32_t *)((char *)p + rec + sizeof(struct fsprof_slot_hdr));
        uint32_t end = 0;
        for (uint32_t i = 0; i < p->nctr; i++)
            if (offs[i] && offs[i] + p->ctr_size > end)
                end = offs[i] + p->ctr_size;
        printf("ctr_end %u\nused %u\ntop_used %u\n", end, p->used, p->top_used);
        /* The slot's bitmap against its offsets: a bit for every offset
         * set, and none for one that is not. */
        const struct fsprof_slot_hdr *sh = (const void *)((char *)p + rec);
        uint32_t bits = 0, wrong = 0;
        for (uint32_t i = 0; i < 64 * FSPROF_SLOT_USED_WORDS; i++) {
            int bit = (int)(sh->used[i / 64] >> (i % 64) & 1);
            int set = i < p->nctr + p->corr_ops && offs[i] != 0;
            bits += (uint32_t)bit;
            wrong += (uint32_t)(bit != set);
        }
        printf("used_bits %u\nused_wrong %u\n", bits, wrong);
        for (uint32_t i = 0; i < p->corr_ops; i++)
            if (offs[p->nctr + i])
                printf("table %u\n", offs[p->nctr + i]);
        return 0;
    }
    return 4;
}
"#;

/// The program's output (its block's offsets) and profile.
fn run(dir: &Path) -> (Vec<(String, usize)>, serde_json::Value) {
    run_after(dir, None)
}

/// [`run`], the program exec'd by a shell after `sleep` seconds: once
/// `fsprof run` has reserved the blocks it offered first, so that the
/// program's block is not one whose first pages the shim makes at once
/// (shim/pool.c, BLOCK_FIRST_PAGES).
fn run_after(dir: &Path, sleep: Option<&str>) -> (Vec<(String, usize)>, serde_json::Value) {
    let shim = concat!(env!("CARGO_MANIFEST_DIR"), "/../fsprof-shim/shim");
    let exe = compile_source("pool_layout", PROGRAM, dir, &[&format!("-I{shim}")]);
    let data = dir.join("data");
    std::fs::write(&data, [7u8; 4096]).unwrap();
    let profile = dir.join("p.json");
    let (exe, data) = (exe.to_str().unwrap(), data.to_str().unwrap());
    let script = sleep.map(|s| format!("sleep {s}; exec \"$0\" \"$1\""));
    let command = match &script {
        Some(s) => vec!["/bin/sh", "-c", s, exe, data],
        None => vec![exe, data],
    };
    let o = fsprof()
        .args(["run", "-q", "-f", "-o"])
        .arg(&profile)
        .arg("--")
        .args(&command)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let lines = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect();
    let p = serde_json::from_slice(&std::fs::read(&profile).unwrap()).unwrap();
    (lines, p)
}

/// The counters share the block's first pages (those populated at
/// start-up and the next), and the value table lies at the block's end,
/// placed so that its rows of 128 ns to 8 µs share one page.
#[test]
fn a_short_processs_counters_share_the_first_pages_and_its_tables_the_last() {
    let d = tempfile::tempdir().unwrap();
    let (out, _) = run(d.path());
    let get = |k: &'static str| out.iter().filter(move |(n, _)| n == k).map(|(_, v)| *v);
    let ctr_end = get("ctr_end").next().expect("its block was found");
    assert!(ctr_end <= 4 * 4096, "counters up to {ctr_end}: {out:?}");
    let tables: Vec<usize> = get("table").collect();
    assert_eq!(tables.len(), 1, "{out:?}");
    for t in &tables {
        assert!(
            *t >= abi::FIRST_CHUNK - 8 * 4096,
            "a table at {t}, not at the block's end: {out:?}"
        );
        assert_eq!((t + 9 * abi::CORR_ROW) % 4096, 0, "{out:?}");
    }
    // The descriptor states of all 1024 fds (fd 200 was used), at the end
    // too, below the table.
    let top_used = get("top_used").next().unwrap();
    assert!(
        top_used >= 8 * 4096 + abi::FD_TRACK * abi::FD_STATE_SIZE,
        "{out:?}"
    );
}

/// The slot record's bitmap names exactly the offsets the process set
/// (abi.h): fsprof reads and zeroes only those, so an offset without its
/// bit would be a counter lost, and a bit without one an offset read for
/// nothing. The program used open and read (counters) and read's value
/// table.
#[test]
fn a_slots_bitmap_names_exactly_the_offsets_it_set() {
    let d = tempfile::tempdir().unwrap();
    let (out, _) = run(d.path());
    let get = |k: &str| out.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
    assert_eq!(get("used_wrong"), Some(0), "{out:?}");
    assert!(get("used_bits").is_some_and(|n| n >= 3), "{out:?}");
}

/// The first thread's slot record lies on the header's page (abi.h:
/// slot 1 at PROC_HDR_SIZE), not on a page of its own: this program's
/// header, slot record, six counters and first descriptor states are in
/// its block's first two pages, the only two of them it maps (with the
/// record on a page of its own, three: a shared-page fault more in every
/// process). No slot directory is made for one thread.
#[test]
fn a_one_thread_processs_header_slot_and_counters_fill_two_pages() {
    let d = tempfile::tempdir().unwrap();
    let (out, _) = run_after(d.path(), Some("0.3"));
    let get = |k: &str| out.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
    assert_eq!(get("low_pages"), Some(2), "{out:?}");
    assert_eq!(get("dir_off"), Some(0), "{out:?}");
    assert!(get("used").is_some_and(|u| u <= 2 * 4096), "{out:?}");
}

/// The control file's header page is the only one of the file's first
/// 64 KiB that a process maps, a forked child too: its first touch is a write, and a read
/// fault would have mapped the offer ring's, lost table's and thresholds'
/// pages around it too (each unmapped again at exit).
#[test]
fn a_process_maps_the_control_files_header_page_alone() {
    let d = tempfile::tempdir().unwrap();
    let (out, _) = run(d.path());
    for what in ["ctl_pages", "child_ctl_pages"] {
        let n = out.iter().find(|(k, _)| k == what).map(|(_, v)| *v);
        assert_eq!(n, Some(1), "{what}: {out:?}");
    }
}

/// Every read files its size, and each read after the first on its fd a
/// seek distance of 0, fd 3's last one too: its state was carried over
/// when fd 200 made the thread keep all 1024.
#[test]
fn a_descriptor_above_the_first_few_keeps_every_seek_distance() {
    let d = tempfile::tempdir().unwrap();
    let (_, p) = run(d.path());
    let read = p["processes"][0]["layers"][0]["ops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "read")
        .unwrap()
        .clone();
    let cells = |kind: &str| -> Vec<(i64, u64)> {
        read["correlations"][kind]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c[1].as_i64().unwrap(), c[2].as_u64().unwrap()))
            .collect()
    };
    let sizes: u64 = cells("size").iter().map(|c| c.1).sum();
    assert_eq!(sizes, 5, "{read}");
    let seeks = cells("seek");
    assert_eq!(seeks.iter().map(|c| c.1).sum::<u64>(), 3, "{read}");
    assert!(seeks.iter().all(|c| c.0 == -2), "{read}");
}

/// A forked child writes one page of the shim's own memory to its first
/// calls (a fault and a copy of its parent's page): the page of .bss with
/// the set-up's state, the first chunk's entry, the first thread's slot
/// record and the first descriptors' classes (shim/pool.c). The chunk
/// table and the slot record had a page of .lbss of their own before
/// (two pages), and lay across two before that (three).
#[test]
fn a_forked_child_writes_one_page_of_the_shims_memory() {
    let d = tempfile::tempdir().unwrap();
    let (out, _) = run(d.path());
    let kb = out
        .iter()
        .find(|(k, _)| k == "child_shim_private_kb")
        .map(|(_, v)| *v);
    assert_eq!(kb, Some(4), "{out:?}");
}
