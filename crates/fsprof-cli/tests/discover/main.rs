//! `fsprof discover` as a user runs it: clean refusals (a missing or
//! unwritable DIR, outputs that exist, page cache on tmpfs, direct blocks on
//! extents, page cache without root), the JSON findings, the figures and
//! the latency profile, and cleanup when interrupted.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use fsprof_discover::testing::LoopImage;
use fsprof_testkit::{fsprof, fsprof_path, need_program, need_root};

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn finding<'a>(r: &'a serde_json::Value, p: &str) -> &'a serde_json::Value {
    r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["parameter"] == p)
        .unwrap_or_else(|| panic!("no {p} finding in {r}"))
}

/// `fsprof discover ARGS... PATHS...`, whatever its status.
fn discover(args: &[&str], paths: &[&Path]) -> std::process::Output {
    let mut c = fsprof();
    c.arg("discover").args(args).args(paths).output().unwrap()
}

fn one_line_error(o: &std::process::Output, needle: &str) {
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains(needle), "{err}");
}

#[test]
fn a_missing_dir_is_a_one_line_error() {
    one_line_error(&discover(&["/no/such/dir", "-q"], &[]), "/no/such/dir");
}

/// As root, permissions do not stop writes: the run is made as nobody.
#[test]
fn an_unwritable_dir_is_refused() {
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o555)).unwrap();
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let mut cmd = if root {
        let mut c = Command::new(need_program("setpriv", "util-linux"));
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(fsprof_path());
        c
    } else {
        fsprof()
    };
    let o = cmd
        .args(["discover", "--what", "block-size", "-q"])
        .arg(d.path())
        .output()
        .unwrap();
    one_line_error(&o, "is not writable");
}

#[test]
fn outputs_that_exist_are_refused_before_measuring() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("r.json");
    std::fs::write(&out, "mine").unwrap();
    let o = discover(&["--what", "block-size", "-q", "-o"], &[&out, d.path()]);
    one_line_error(&o, "exists");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "mine");
    let o = discover(&["--cgroup-limit", "1M", "."], &[]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
}

/// tmpfs has no device under its cache: page cache and read-ahead say so.
#[test]
fn page_cache_and_readahead_on_tmpfs_are_not_applicable() {
    // Every Linux with glibc has a tmpfs on /dev/shm (POSIX shared memory
    // lives there); a machine without it fails here rather than passing.
    let d = tempfile::tempdir_in("/dev/shm").expect("a tmpfs at /dev/shm");
    let out = d.path().join("r.json");
    // With -o the findings go to the file and the table to standard error.
    let what = ["--what", "page-cache,readahead,block-size", "-o"];
    let o = discover(&what, &[&out, d.path()]);
    assert!(o.status.success(), "{o:?}");
    let r = json(&out);
    for p in ["page-cache", "readahead"] {
        let f = finding(&r, p);
        assert_eq!(f["status"], "not-applicable", "{f}");
        assert!(f["reason"].as_str().unwrap().contains("tmpfs"), "{f}");
    }
    assert!(o.stdout.is_empty(), "{o:?}");
    let text = String::from_utf8_lossy(&o.stderr);
    assert!(text.contains("not applicable"), "{text}");
    // tmpfs's blocks are pages: the write period finds the page size, which
    // no direct read can confirm, so the finding is no more than medium.
    let b = finding(&r, "block-size");
    assert_eq!(b["value"], fsprof_sys::host::page_size(), "{b}");
    assert_eq!(b["confidence"]["level"], "medium", "{b}");
    assert!(b["notes"][0].as_str().unwrap().contains("page size"), "{b}");
}

