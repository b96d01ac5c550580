//! Validation against ground truth fsprof did not compute: loop-mounted
//! images made with a known `mkfs` block size, a read-ahead set with
//! `blockdev --setra`, a memory cgroup of a known limit, ext2's on-disk
//! format (12 direct pointers). They need root: marked `#[ignore = "needs
//! root, ..."]`, run by `./scripts/test-all` (CI). The full table across
//! file systems is `bench/discover_validation.py`.

use std::time::Instant;

use fsprof_testkit::{need_program, need_root};

use fsprof_discover::testing::LoopImage;
use fsprof_discover::{
    discover, ColdChoice, ColdMethod, Ctx, Finding, Options, Parameter, Report, Silent, Status,
};

fn run(
    img: &LoopImage,
    what: &[Parameter],
    iterations: Option<u32>,
    cold: ColdChoice,
    cgroup: Option<u64>,
) -> Report {
    let opts = Options {
        dir: img.mount_point(),
        what: what.to_vec(),
        iterations,
        device: Some(img.device.clone()),
        cold,
        cgroup_limit: cgroup,
        command: vec!["test".into()],
    };
    let mut p = Silent;
    let stop = || false;
    let t = Instant::now();
    let r = discover(
        &opts,
        &mut Ctx {
            progress: &mut p,
            stop: &stop,
        },
    )
    .expect("discovery runs");
    eprintln!("{} {:?}: {:.1}s", img.fs, what, t.elapsed().as_secs_f64());
    r
}

fn finding(r: &Report, p: Parameter) -> &Finding {
    r.findings
        .iter()
        .find(|f| f.parameter == p)
        .expect("the finding")
}

fn evidence(f: &Finding) -> String {
    format!(
        "{:?} {:?} reason={:?} confidence={:?} cross={:?} notes={:?}",
        f.status, f.value, f.reason, f.confidence, f.cross_checks, f.notes
    )
}

/// ext2 with `mkfs.ext2 -b <block>`: both block-size methods find the mkfs
/// value, and writes find 12 direct pointers (ext2's EXT2_NDIR_BLOCKS).
fn ext2(block: u64) {
    need_root("loop-mounted images, mounts, cgroups");
    need_program("mkfs.ext2", "e2fsprogs");
    let img = LoopImage::new("ext2", &["-q", "-F", "-b", &block.to_string()], 64, "").unwrap();
    let r = run(
        &img,
        &[Parameter::BlockSize, Parameter::DirectBlocks],
        None,
        ColdChoice::Only(ColdMethod::Fadvise),
        None,
    );
    let b = finding(&r, Parameter::BlockSize);
    assert_eq!(b.value, Some(block), "block size: {}", evidence(b));
    assert_eq!(b.kernel[0].value, block, "statfs agrees with mkfs");
    let x = &b.cross_checks[0];
    assert!(x.agrees && x.value == Some(block), "sparse reads: {x:?}");
    let d = finding(&r, Parameter::DirectBlocks);
    assert_eq!(d.value, Some(12), "direct blocks: {}", evidence(d));
    // The kernel's own accounting: st_blocks grows by two at block 12.
    assert_eq!(
        d.kernel.first().map(|k| k.value),
        Some(12),
        "{:?}",
        d.kernel
    );
}

#[test]
#[ignore = "needs root, mkfs.ext2"]
fn ext2_1024_block_size_and_12_direct_blocks() {
    ext2(1024);
}

#[test]
#[ignore = "needs root, mkfs.ext2"]
fn ext2_2048_block_size_and_12_direct_blocks() {
    ext2(2048);
}

#[test]
#[ignore = "needs root, mkfs.ext2"]
fn ext2_4096_block_size_and_12_direct_blocks() {
    ext2(4096);
}

/// `blockdev --setra` to two values: the read-ahead found follows the
/// setting within one block. Caches are emptied by remounting the image.
#[test]
#[ignore = "needs root, mkfs.ext4, blockdev"]
fn readahead_follows_blockdev_setra() {
    need_root("loop-mounted images, mounts, cgroups");
    need_program("mkfs.ext4", "e2fsprogs");
    need_program("blockdev", "util-linux");
    let img = LoopImage::new("ext4", &["-q", "-F", "-b", "4096"], 128, "").unwrap();
    for sectors in [256u64, 1024] {
        img.set_readahead_sectors(sectors).unwrap();
        assert_eq!(img.readahead_kb(), Some(sectors / 2));
        let r = run(
            &img,
            &[Parameter::Readahead],
            Some(2),
            ColdChoice::Auto,
            None,
        );
        assert_eq!(r.cold_cache, ColdMethod::Remount, "{}", r.cold_cache_why);
        let f = finding(&r, Parameter::Readahead);
        let expected = sectors * 512;
        let found = f
            .value
            .unwrap_or_else(|| panic!("no read-ahead: {}", evidence(f)));
        assert!(
            found.abs_diff(expected) <= 4096,
            "setra {sectors}: found {found}, expected {expected}: {}",
            evidence(f)
        );
        assert_eq!(f.kernel[0].value, expected, "{:?}", f.kernel);
    }
}

