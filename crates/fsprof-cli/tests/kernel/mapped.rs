//! Faults on file mappings as the fs layer's own ops (`mapped_read`,
//! `mapped_write`, issue 28): a program whose file I/O goes through
//! `mmap` makes no call for it, and is not idle in a kernel profile; a
//! program faulting in anonymous memory is not taken for file I/O.

use std::io::Write;
use std::path::Path;

use fsprof_core::format::read_profile;
use fsprof_core::Profile;
use fsprof_testkit::{fsprof, need_root};

/// `mm f FILE`: a shared writable mapping of FILE (1 MiB), one store into
/// every fourth page (64 store faults) and a load from every fourth page
/// after those (64 pages loaded); `mm a`: 64 MiB of anonymous memory
/// without huge pages, every page stored to (16,384 faults).
const MM_C: &str = r#"#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#define SZ (1 << 20)
#define ANON (64 << 20)
int main(int argc, char **argv) {
    if (argv[1][0] == 'a') {
        unsigned char *m = mmap(0, ANON, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED || madvise(m, ANON, MADV_NOHUGEPAGE) != 0) return 1;
        for (long i = 0; i < ANON; i += 4096) m[i] = 1;
        return munmap(m, ANON);
    }
    int fd = open(argv[2], O_RDWR);
    volatile unsigned char *w = mmap(0, SZ, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (fd < 0 || w == MAP_FAILED) return 2;
    unsigned s = 0;
    for (int p = 0; p < 256; p += 4) w[p * 4096 + 5] = 'x';
    for (int p = 2; p < 256; p += 4) s += w[p * 4096 + 5];
    return munmap((void *)w, SZ) != 0 || s == 12345;
}
"#;

/// `fsprof kernel --layers fs -- ARGS`'s profile.
fn profile(dir: &Path, args: &[&std::ffi::OsStr]) -> Profile {
    let out = dir.join("p.json");
    let o = fsprof()
        .args(["kernel", "-q", "-f", "--layers", "fs", "-o"])
        .arg(&out)
        .arg("--")
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("not timed"), "{err}");
    read_profile(&out).unwrap()
}

/// (count, total ns) of an fs op.
fn op(p: &Profile, name: &str) -> (u64, u64) {
    p.layer("fs")
        .and_then(|l| l.ops.iter().find(|o| o.name == name))
        .map_or((0, 0), |o| (o.post, o.total_ns))
}

#[test]
#[ignore = "needs root (eBPF)"]
fn faults_on_file_mappings_are_fs_ops_and_anonymous_ones_are_not() {
    need_root("eBPF");
    let d = tempfile::tempdir().unwrap();
    let exe = fsprof_testkit::compile_source("mm", MM_C, d.path(), &[]);
    // Written a page at a time: cached as pages, not large folios, each
    // page's first store is a fault of its own.
    let file = d.path().join("data.bin");
    let mut f = std::fs::File::create(&file).unwrap();
    for i in 0..256u32 {
        f.write_all(&[i as u8; 4096]).unwrap();
    }
    f.sync_all().unwrap();
    let p = profile(d.path(), &[exe.as_os_str(), "f".as_ref(), file.as_os_str()]);
    let (stores, store_ns) = op(&p, "mapped_write");
    let (loads, load_ns) = op(&p, "mapped_read");
    assert!(
        (64..200).contains(&stores) && store_ns > 0,
        "mapped_write {stores} in {store_ns} ns"
    );
    assert!(loads >= 1 && load_ns > 0, "mapped_read {loads}");
    let p = profile(d.path(), &[exe.as_os_str(), "a".as_ref()]);
    let (stores, _) = op(&p, "mapped_write");
    let (loads, _) = op(&p, "mapped_read");
    assert!(
        stores + loads < 500,
        "16,384 anonymous faults taken for file ones: {stores} stores, {loads} loads"
    );
}
