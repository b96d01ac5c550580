//! Validation against ground truth fsprof did not compute: loop-mounted
//! images made with a known `mkfs` block size, a read-ahead set with
//! `blockdev --setra`, a memory cgroup of a known limit, ext2's on-disk
//! format (12 direct pointers). They need root: marked `#[ignore = "needs
//! root, ..."]`, run by `./scripts/test-all` (CI). The full table across
//! file systems is `bench/discover_validation.py`.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use fsprof_testkit::{need_program, need_root};

use fsprof_discover::cold::Cooler;
use fsprof_discover::target::Target;
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

/// Discovery of `what` with caches dropped by fadvise, as many
/// iterations as the methods choose.
fn run_fadvised(img: &LoopImage, what: &[Parameter]) -> Report {
    run(img, what, None, ColdChoice::Only(ColdMethod::Fadvise), None)
}

/// Read-ahead discovery, two iterations, any way of dropping caches.
fn readahead(img: &LoopImage) -> Report {
    run(
        img,
        &[Parameter::Readahead],
        Some(2),
        ColdChoice::Auto,
        None,
    )
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
///
/// Beside the rest of the suite, the lone writes once stepped at block 6
/// (1.67x, as large as the real step at 12), and the finding was
/// "undetermined" with 12 and 6 as candidates: what issue 24 asks for
/// under contention, not a failure. Such a run is repeated once; the
/// repeat must find 12, so a method that never decides still fails.
fn ext2(block: u64) {
    need_root("loop-mounted images, mounts, cgroups");
    need_program("mkfs.ext2", "e2fsprogs");
    let img = LoopImage::new("ext2", &["-q", "-F", "-b", &block.to_string()], 64, "").unwrap();
    let what = [Parameter::BlockSize, Parameter::DirectBlocks];
    let mut r = run_fadvised(&img, &what);
    let d = finding(&r, Parameter::DirectBlocks);
    if d.status == Status::Undetermined && d.candidates.iter().any(|c| c.value == 12) {
        eprintln!("undetermined, repeated: {}", evidence(d));
        r = run_fadvised(&img, &what);
    }
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
        let r = readahead(&img);
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
    let r = run_fadvised(&img, &[Parameter::DirectBlocks]);
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
    let r = run_fadvised(&img, &[Parameter::DirectBlocks]);
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
    let r = run_fadvised(&xfs, &[Parameter::BlockSize]);
    let f = finding(&r, Parameter::BlockSize);
    assert_eq!(f.value, Some(4096), "xfs: {}", evidence(f));
    // The write period is the block (a loaded machine, order-0 pages) or a
    // large folio's multiple of it (an idle one: 64 KiB), which the finding
    // must then name rather than report.
    assert!(
        f.cross_checks[0].agrees || f.notes.iter().any(|n| n.contains("large folios")),
        "xfs: {}",
        evidence(f)
    );
    drop(xfs);
    let btrfs = LoopImage::new("btrfs", &["-q", "-f", "-s", "4096"], 256, "").unwrap();
    let r = run_fadvised(&btrfs, &[Parameter::BlockSize]);
    let f = finding(&r, Parameter::BlockSize);
    assert_eq!(f.value, Some(4096), "btrfs: {}", evidence(f));
    // btrfs reads ahead through a bdi of its own (at least 4 MiB): the
    // loop device's setting does not govern it, and the discovery follows
    // the file system's bdi, not the device's.
    btrfs.set_readahead_sectors(256).unwrap();
    let r = readahead(&btrfs);
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

/// A process in a mount namespace of its own, made while `mount_point`
/// is mounted: it holds a copy of that mount (what `unshare -m` in another
/// test of the suite does by chance). Killed on drop.
struct NamespaceHolder(Child);

impl NamespaceHolder {
    fn new(mount_point: &Path) -> NamespaceHolder {
        let child = Command::new("unshare")
            .args(["-m", "--propagation", "private", "sleep", "120"])
            .spawn()
            .expect("unshare (util-linux)");
        let h = NamespaceHolder(child);
        let mine = std::fs::read_link("/proc/self/ns/mnt").unwrap();
        let mountinfo = format!("/proc/{}/mountinfo", h.0.id());
        let mp = mount_point.to_string_lossy().into_owned();
        let t = Instant::now();
        // unshare keeps its pid through the exec of sleep: in its own
        // namespace once the link differs and the copy lists the mount.
        while std::fs::read_link(format!("/proc/{}/ns/mnt", h.0.id())).ok() == Some(mine.clone())
            || !std::fs::read_to_string(&mountinfo).is_ok_and(|m| m.contains(&mp))
        {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "unshare never got its namespace"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        h
    }
}

impl Drop for NamespaceHolder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn warm(path: &Path) {
    let mut v = Vec::new();
    std::fs::File::open(path)
        .unwrap()
        .read_to_end(&mut v)
        .unwrap();
}

fn cached_pages(path: &Path) -> u64 {
    let f = std::fs::File::open(path).unwrap();
    fsprof_sys::pagecache::residency(&f).unwrap().cached_pages
}

/// The cause of a CI failure: a remount while another mount namespace
/// holds a copy of the mount leaves the file system alive, the mount gets
/// the same superblock back and every page stays cached. The cooling must
/// see that (the device is still held after the unmount), empty the file
/// by fadvise instead, verify it, and count the fallback.
#[test]
#[ignore = "needs root, mkfs.ext4, unshare"]
fn remount_while_another_namespace_holds_the_mount_falls_back_and_is_cold() {
    need_root("loop-mounted images, mounts, mount namespaces");
    need_program("mkfs.ext4", "e2fsprogs");
    need_program("unshare", "util-linux");
    let img = LoopImage::new("ext4", &["-q", "-F"], 64, "").unwrap();
    let file = img.mount_point().join("f");
    std::fs::write(&file, vec![b'w'; 8 << 20]).unwrap();
    let t = Target::probe(&img.mount_point()).unwrap();
    let cooler =
        Cooler::choose(ColdChoice::Only(ColdMethod::Remount), &t, Some(&img.device)).unwrap();
    let holder = NamespaceHolder::new(&img.mount_point());
    warm(&file);
    assert_eq!(cached_pages(&file), 2048, "warm before cooling");
    let mut ctx = Ctx {
        progress: &mut Silent,
        stop: &|| false,
    };
    cooler
        .cool(&[&file], &mut ctx)
        .expect("the remount is followed by fadvise");
    assert_eq!(cached_pages(&file), 0);
    let tally = cooler.tally();
    assert_eq!((tally.coolings, tally.fallbacks), (1, 1), "{tally:?}");
    let why = tally.fallback_why.unwrap_or_default();
    assert!(why.contains("still in use after the unmount"), "{why}");
    let report = cooler.fallbacks().expect("the report names the fallback");
    assert!(report.starts_with("1 of 1 remounts"), "{report}");
    // The holder gone, the file system is still there and cools again.
    drop(holder);
    warm(&file);
    cooler.cool(&[&file], &mut ctx).expect("a second cooling");
    assert_eq!(cached_pages(&file), 0);
    assert_eq!(cooler.tally().coolings, 2);
}

/// `mount -o loop` makes a loop device that detaches itself at unmount:
/// a remount would unmount the file system and then find no device to
/// mount again, so it is refused; auto then takes fadvise when that
/// device was named (only its file system is to be touched), drop_caches
/// when none was.
#[test]
#[ignore = "needs root, mkfs.ext4"]
fn an_autoclear_loop_device_is_not_remounted() {
    need_root("loop-mounted images, mounts");
    need_program("mkfs.ext4", "e2fsprogs");
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let (image, mnt) = (d.path().join("image"), d.path().join("mnt"));
    std::fs::File::create(&image)
        .unwrap()
        .set_len(32 << 20)
        .unwrap();
    std::fs::create_dir(&mnt).unwrap();
    let ok = |c: &mut Command| assert!(c.status().unwrap().success(), "{c:?}");
    ok(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&image));
    ok(Command::new("mount")
        .args(["-o", "loop"])
        .arg(&image)
        .arg(&mnt));
    let _guard = Unmount(mnt.clone());
    let t = Target::probe(&mnt).unwrap();
    let dev = std::path::PathBuf::from(&t.mount.as_ref().unwrap().source);
    let e = Cooler::choose(ColdChoice::Only(ColdMethod::Remount), &t, Some(&dev)).unwrap_err();
    assert!(e.to_string().contains("autoclear"), "{e}");
    // Named, the device is all the user wants touched: fadvise, not the
    // whole machine's drop_caches.
    let c = Cooler::choose(ColdChoice::Auto, &t, Some(&dev)).unwrap();
    assert_eq!(c.method, ColdMethod::Fadvise, "{}", c.why);
    assert!(c.why.contains("autoclear"), "{}", c.why);
    let c = Cooler::choose(ColdChoice::Auto, &t, None).unwrap();
    assert_eq!(c.method, ColdMethod::DropCaches, "{}", c.why);
}

/// Maps (and faults in) the first file named `name` that appears under
/// `dir/.fsprof-discover-*/`, and keeps it mapped until dropped: pages
/// mapped into a process cannot be dropped by fadvise or drop_caches, as
/// when another program has a file of the file system mapped.
struct Mapper {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<bool>>,
}

impl Mapper {
    fn new(dir: &Path, name: &'static str) -> Mapper {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s = stop.clone();
        let dir = dir.to_path_buf();
        let thread = std::thread::spawn(move || {
            let file = loop {
                if s.load(Ordering::Relaxed) {
                    return false;
                }
                let found = std::fs::read_dir(&dir)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.path().join(name))
                    .find(|p| std::fs::metadata(p).is_ok_and(|m| m.len() >= 4 << 20));
                match found.and_then(|p| std::fs::File::open(p).ok()) {
                    Some(f) => break f,
                    None => std::thread::sleep(Duration::from_millis(5)),
                }
            };
            let map = fsprof_discover::testing::map_every_page(&file).unwrap();
            while !s.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(5));
            }
            drop(map);
            true
        });
        Mapper {
            stop,
            thread: Some(thread),
        }
    }

    /// Whether the file was found and mapped.
    fn finish(mut self) -> bool {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().is_some_and(|t| t.join().unwrap())
    }
}