/// A 64 MiB memory cgroup: the capacity found is within 15% of it, and
/// the cgroup is gone afterwards.
#[test]
#[ignore = "needs root, mkfs.ext4"]
fn page_cache_capacity_within_15_percent_of_a_cgroup_limit() {
    need_root("loop-mounted images, mounts, cgroups");
    need_program("mkfs.ext4", "e2fsprogs");
    let img = LoopImage::new("ext4", &["-q", "-F"], 160, "").unwrap();
    let limit = 64u64 << 20;
    let r = run(
        &img,
        &[Parameter::PageCache],
        Some(2),
        ColdChoice::Only(ColdMethod::Fadvise),
        Some(limit),
    );
    let f = finding(&r, Parameter::PageCache);
    let found = f
        .value
        .unwrap_or_else(|| panic!("no capacity: {}", evidence(f)));
    let err = (found as f64 - limit as f64).abs() / limit as f64;
    assert!(
        err <= 0.15,
        "found {found} for a {limit} limit ({:.0}%): {}",
        err * 100.0,
        evidence(f)
    );
    let cg = &f.kernel[0];
    assert_eq!(cg.value, limit);
    assert!(
        !std::path::Path::new(&cg.source).exists(),
        "{} left behind",
        cg.source
    );
}

/// ext4 maps files with extents: no direct pointers to count; xfs too.
#[test]
#[ignore = "needs root, mkfs.ext4"]
fn extents_make_direct_blocks_not_applicable() {
    need_root("loop-mounted images, mounts, cgroups");
    need_program("mkfs.ext4", "e2fsprogs");
    let img = LoopImage::new("ext4", &["-q", "-F"], 64, "").unwrap();
    let r = run(
        &img,
        &[Parameter::DirectBlocks],
        None,
        ColdChoice::Only(ColdMethod::Fadvise),
        None,
    );
    let f = finding(&r, Parameter::DirectBlocks);
    assert_eq!(f.status, Status::NotApplicable);
    assert!(
        f.reason.as_deref().unwrap_or("").starts_with("extents"),
        "{}",
        evidence(f)
    );
    // The same file system without the extent feature is block-mapped.
    drop(img);
    let img = LoopImage::new(
        "ext4",
        &["-q", "-F", "-O", "^extent,^64bit", "-b", "1024"],
        64,
        "",
    )
    .unwrap();
    let r = run(
        &img,
        &[Parameter::DirectBlocks],
        None,
        ColdChoice::Only(ColdMethod::Fadvise),
        None,
    );
    let f = finding(&r, Parameter::DirectBlocks);
    assert_ne!(f.status, Status::NotApplicable, "{}", evidence(f));
}

/// xfs and btrfs: block size by both methods where they can see it.
#[test]
#[ignore = "needs root, mkfs.xfs, mkfs.btrfs, blockdev"]
fn xfs_and_btrfs_block_size_and_btrfs_readahead() {
    need_root("loop-mounted images, mounts, cgroups");
    need_program("mkfs.xfs", "xfsprogs");
    need_program("mkfs.btrfs", "btrfs-progs");
    need_program("blockdev", "util-linux");
    let xfs = LoopImage::new("xfs", &["-q", "-f", "-b", "size=4096"], 320, "").unwrap();
    let r = run(
        &xfs,
        &[Parameter::BlockSize],
        None,
        ColdChoice::Only(ColdMethod::Fadvise),
        None,
    );
    let f = finding(&r, Parameter::BlockSize);
    assert_eq!(f.value, Some(4096), "xfs: {}", evidence(f));
    assert!(f.cross_checks[0].agrees, "xfs: {}", evidence(f));
    drop(xfs);
    let btrfs = LoopImage::new("btrfs", &["-q", "-f", "-s", "4096"], 256, "").unwrap();
    let r = run(
        &btrfs,
        &[Parameter::BlockSize],
        None,
        ColdChoice::Only(ColdMethod::Fadvise),
        None,
    );
    let f = finding(&r, Parameter::BlockSize);
    assert_eq!(f.value, Some(4096), "btrfs: {}", evidence(f));
    // btrfs reads ahead through a bdi of its own (at least 4 MiB): the
    // loop device's setting does not govern it, and the discovery follows
    // the file system's bdi, not the device's.
    btrfs.set_readahead_sectors(256).unwrap();
    let r = run(
        &btrfs,
        &[Parameter::Readahead],
        Some(2),
        ColdChoice::Auto,
        None,
    );
    let f = finding(&r, Parameter::Readahead);
    let fs_bdi = &f.kernel[0];
    assert!(fs_bdi.source.contains("btrfs"), "{:?}", f.kernel);
    assert_eq!(
        f.kernel[1].value,
        128 << 10,
        "the device's setting: {:?}",
        f.kernel
    );
    let found = f
        .value
        .unwrap_or_else(|| panic!("btrfs read-ahead: {}", evidence(f)));
    assert!(
        found.abs_diff(fs_bdi.value) <= 4096,
        "btrfs: found {found}: {}",
        evidence(f)
    );
}
