//! `fsprof mount` in observe-all mode counts exactly the requests a
//! scripted workload makes, and what it reads through the mount is what
//! LOWER holds.

use std::fs;
use std::io::{Read, Write};

use crate::kit::*;

#[test]
#[ignore = "needs root"]
fn a_scripted_workload_gives_exact_per_op_counts() {
    let d = dirs();
    let m = d.mount(&[]);

    const FILES: usize = 5;
    const WRITES: usize = 3;
    for k in 0..FILES {
        let mut f = fs::File::create(m.path(format!("f{k}"))).unwrap();
        for w in 0..WRITES {
            f.write_all(&pattern(1000, (k * 10 + w) as u64)).unwrap();
        }
    }
    // Reads of one write's size, then the read that finds the end: with
    // direct I/O each read call is one request.
    for k in 0..FILES {
        let mut f = fs::File::open(m.path(format!("f{k}"))).unwrap();
        let mut got = vec![0u8; 1000 * WRITES];
        for chunk in got.chunks_mut(1000) {
            assert_eq!(f.read(chunk).unwrap(), 1000);
        }
        assert_eq!(f.read(&mut [0u8; 1000]).unwrap(), 0);
        assert_eq!(got, fs::read(d.lower.join(format!("f{k}"))).unwrap());
    }
    fs::rename(m.path("f0"), m.path("g0")).unwrap();
    fs::rename(m.path("f1"), m.path("g1")).unwrap();
    for n in ["g0", "g1", "f2"] {
        fs::remove_file(m.path(n)).unwrap();
    }
    fs::create_dir(m.path("dir")).unwrap();
    fs::remove_dir(m.path("dir")).unwrap();
    // A failed call counts as an error of its op.
    assert!(fs::remove_file(m.path("nosuch")).is_err());

    let p = m.umount();
    assert_eq!(p.meta.tool, "mount");
    assert_eq!(p.meta.settings["mode"], "observe-all");
    fsprof_testkit::assert_noted(&p.meta.notes, "direct I/O");
    fsprof_testkit::assert_noted(&p.meta.notes, "read-only sends no flush");
    let want = [
        ("create", FILES),
        ("write", FILES * WRITES),
        ("read", FILES * (WRITES + 1)),
        ("open", FILES),
        // Only the written files: a read-only open's close sends none.
        ("flush", FILES),
        ("release", 2 * FILES),
        ("rename", 2),
        ("unlink", 3),
        ("mkdir", 1),
        ("rmdir", 1),
    ];
    for (name, n) in want {
        assert_eq!(calls(&p, name), n as u64, "{name}: {:?}", op(&p, name));
    }
    let lookup = op(&p, "lookup").expect("lookups");
    assert!(lookup.errors >= 1, "the failed unlink's lookup: {lookup:?}");
    assert_eq!(op(&p, "write").unwrap().errors, 0);
    // What the files hold in LOWER after the workload.
    let mut left: Vec<String> = fs::read_dir(&d.lower)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["f3", "f4"]);
    check_ok(&d.out);
}

/// Opens, fstats, reads and closes each of `n` files through the mount:
/// a `getattr` for each fstat is what the program asked for.
fn open_fstat_read(m: &Mount, n: usize) {
    use std::os::fd::AsRawFd;
    for k in 0..n {
        let mut f = fs::File::open(m.path(format!("f{k}"))).unwrap();
        // SAFETY: an all-zero stat is a valid value.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: the descriptor is open and `st` is writable.
        assert_eq!(unsafe { libc::fstat(f.as_raw_fd(), &mut st) }, 0);
        let mut buf = [0u8; 4096];
        while f.read(&mut buf).unwrap() > 0 {}
    }
}

#[test]
#[ignore = "needs root"]
fn only_the_programs_stats_are_getattrs_unless_the_kernel_checks_permissions() {
    const N: usize = 20;
    let d = dirs();
    for k in 0..N {
        fs::write(d.lower.join(format!("f{k}")), pattern(100, k as u64)).unwrap();
    }
    let m = d.mount(&[]);
    open_fstat_read(&m, N);
    let p = m.umount();
    assert!(p.meta.settings["permission checks"].starts_with("LOWER's"));
    assert_eq!(calls(&p, "getattr"), N as u64, "{:?}", op(&p, "getattr"));
    assert_eq!(calls(&p, "open"), N as u64);
    check_ok(&d.out);

    // Shared, the kernel checks each open against the caller's
    // credentials and asks for the attributes it checks first.
    fs::remove_file(&d.out).unwrap();
    let m = d.mount(&["--allow-other"]);
    open_fstat_read(&m, N);
    let p = m.umount();
    assert!(p.meta.settings["permission checks"].contains("default_permissions"));
    assert!(
        calls(&p, "getattr") >= 2 * N as u64,
        "{:?}",
        op(&p, "getattr")
    );
}

