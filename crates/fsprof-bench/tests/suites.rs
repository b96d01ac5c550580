//! The suites on real file systems: tmpfs, and ext4/xfs/btrfs images
//! loop-mounted by the test. They check structure and statistics — the
//! dropped first file, the discarded warm-up, the interval against a
//! reference computation, op counts against the workload's definition,
//! cold-cache verification — never speeds.

use std::path::{Path, PathBuf};
use std::process::Command;

use fsprof_bench::result::{BenchResult, LAYER};
use fsprof_bench::runner::{leftovers, NoProgress};
use fsprof_bench::Params;
use fsprof_core::Profile;
use fsprof_measure::cache::CacheMode;

fn run(p: &Params) -> (Profile, BenchResult) {
    fsprof_bench::run(p, vec!["test".into()], &mut NoProgress, &|| false).unwrap()
}

fn small_sprite(dir: &Path) -> Params {
    let mut p = Params {
        runs: 3,
        warmup: 1,
        ..Params::defaults("sprite", dir.to_path_buf())
    };
    p.set("files", 4)
        .set("file_size", 64 << 10)
        .set("io_size", 4096);
    p
}

/// t(0.975, 2) from a printed table (NIST e-Handbook): the reference the
/// result's interval is checked against.
const T_975_DF2: f64 = 4.303;

#[test]
fn sprite_drops_the_first_file_discards_warmup_and_its_interval_matches_a_reference() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let p = small_sprite(d.path());
    let (profile, r) = run(&p);
    let names: Vec<&str> = r.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "seq_write",
            "seq_read",
            "rand_write",
            "rand_read",
            "seq_reread"
        ]
    );
    let kept_bytes = 3.0 * (64 << 10) as f64;
    for ph in &r.phases {
        assert_eq!(ph.runs.len(), 3, "{}", ph.name);
        assert_eq!(ph.warmup_runs.len(), 1, "{}", ph.name);
        assert!(ph.first_file_dropped);
        assert_eq!(ph.file_ns.len(), 4, "warm-up + measured runs");
        // Each measured figure is files 2..4's bytes over their time:
        // recomputed here from the raw per-file times.
        for (k, fig) in ph.runs.iter().enumerate() {
            let files = &ph.file_ns[1 + k];
            assert_eq!(files.len(), 4);
            let ns: u64 = files[1..].iter().sum();
            let want = kept_bytes * 1e3 / ns as f64;
            assert!(
                (fig - want).abs() < 1e-9 * want,
                "{}: {fig} vs {want}",
                ph.name
            );
        }
        let w = &ph.file_ns[0][1..];
        let want = kept_bytes * 1e3 / w.iter().sum::<u64>() as f64;
        assert!((ph.warmup_runs[0] - want).abs() < 1e-9 * want);
        // The interval against a hand computation with a table's t.
        let n = 3.0;
        let mean = ph.runs.iter().sum::<f64>() / n;
        let sd = (ph.runs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        let half = T_975_DF2 * sd / n.sqrt();
        let ci = ph.summary.ci95.unwrap();
        assert!((ph.summary.mean - mean).abs() <= 1e-9 * mean);
        assert!(
            (ci.half_width - half).abs() <= 1e-3 * half,
            "{} vs {half}",
            ci.half_width
        );
    }
    // The profile holds the measured runs' ops of files 2..4 only:
    // 3 runs × 3 files × 16 I/Os; one fsync per file for writes.
    let layer = profile.layer(LAYER).unwrap();
    for name in [
        "seq_write",
        "seq_read",
        "rand_write",
        "rand_read",
        "seq_reread",
    ] {
        let op = layer.op(name).unwrap();
        assert_eq!(
            (op.pre, op.post, op.histogram.total()),
            (144, 144, 144),
            "{name}"
        );
    }
    assert_eq!(layer.op("seq_write:fsync").unwrap().post, 9);
    assert!(profile.meta.overhead.is_some());
    assert!(leftovers(d.path()).is_empty(), "scratch left behind");
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
}