/// Without root there is no cgroup, and free memory (GiBs) would need a
/// test file larger than fsprof writes: a refusal that says to use root.
#[test]
#[ignore = "needs root, setpriv"]
fn page_cache_without_root_asks_for_root_when_memory_is_large() {
    need_root("loop-mounted images, mounts, cgroups");
    need_program("setpriv", "util-linux");
    let avail = fsprof_sys::host::memory().available;
    assert!(
        avail * 5 / 4 > 4 << 30,
        "only {avail} bytes available: the refusal this test checks needs more than 3.2 GiB"
    );
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = d.path().join("r.json");
    let o = Command::new(need_program("setpriv", "util-linux"))
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(fsprof_path())
        .args(["discover", "--what", "page-cache", "-q", "-o"])
        .arg(&out)
        .arg(d.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let f = json(&out)["findings"][0].clone();
    assert_eq!(f["status"], "not-applicable", "{f}");
    assert!(f["reason"].as_str().unwrap().contains("run as root"), "{f}");
    assert_eq!(
        f["kernel"][0]["source"], "/proc/meminfo MemAvailable",
        "{f}"
    );
}

/// The whole output path on a real ext2: findings JSON (values, kernel
/// values, per-offset summaries), the figures with the boundary marked,
/// the HTML page and a latency profile `fsprof report` reads; on ext4 the
/// same run says direct blocks are not applicable.
#[test]
#[ignore = "needs root, mkfs.ext2"]
fn findings_figures_and_profile_from_an_ext2_image() {
    need_root("loop-mounted images, mounts, cgroups");
    need_program("mkfs.ext2", "e2fsprogs");
    let img = LoopImage::new("ext2", &["-q", "-F", "-b", "2048"], 64, "").unwrap();
    let d = tempfile::tempdir().unwrap();
    let (out, prof, plots) = (
        d.path().join("r.json"),
        d.path().join("p.json"),
        d.path().join("plots"),
    );
    let o = fsprof()
        .args([
            "discover",
            "--what",
            "direct-blocks,block-size",
            "--cold",
            "fadvise",
            "-o",
        ])
        .arg(&out)
        .arg("--profile")
        .arg(&prof)
        .arg("--plot-dir")
        .arg(&plots)
        .arg(img.mount_point())
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let r = json(&out);
    assert_eq!(r["format"], "fsprof-discovery");
    assert_eq!(r["cold_cache"], "fadvise");
    assert_eq!(r["target"]["fs_type"], "ext2");
    let b = finding(&r, "block-size");
    assert_eq!(b["value"], 2048, "{b}");
    assert_eq!(b["kernel"][0]["value"], 2048);
    assert!(
        b["confidence"]["statement"]
            .as_str()
            .unwrap()
            .contains("2 KiB block"),
        "{b}"
    );
    let curve = &b["curves"][0];
    assert_eq!(
        curve["x"].as_array().unwrap().len(),
        curve["min"].as_array().unwrap().len()
    );
    assert_eq!(curve["marks"][0]["at"], 2048.0);
    let d12 = finding(&r, "direct-blocks");
    assert_eq!(d12["value"], 12, "{d12}");
    // Direct blocks ran after block size, which it used.
    assert_eq!(r["findings"][0]["parameter"], "block-size");
    let text = String::from_utf8_lossy(&o.stderr);
    assert!(text.contains("2 KiB (statfs f_bsize)"), "{text}");

    let svg = std::fs::read_to_string(plots.join("block-size-1.svg")).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("block 2 KiB"),
        "{svg}"
    );
    let html = std::fs::read_to_string(plots.join("discovery.html")).unwrap();
    assert!(
        html.contains("<table>") && html.matches("<svg").count() >= 3,
        "figures in the page"
    );
    assert!(!html.contains("<script"), "no scripts");

    let rep = fsprof().arg("report").arg(&prof).output().unwrap();
    assert!(rep.status.success(), "{rep:?}");
    let rep =
        String::from_utf8_lossy(&rep.stdout).to_string() + &String::from_utf8_lossy(&rep.stderr);
    assert!(
        rep.contains("block-size.write") && rep.contains("direct-blocks.write"),
        "{rep}"
    );
    let p: serde_json::Value = json(&prof);
    let writes = p["layers"][0]["ops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "block-size.write")
        .unwrap()
        .clone();
    // Every write of every iteration: 20 iterations of 1 MiB in 256 B.
    assert_eq!(writes["post"], 20 * 4096);

    // Outputs exist now: refused without --force, replaced with it.
    let what = ["--what", "block-size", "-q", "--plot-dir"];
    let again = discover(&what, &[&plots, &img.mount_point()]);
    one_line_error(&again, "exists");
}

/// As root without --device, auto empties the whole machine's cache: it
/// says so on stderr once, before the first drop, and names the ways that
/// touch only the target (the image's own device, and fadvise). Asked for
/// fadvise, or with nothing to cool, it says nothing of the kind.
#[test]
#[ignore = "needs root, mkfs.ext4"]
fn machine_wide_drops_are_announced_with_the_ways_that_touch_only_the_target() {
    need_root("loop-mounted images, drop_caches");
    need_program("mkfs.ext4", "e2fsprogs");
    let img = LoopImage::new("ext4", &["-q", "-F"], 64, "").unwrap();
    let ra = ["--what", "readahead", "--iterations", "1", "-q"];
    let o = discover(&ra, &[&img.mount_point()]);
    assert!(o.status.success(), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("WHOLE MACHINE").count(), 1, "{err}");
    let device = format!("--device {}", img.device.display());
    assert!(
        err.contains("--cold fadvise") && err.contains(&device),
        "{err}"
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("cold cache: drop-caches"),
        "{o:?}"
    );
    for args in [
        &[
            "--what",
            "readahead",
            "--iterations",
            "1",
            "-q",
            "--cold",
            "fadvise",
        ][..],
        &["--what", "block-size", "--iterations", "2", "-q"][..],
    ] {
        let o = discover(args, &[&img.mount_point()]);
        assert!(o.status.success(), "{args:?}: {o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("WHOLE MACHINE"), "{args:?}: {err}");
    }
}

#[test]
#[ignore = "needs root, mkfs.ext4"]
fn direct_blocks_on_ext4_say_extents() {
    need_root("loop-mounted images, mounts, cgroups");
    need_program("mkfs.ext4", "e2fsprogs");
    let img = LoopImage::new("ext4", &["-q", "-F"], 64, "").unwrap();
    let o = discover(&["--what", "direct-blocks", "-q"], &[&img.mount_point()]);
    assert!(o.status.success(), "{o:?}");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("not applicable"), "{text}");
    assert!(text.contains("extents"), "{text}");
}

/// SIGTERM mid-run: exit 128+15, and neither the test files nor the
/// memory cgroup outlive fsprof.
#[test]
#[ignore = "needs root, mkfs.ext4"]
fn an_interrupted_discovery_cleans_up() {
    need_root("loop-mounted images, mounts, cgroups");
    need_program("mkfs.ext4", "e2fsprogs");
    let img = LoopImage::new("ext4", &["-q", "-F"], 160, "").unwrap();
    let child = fsprof()
        .args([
            "discover",
            "--what",
            "page-cache",
            "--cgroup-limit",
            "64M",
            "--cold",
            "fadvise",
            "--iterations",
            "50",
            "-q",
        ])
        .arg(img.mount_point())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the cgroup exists: the measurement is under way.
    let pid = child.id();
    let found = (0..200).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        cgroups_of(pid) > 0
    });
    assert!(found, "no cgroup appeared for fsprof {pid}");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(128 + libc::SIGTERM), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("interrupted"),
        "{o:?}"
    );
    assert_eq!(cgroups_of(pid), 0, "the cgroup outlived fsprof");
    let left: Vec<_> = std::fs::read_dir(img.mount_point())
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".fsprof-discover")
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Cgroups named after `pid` anywhere under /sys/fs/cgroup (v1 or v2).
fn cgroups_of(pid: u32) -> usize {
    fn walk(dir: &Path, name: &str, depth: u32) -> usize {
        if depth > 6 {
            return 0;
        }
        let Ok(rd) = std::fs::read_dir(dir) else {
            return 0;
        };
        rd.flatten()
            .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
            .map(|e| {
                usize::from(e.file_name().to_string_lossy().starts_with(name))
                    + walk(&e.path(), name, depth + 1)
            })
            .sum()
    }
    walk(
        Path::new("/sys/fs/cgroup"),
        &format!("fsprof-discover-{pid}-"),
        0,
    )
}