impl Drop for Mapper {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Read-ahead's test file mapped by another program: no cooling can make
/// it cold, so read-ahead is undetermined with the reason and the ways
/// that could still work, and the block size measured in the same run is
/// kept. On a disk directory, with fadvise: no root needed.
#[test]
fn a_cache_that_will_not_go_cold_loses_only_its_own_finding() {
    let d = fsprof_testkit::disk_tempdir();
    let mapper = Mapper::new(d.path(), "readahead");
    let opts = Options {
        dir: d.path().to_path_buf(),
        what: vec![Parameter::BlockSize, Parameter::Readahead],
        iterations: Some(2),
        device: None,
        cold: ColdChoice::Only(ColdMethod::Fadvise),
        cgroup_limit: None,
        command: vec!["test".into()],
    };
    let stop = || false;
    let r = discover(
        &opts,
        &mut Ctx {
            progress: &mut Silent,
            stop: &stop,
        },
    )
    .expect("the discovery ends with its findings");
    assert!(mapper.finish(), "the test file was mapped");
    let b = finding(&r, Parameter::BlockSize);
    assert_eq!(b.status, Status::Found, "{}", evidence(b));
    let f = finding(&r, Parameter::Readahead);
    assert_eq!(f.status, Status::Undetermined, "{}", evidence(f));
    let why = f.reason.as_deref().unwrap_or_default();
    assert!(
        why.contains("stayed cached after fadvise") && why.contains("--cold drop-caches"),
        "{why}"
    );
    assert!(f.value.is_none() && f.confidence.is_none());
    let text = fsprof_discover::render::text(&r);
    assert!(text.contains("undetermined"), "{text}");
}

/// Writes 16 MiB files with fsync into `dir` (as `dd bs=1M count=16
/// conv=fsync` in a loop) until dropped: I/O contention on the device
/// under test. A thread of this process, joined on drop, so that nothing
/// still writes when the image is unmounted.
struct BackgroundWriter {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl BackgroundWriter {
    fn new(dir: &Path) -> BackgroundWriter {
        use std::io::Write;
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s = stop.clone();
        let path = dir.join("bg");
        let thread = std::thread::spawn(move || {
            let chunk = vec![0u8; 1 << 20];
            while !s.load(Ordering::Relaxed) {
                let Ok(mut f) = std::fs::File::create(&path) else {
                    return;
                };
                for _ in 0..16 {
                    if s.load(Ordering::Relaxed) || f.write_all(&chunk).is_err() {
                        break;
                    }
                }
                let _ = f.sync_all();
                drop(f);
                let _ = std::fs::remove_file(&path);
            }
        });
        BackgroundWriter {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for BackgroundWriter {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What ten discoveries said about one parameter.
#[derive(Debug, Default)]
struct Tally {
    right: u32,
    wrong_sure: Vec<String>,
    wrong_low: u32,
    undetermined: u32,
    inconclusive: u32,
}

impl Tally {
    /// What fsdisco's sequential writes alone said on the same samples:
    /// the verdict before the lone writes cross-checked it.
    fn add_sequential_alone(&mut self, f: &Finding, block: u64, truth: u64) {
        use fsprof_discover::classify::Level;
        let Some((_, series)) = f.samples.iter().find(|(n, _)| n == "direct-blocks.write") else {
            return;
        };
        let inf = fsprof_discover::methods::direct_blocks::infer(series, block, 4096);
        match inf.count {
            Some(v) if v == truth => self.right += 1,
            Some(v) if inf.confidence.level == Level::Low => {
                let _ = v;
                self.wrong_low += 1
            }
            Some(v) => self
                .wrong_sure
                .push(format!("{v} {:?}", inf.confidence.level)),
            None => self.inconclusive += 1,
        }
    }

    fn add(&mut self, f: &Finding, truth: u64) {
        let level = f.confidence.as_ref().map(|c| c.level);
        match (f.status, f.value) {
            (Status::Found, Some(v)) if v == truth => self.right += 1,
            (Status::Found, Some(_)) if level == Some(fsprof_discover::classify::Level::Low) => {
                self.wrong_low += 1
            }
            (Status::Found, _) => self.wrong_sure.push(evidence(f)),
            (Status::Undetermined, _) => self.undetermined += 1,
            _ => self.inconclusive += 1,
        }
    }
}

/// Issue 24 §3: ten discoveries per ext2 block size while a background
/// writer loads the same device. No wrong answer may carry medium or high
/// confidence; the undetermined ones are counted (docs/benchmarks/
/// discover.md has the figures).
#[test]
#[ignore = "needs root, mkfs.ext2"]
fn under_a_background_writer_no_wrong_answer_is_medium_or_high() {
    need_root("loop-mounted images");
    need_program("mkfs.ext2", "e2fsprogs");
    let mut all = Vec::new();
    for block in [1024u64, 2048, 4096] {
        let b = block.to_string();
        let img = LoopImage::new("ext2", &["-q", "-F", "-b", &b], 128, "").unwrap();
        let writer = BackgroundWriter::new(&img.mount_point());
        let (mut size, mut direct, mut before) =
            (Tally::default(), Tally::default(), Tally::default());
        for _ in 0..10 {
            let r = run_fadvised(&img, &[Parameter::BlockSize, Parameter::DirectBlocks]);
            size.add(finding(&r, Parameter::BlockSize), block);
            let d = finding(&r, Parameter::DirectBlocks);
            direct.add(d, 12);
            before.add_sequential_alone(d, block, 12);
        }
        drop(writer);
        eprintln!(
            "ext2 {block}: block size {size:?}; direct blocks {direct:?}; the sequential writes alone {before:?}"
        );
        all.push((block, size, direct));
    }
    for (block, size, direct) in &all {
        assert!(
            size.wrong_sure.is_empty(),
            "ext2 {block} block size: {size:?}"
        );
        assert!(
            direct.wrong_sure.is_empty(),
            "ext2 {block} direct: {direct:?}"
        );
    }
}

/// Issue 24 §3, the second half: on xfs and ext4 at 1, 2 and 4 KiB blocks
/// (512 MiB images, `--device` given, so caches are emptied by remounting
/// the image), block size and read-ahead are both reported: each is the
/// truth (mkfs's block size; read-ahead within a page of the bdi's
/// read_ahead_kb), or says why not — never a wrong value at medium or high
/// confidence, never a lost finding.
#[test]
#[ignore = "needs root, mkfs.xfs, mkfs.ext4"]
fn xfs_and_ext4_at_every_block_size_keep_every_finding() {
    need_root("loop-mounted images, mounts");
    need_program("mkfs.xfs", "xfsprogs");
    need_program("mkfs.ext4", "e2fsprogs");
    for (fs, args) in [("xfs", ["-q", "-f", "-b"]), ("ext4", ["-q", "-F", "-b"])] {
        for block in [1024u64, 2048, 4096] {
            let size = match fs {
                "xfs" => format!("size={block}"),
                _ => block.to_string(),
            };
            let mut mkfs = args.to_vec();
            mkfs.push(&size);
            let img = LoopImage::new(fs, &mkfs, 512, "").unwrap();
            let r = run(
                &img,
                &[Parameter::BlockSize, Parameter::Readahead],
                None,
                ColdChoice::Auto,
                None,
            );
            assert_eq!(
                r.cold_cache,
                ColdMethod::Remount,
                "{fs} {block}: {}",
                r.cold_cache_why
            );
            let b = finding(&r, Parameter::BlockSize);
            let sure = |f: &Finding| {
                f.confidence
                    .as_ref()
                    .is_some_and(|c| c.level > fsprof_discover::classify::Level::Low)
            };
            match (b.status, b.value) {
                (Status::Found, Some(v)) => {
                    assert!(v == block || !sure(b), "{fs} {block}: {}", evidence(b))
                }
                (Status::Undetermined, None) => assert!(b.reason.is_some(), "{fs} {block}"),
                _ => panic!("{fs} {block}: block size {}", evidence(b)),
            }
            let ra = finding(&r, Parameter::Readahead);
            let setting = ra.kernel[0].value;
            match (ra.status, ra.value) {
                (Status::Found, Some(v)) => assert!(
                    v.abs_diff(setting) <= 4096 || !sure(ra),
                    "{fs} {block}: read-ahead {v} against {setting}: {}",
                    evidence(ra)
                ),
                (Status::Undetermined | Status::Inconclusive, None) => {
                    assert!(ra.reason.is_some(), "{fs} {block}: {}", evidence(ra))
                }
                _ => panic!("{fs} {block}: read-ahead {}", evidence(ra)),
            }
            eprintln!(
                "{fs} {block}: block size {:?} {:?} {:?}; read-ahead {:?} {:?} {:?} (setting {setting})",
                b.status,
                b.value,
                b.confidence.as_ref().map(|c| c.level),
                ra.status,
                ra.value,
                ra.confidence.as_ref().map(|c| c.level)
            );
        }
    }
}
