//! The layered view: `fsprof mount` and `fsprof kernel --layer
//! fuse,fs,block` run together, their profiles merge, and the report sets
//! the kernel's FUSE request time beside the daemon's and the device's.

use std::fs;
use std::os::fd::AsRawFd;

use crate::kit::*;

#[test]
#[ignore = "needs root"]
fn mount_and_kernel_profiles_merge_into_one_layered_report() {
    // On the disk, and out of the page cache, so that the daemon's reads
    // go to a device and the block layer sees them on an idle machine
    // (the block layer is system-wide: on a busy one, others' I/O would
    // hide that this workload reached no device).
    let d = dirs_on_disk();
    let data = pattern(8 << 20, 11);
    fs::write(d.lower.join("cold"), &data).unwrap();
    let f = fs::File::open(d.lower.join("cold")).unwrap();
    f.sync_all().unwrap();
    // SAFETY: a descriptor we hold.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    drop(f);
    let (mout, kout, both) = (
        d.path().join("m.json"),
        d.path().join("k.json"),
        d.path().join("both.json"),
    );
    let m = Mount::start(&d.lower, &d.mp, &mout, &[]);
    let o = fsprof()
        .args(["kernel", "--layers", "fuse,fs,block", "-q", "-o"])
        .arg(&kout)
        .args(["--", "cat"])
        .arg(m.path("cold"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stdout == data, "cat through the mount");
    m.umount();
    let o = fsprof()
        .arg("merge")
        .arg(&mout)
        .arg(&kout)
        .arg("-o")
        .arg(&both)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    check_ok(&both);
    let p = fsprof_core::format::read_profile(&both).unwrap();
    for l in ["fuse", "fusefs", "block"] {
        assert!(p.layer(l).is_some_and(|l| l.total_calls() > 0), "layer {l}");
    }
    let (k, dm) = (
        p.layer("fuse").unwrap().op("read").unwrap(),
        p.layer("fusefs").unwrap().op("read").unwrap(),
    );
    // The same requests, seen from both ends: the daemon's part is less.
    assert_eq!(k.post, dm.post, "fuse/read {k:?} fusefs/read {dm:?}");
    assert!(dm.total_ns < k.total_ns);
    let o = fsprof()
        .arg("report")
        .arg(&both)
        .arg("--attribution")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("FUSE requests, kernel (fuse) and daemon (fusefs) side by side"),
        "{text}"
    );
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("read ") && l.contains('%'))
        .unwrap_or_else(|| panic!("no read row in {text}"));
    assert!(!row.contains("calls differ"), "{row}");
    // The daemon's reads against the block layer need per-call data
    // (`fsprof kernel --pid <daemon> --layer syscall,block`): the report
    // says so rather than matching histograms.
    assert!(
        text.contains("layered attribution: the block layer alone"),
        "{text}"
    );
}