/// `raw_samples` keeps every op's latency per run; those of the measured
/// runs' files 2..N rebuild the profile's histogram bucket for bucket
/// (buckets computed here with floats, not by fsprof). Without it the
/// result carries none.
#[test]
fn raw_samples_are_every_op_in_order_and_rebuild_the_histograms() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let p = Params {
        raw_samples: true,
        runs: 2,
        ..small_sprite(d.path())
    };
    let (profile, r) = run(&p);
    let layer = profile.layer(LAYER).unwrap();
    for ph in &r.phases {
        assert_eq!(ph.op_ns.len(), 3, "{}: warm-up + 2 runs", ph.name);
        assert!(ph.op_ns.iter().all(|v| v.len() == 4 * 16), "{}", ph.name);
        let mut want = std::collections::BTreeMap::new();
        for run in &ph.op_ns[1..] {
            for &ns in &run[16..] {
                let i = if ns <= 1 {
                    -1
                } else {
                    (ns as f64).log2().ceil() as i32 - 1
                };
                *want.entry(i).or_insert(0u64) += 1;
            }
        }
        let op = layer.op(&ph.name).unwrap();
        for (&i, &n) in &want {
            assert_eq!(op.histogram.get(i), n, "{} bucket {i}", ph.name);
        }
        assert_eq!(want.values().sum::<u64>(), op.post);
    }
    let (_, r) = run(&small_sprite(d.path()));
    assert!(r.phases.iter().all(|ph| ph.op_ns.is_empty()));
}

#[test]
fn cold_on_tmpfs_is_caught_and_the_warning_says_what_to_do() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let p = Params {
        cache: CacheMode::Cold,
        runs: 2,
        ..small_sprite(d.path())
    };
    let (_, r) = run(&p);
    let read = r.phases.iter().find(|p| p.name == "seq_read").unwrap();
    assert_eq!(read.cache.len(), 3);
    assert!(read
        .cache
        .iter()
        .all(|c| !c.passed && c.verified_by.is_some()));
    let w: Vec<_> = r
        .warnings
        .iter()
        .filter(|w| w.kind == "cold_failed")
        .collect();
    assert!(!w.is_empty());
    assert!(
        w[0].message.contains("tmpfs") && w[0].message.contains("--cache warm"),
        "{}",
        w[0].message
    );
    // The text says it too, with the pages that stayed.
    let text = fsprof_bench::export::text(&r);
    assert!(
        text.contains("cache: cold: NOT reached, 64 of 64 pages still cached (")
            && text.contains("12 of 12 checks FAILED"),
        "{text}"
    );
}

#[test]
fn metadata_counts_every_create_stat_and_unlink() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let mut p = Params::defaults("metadata", d.path().to_path_buf());
    (p.runs, p.warmup) = (2, 1);
    p.set("dirs", 8).set("files_per_dir", 4);
    let (profile, r) = run(&p);
    assert_eq!(r.phases.len(), 6);
    let layer = profile.layer(LAYER).unwrap();
    for ph in &r.phases {
        assert_eq!(ph.unit, "ops/s");
        assert_eq!(layer.op(&ph.name).unwrap().post, 2 * 32, "{}", ph.name);
    }
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
}

#[test]
fn pread_threads_each_do_their_ops() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let mut p = Params::defaults("pread", d.path().to_path_buf());
    (p.runs, p.cache) = (2, CacheMode::Warm);
    p.set("threads", 2).set("ops", 2000);
    let (profile, r) = run(&p);
    let op = profile.layer(LAYER).unwrap().op("pread").unwrap();
    assert_eq!(op.post, 2 * 2 * 2000);
    assert!(r.phases[0].cache.iter().all(|c| c.passed));
    assert!(r.phases[0].op_median_ns > 0.0);
}

/// One reader runs on the calling thread (no thread is spawned, see the
/// module doc); its loop reports its on-CPU share, and a share under the
/// limit raises a warning that names the cause and the fix.
#[test]
fn one_pread_reader_reports_its_cpu_share_and_a_low_share_is_warned() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let mut p = Params::defaults("pread", d.path().to_path_buf());
    p.runs = 2;
    p.set("ops", 3000);
    let (profile, mut r) = run(&p);
    assert_eq!(
        profile.layer(LAYER).unwrap().op("pread").unwrap().post,
        6000
    );
    let f = r.phases[0].on_cpu.expect("on_cpu measured");
    assert!(f > 0.0 && f <= 1.0, "{f}");
    let off = |r: &BenchResult| {
        fsprof_bench::warnings::all(r)
            .into_iter()
            .filter(|w| w.kind == "off_cpu")
            .collect::<Vec<_>>()
    };
    r.phases[0].on_cpu = Some(0.3);
    let w = off(&r);
    assert_eq!(w.len(), 1);
    assert!(
        w[0].message.contains("30%") && w[0].message.contains("taskset"),
        "{}",
        w[0].message
    );
    r.phases[0].on_cpu = Some(fsprof_bench::warnings::ON_CPU_LIMIT + 0.01);
    assert!(off(&r).is_empty());
}