#[test]
#[ignore = "needs root"]
fn data_read_through_the_mount_matches_lower() {
    let d = dirs();
    fs::create_dir_all(d.lower.join("sub")).unwrap();
    let sizes = [0usize, 1, 4095, 4096, 131_073, 3 << 20];
    for (k, &n) in sizes.iter().enumerate() {
        fs::write(
            d.lower.join("sub").join(format!("d{k}")),
            pattern(n, k as u64 + 7),
        )
        .unwrap();
    }
    let m = d.mount(&["--threads", "4"]);
    for (k, &n) in sizes.iter().enumerate() {
        let rel = format!("sub/d{k}");
        let via = fs::read(m.path(&rel)).unwrap();
        let direct = fs::read(d.lower.join(&rel)).unwrap();
        assert_eq!(via.len(), n);
        assert_eq!(fnv(&via), fnv(&direct), "{rel}");
        assert!(via == direct, "{rel}: contents differ");
    }
    let p = m.umount();
    assert!(calls(&p, "read") >= 1);
    assert_eq!(op(&p, "read").unwrap().errors, 0);
    check_ok(&d.out);
}

#[test]
#[ignore = "needs root"]
fn lower_may_be_the_mount_point() {
    let d = dirs();
    fs::write(d.lower.join("old"), "before").unwrap();
    let m = Mount::start(&d.lower, &d.lower, &d.out, &[]);
    assert_eq!(fs::read_to_string(m.path("old")).unwrap(), "before");
    fs::write(m.path("new"), "through").unwrap();
    let p = m.umount();
    assert_eq!(calls(&p, "create"), 1);
    // Unmounted: the directory itself has both.
    assert_eq!(fs::read_to_string(d.lower.join("new")).unwrap(), "through");
    assert_eq!(fs::read_to_string(d.lower.join("old")).unwrap(), "before");
}

#[test]
#[ignore = "needs root"]
fn fast_passthrough_mode_hands_data_ops_to_the_kernel_and_says_so() {
    let d = dirs();
    let m = d.mount(&["--fast", "--passthrough"]);
    let data = pattern(1 << 20, 5);
    fs::write(m.path("big"), &data).unwrap();
    assert!(fs::read(m.path("big")).unwrap() == data);
    assert!(fs::read(d.lower.join("big")).unwrap() == data);
    let p = m.umount();
    assert_eq!(p.meta.settings["mode"], "fast");
    assert_eq!(p.meta.settings["data ops"], "kernel passthrough");
    assert_eq!((calls(&p, "read"), calls(&p, "write")), (0, 0));
    assert_eq!(calls(&p, "create"), 1);
    // Two opens and two closes, no flush (FOPEN_NOFLUSH), both released.
    assert_eq!((calls(&p, "flush"), calls(&p, "release")), (0, 2));
    fsprof_testkit::assert_noted(&p.meta.notes, "data ops are not seen");
    let o = fsprof().arg("report").arg(&d.out).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(
            "note: fast: read and write go from the kernel straight to the backing files"
        ),
        "{text}"
    );
    assert!(text.contains("mode fast"), "{text}");
}