/// The remount path when it works: the image is mounted inside a private
/// mount namespace of the test's own, so no other process can hold a copy
/// of the mount, and every cooling must be a real remount — none may fall
/// back to fadvise (that the device was still held after an unmount would
/// be a false alarm here).
#[test]
#[ignore = "needs root, mkfs.ext4, unshare"]
fn remounts_in_a_private_namespace_need_no_fallback() {
    need_root("loop-mounted images, mounts, mount namespaces");
    need_program("mkfs.ext4", "e2fsprogs");
    need_program("unshare", "util-linux");
    let img = LoopImage::unmounted("ext4", &["-q", "-F"], 64).unwrap();
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("r.json");
    let o = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c"])
        .arg(
            "mount \"$1\" \"$2\" && exec \"$0\" discover \"$2\" --what readahead \
             --iterations 1 --device \"$1\" -q -o \"$3\"",
        )
        .arg(fsprof_path())
        .arg(&img.device)
        .arg(img.mount_point())
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let r = json(&out);
    assert_eq!(r["cold_cache"], "remount", "{}", r["cold_cache_why"]);
    assert!(r.get("cold_cache_fallback").is_none(), "{r}");
    let f = finding(&r, "readahead");
    assert!(
        !f["notes"].to_string().contains("remounts left"),
        "{}",
        f["notes"]
    );
    let found = f["value"].as_u64().unwrap_or_else(|| panic!("{f}"));
    let kernel = f["kernel"][0]["value"].as_u64().unwrap();
    assert!(
        found.abs_diff(kernel) <= 4096,
        "found {found}, kernel {kernel}: {f}"
    );
}