/// A file system image loop-mounted for one test, unmounted on drop.
struct LoopFs {
    dir: tempfile::TempDir,
    mounted: bool,
}

impl LoopFs {
    fn new(kind: &str) -> LoopFs {
        let mkfs = format!("mkfs.{kind}");
        fsprof_testkit::need_root("a loop mount");
        let package = match kind {
            "ext4" => "e2fsprogs",
            "xfs" => "xfsprogs",
            _ => "btrfs-progs",
        };
        fsprof_testkit::need_program(&mkfs, package);
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let img = dir.path().join("img");
        // xfs wants at least 300 MiB; the image is sparse.
        std::fs::File::create(&img)
            .unwrap()
            .set_len(320 << 20)
            .unwrap();
        let quiet = match kind {
            "ext4" => vec!["-q", "-F"],
            "xfs" => vec!["-q", "-f"],
            _ => vec!["-q", "-f"],
        };
        let st = Command::new(&mkfs).args(&quiet).arg(&img).status().unwrap();
        assert!(st.success(), "{mkfs} failed");
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let st = Command::new("mount")
            .args(["-o", "loop"])
            .arg(&img)
            .arg(&mnt)
            .status()
            .unwrap();
        assert!(st.success(), "mount -o loop of the {kind} image failed");
        LoopFs { dir, mounted: true }
    }

    fn mnt(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg(self.mnt()).status();
        }
    }
}

/// On a device-backed file system, cold is reached (per-file fadvise) and
/// verified, and the result names the file system it ran on.
#[test]
#[ignore = "needs root, mkfs.ext4, mkfs.xfs, mkfs.btrfs"]
fn cold_is_reached_and_verified_on_loop_mounted_ext4_xfs_and_btrfs() {
    for kind in ["ext4", "xfs", "btrfs"] {
        let fs = LoopFs::new(kind);
        let p = Params {
            cache: CacheMode::Cold,
            runs: 2,
            ..small_sprite(&fs.mnt())
        };
        let (profile, r) = run(&p);
        assert_eq!(r.dir.fs_type, kind);
        assert!(r.dir.source.contains("loop"), "{:?}", r.dir);
        for ph in r.phases.iter().filter(|p| p.name != "seq_write") {
            assert_eq!(ph.cache.len(), 3, "{kind} {}", ph.name);
            for c in &ph.cache {
                assert!(c.passed, "{kind} {}: {c:?}", ph.name);
                assert_eq!(c.total_pages, 4 * 16, "{kind}");
                assert!(c.verified_by.is_some());
            }
        }
        assert!(
            !r.warnings.iter().any(|w| w.kind == "cold_failed"),
            "{kind}: {:?}",
            r.warnings
        );
        // "cold: verified, N of 64 pages cached" in the text, N the most
        // any check found (at most COLD_LIMIT of them).
        let text = fsprof_bench::export::text(&r);
        let worst = r
            .phases
            .iter()
            .flat_map(|p| &p.cache)
            .map(|c| c.cached_pages)
            .max();
        let line = format!(
            "cache: cold: verified, {} of 64 pages cached (",
            worst.unwrap()
        );
        assert!(
            text.contains(&line) && text.contains("all passed"),
            "{kind}: {line} in {text}"
        );
        assert_eq!(
            profile.layer(LAYER).unwrap().op("rand_read").unwrap().post,
            2 * 3 * 16
        );
        assert!(leftovers(&fs.mnt()).is_empty());
    }
}

/// A working set larger than the free space is refused before anything
/// is written.
#[test]
#[ignore = "needs root, mkfs.ext4"]
fn a_working_set_larger_than_free_space_is_refused_and_nothing_is_written() {
    let fs = LoopFs::new("ext4");
    let mut p = Params::defaults("sprite", fs.mnt());
    p.set("files", 11).set("file_size", 64 << 20);
    let e = fsprof_bench::run(&p, vec![], &mut NoProgress, &|| false).unwrap_err();
    assert!(
        e.to_string().contains("does not fit in the free space"),
        "{e}"
    );
    let names: Vec<_> = std::fs::read_dir(fs.mnt())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n != "lost+found")
        .collect();
    assert!(names.is_empty(), "{names:?}");
}

#[test]
fn an_interruption_stops_between_runs_and_leaves_nothing() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let calls = std::cell::Cell::new(0);
    let stop = || {
        calls.set(calls.get() + 1);
        calls.get() > 2
    };
    let e = fsprof_bench::run(&small_sprite(d.path()), vec![], &mut NoProgress, &stop).unwrap_err();
    assert!(e.to_string().contains("interrupted after 2 runs"), "{e}");
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
}