/// `--fast` declines the first open, so the kernel opens files alone:
/// no open, flush or release reaches the daemon, data requests come
/// without a handle and are served by the inode's own descriptors, and
/// O_TRUNC (no longer carried by an open request) still truncates.
#[test]
#[ignore = "needs root"]
fn fast_mode_sends_no_opens_and_keeps_pages_across_opens() {
    use std::os::unix::fs::{FileExt, MetadataExt};
    let d = dirs();
    let data = pattern(1 << 20, 7);
    fs::write(d.lower.join("big"), &data).unwrap();
    let m = d.mount(&["--fast"]);
    // The mount's read-ahead is raised to 1 MiB (what one request carries).
    let dev = fs::metadata(&d.mp).unwrap().dev();
    let ra = format!(
        "/sys/class/bdi/{}:{}/read_ahead_kb",
        libc::major(dev),
        libc::minor(dev)
    );
    assert_eq!(fs::read_to_string(&ra).unwrap().trim(), "1024", "{ra}");
    assert!(fs::read(m.path("big")).unwrap() == data);
    let first = stat_json(&d.mp);
    assert_eq!(first.meta.settings["read-ahead"], "1024 KiB");
    assert!(calls(&first, "read") >= 1, "{:?}", first.layers);
    // The later opens read the pages the kernel kept.
    for _ in 0..2 {
        assert!(fs::read(m.path("big")).unwrap() == data);
    }
    assert_eq!(calls(&stat_json(&d.mp), "read"), calls(&first, "read"));
    // Rewritten through an open with O_TRUNC: shorter than before, so a
    // lost truncation would leave the old tail in LOWER.
    let short = pattern(1000, 8);
    fs::write(m.path("big"), &short).unwrap();
    for f in [d.lower.join("big"), m.path("big")] {
        let got = fs::read(&f).unwrap();
        assert!(
            got == short,
            "{f:?}: {} bytes, want the 1000 written",
            got.len()
        );
    }
    // ftruncate, pwrite and fsync on a descriptor the daemon never saw
    // opened (the kernel's handle is 0).
    let f = fs::OpenOptions::new()
        .write(true)
        .open(m.path("big"))
        .unwrap();
    f.set_len(10).unwrap();
    f.write_all_at(b"XY", 2).unwrap();
    f.sync_all().unwrap();
    drop(f);
    let mut want = short[..10].to_vec();
    want[2..4].copy_from_slice(b"XY");
    assert_eq!(fs::read(d.lower.join("big")).unwrap(), want);
    // Created files get no handle either (the kernel would send no release
    // to close one): their descriptors must not pile up in the daemon.
    let pid = stat_json(&d.mp).meta.settings["daemon pid"].clone();
    let fds = || fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count();
    let before = fds();
    for k in 0..100 {
        fs::write(m.path(format!("new{k}")), "n").unwrap();
    }
    assert_eq!(fs::read(d.lower.join("new99")).unwrap(), b"n");
    for k in 0..100 {
        fs::remove_file(m.path(format!("new{k}"))).unwrap();
    }
    // Unlinked, the inodes are forgotten (their O_PATH descriptors closed)
    // as the kernel gets to it; kept writers are bounded (256 inodes).
    let t0 = std::time::Instant::now();
    while fds() > before + 10 && t0.elapsed() < std::time::Duration::from_secs(20) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        fds() <= before + 10,
        "{} descriptors before, {} after",
        before,
        fds()
    );
    // Listings: the first reads the directory without a handle, the
    // second reads the kernel's cache.
    let listing = |p: &fsprof_core::Profile| calls(p, "readdir") + calls(p, "readdirplus");
    assert_eq!(fs::read_dir(&d.mp).unwrap().count(), 1, "big only");
    let once = listing(&stat_json(&d.mp));
    assert!(once >= 1);
    assert_eq!(fs::read_dir(&d.mp).unwrap().count(), 1);
    assert_eq!(listing(&stat_json(&d.mp)), once);
    let p = m.umount();
    assert_eq!(p.meta.settings["mode"], "fast");
    assert_eq!(p.meta.settings["data ops"], "through the daemon");
    assert_eq!((calls(&p, "opendir"), calls(&p, "releasedir")), (0, 0));
    assert_eq!(
        (calls(&p, "open"), calls(&p, "flush"), calls(&p, "release")),
        (0, 0, 0),
        "{:?}",
        p.layers
    );
    assert_eq!(calls(&p, "create"), 100);
    assert!(calls(&p, "setattr") >= 2, "O_TRUNC and ftruncate");
    assert_eq!(calls(&p, "fsync"), 1);
    for name in ["write", "setattr", "fsync", "read"] {
        assert_eq!(op(&p, name).unwrap().errors, 0, "{name}");
    }
    fsprof_testkit::assert_noted(
        &p.meta.notes,
        "files and directories are opened by the kernel alone",
    );
    check_ok(&d.out);
}

#[test]
#[ignore = "needs root"]
fn more_inodes_than_the_descriptor_limit_it_was_started_with() {
    use std::os::unix::process::CommandExt;
    let d = dirs();
    const LIMIT: u64 = 256;
    const FILES: usize = 600;
    for k in 0..FILES {
        fs::write(d.lower.join(format!("f{k}")), "x").unwrap();
    }
    // A soft limit below the files, the hard limit as it is: the daemon
    // lifts its soft limit to the hard one (and further, where it holds
    // CAP_SYS_RESOURCE).
    // SAFETY: plain data getrlimit fills in.
    let mut hard: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: an out-pointer to a rlimit.
    let r = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut hard) };
    assert_eq!(r, 0);
    let hard = hard.rlim_max;
    assert!(
        hard > 2 * FILES as u64,
        "the hard descriptor limit, {hard}, leaves no room for this test"
    );
    let mut cmd = fsprof();
    cmd.arg("mount")
        .arg(&d.lower)
        .arg(&d.mp)
        .arg("-o")
        .arg(&d.out);
    // SAFETY: only setrlimit runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let l = libc::rlimit {
                rlim_cur: LIMIT,
                rlim_max: hard,
            };
            match libc::setrlimit(libc::RLIMIT_NOFILE, &l) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            }
        })
    };
    let o = cmd.output().unwrap();
    let _detach = Detach(d.mp.clone());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let m = Mount::adopt(&d.lower, &d.mp, &d.out, &stat_json(&d.mp));
    // The kernel keeps each inode it looked up, the daemon one descriptor
    // for each: more than the limit the daemon was started with.
    for k in 0..FILES {
        fs::metadata(m.path(format!("f{k}"))).unwrap();
    }
    let p = m.umount();
    assert_eq!(op(&p, "lookup").unwrap().errors, 0);
    let limit: u64 = p.meta.settings["descriptor limit"].parse().unwrap();
    assert!(limit > FILES as u64, "descriptor limit {limit}");
}
