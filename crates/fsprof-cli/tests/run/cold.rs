//! `fsprof run --cold PATHS`: the named files leave the page cache before
//! the command starts, verified; the device's own counters
//! (`/sys/block/loopN/stat`) show that the command then read them from the
//! device, where a warm run reads nothing. A file that cannot be made cold
//! stops the run before the command, naming why and what works.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::loopfs::LoopFs;
use fsprof_core::format::read_profile;
use fsprof_testkit::{fsprof, need_root, stderr};

const FILE_MIB: u64 = 8;

fn cat(args: &[&str], file: &Path, profile: &Path) -> Output {
    fsprof()
        .arg("run")
        .args(args)
        .args(["-q", "-f", "-o"])
        .arg(profile)
        .arg("--")
        .arg("cat")
        .arg(file)
        .stdout(Stdio::null())
        .output()
        .unwrap()
}

#[test]
#[ignore = "needs root"]
fn a_cold_run_reads_the_file_from_the_device_and_a_warm_one_does_not() {
    need_root("a loop mount");
    let fs = LoopFs::ext4(64);
    let file = fs.mnt().join("f");
    std::fs::write(&file, vec![0x5a; (FILE_MIB << 20) as usize]).unwrap();
    fs.settle();
    let out = tempfile::tempdir().unwrap();
    let profile = out.path().join("p.json");
    let sectors = FILE_MIB << 11;
    for round in 0..2 {
        // Cached before each cold run: just written, then read back warm.
        let before = fs.sectors_read();
        let o = cat(&["--cold", file.to_str().unwrap()], &file, &profile);
        let read = fs.sectors_read() - before;
        assert!(o.status.success(), "{}", stderr(&o));
        let said = stderr(&o);
        assert!(
            said.contains(&format!(
                "fsprof: cold: verified, 0 of {} pages cached (",
                sectors / 8
            )),
            "{said}"
        );
        assert!(
            read >= sectors,
            "round {round}: cold cat read {read} sectors of {sectors}"
        );
        let p = read_profile(&profile).unwrap();
        let cache = &p.meta.settings["cache"];
        assert!(cache.starts_with("cold: verified, 0 of "), "{cache}");

        let before = fs.sectors_read();
        let o = cat(&[], &file, &profile);
        let read = fs.sectors_read() - before;
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(
            read < sectors / 100,
            "round {round}: warm cat read {read} sectors"
        );
        assert!(!read_profile(&profile)
            .unwrap()
            .meta
            .settings
            .contains_key("cache"));
    }
}

/// tmpfs has no cold state: the run stops with exit 2 before the command
/// (which would have left a mark), saying why and what works.
#[test]
fn a_file_that_cannot_go_cold_stops_the_run_before_the_command() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let file = d.path().join("f");
    std::fs::write(&file, vec![1u8; 64 << 10]).unwrap();
    let mark = d.path().join("ran");
    let o = fsprof()
        .args(["run", "--cold"])
        .arg(&file)
        .args(["-q", "-o"])
        .arg(d.path().join("p.json"))
        .arg("--")
        .arg("touch")
        .arg(&mark)
        .output()
        .unwrap();
    let said = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{said}");
    assert!(!mark.exists(), "the command ran");
    assert!(!d.path().join("p.json").exists());
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(
        said.contains("cold: NOT reached, 16 of 16 pages still cached"),
        "{said}"
    );
    for says in [
        "tmpfs keeps files in memory",
        "What works: copy the files to a disk-backed",
    ] {
        assert!(said.contains(says), "{said}");
    }
}

#[test]
fn what_is_not_there_or_not_a_file_is_refused_by_name() {
    let d = tempfile::tempdir().unwrap();
    for (path, says) in [
        (
            "/nonexistent/fsprof-cold",
            "--cold /nonexistent/fsprof-cold: No such file",
        ),
        (
            "/dev/null",
            "--cold /dev/null: a character device, not a file or directory",
        ),
    ] {
        let o = Command::new(fsprof_testkit::fsprof_path())
            .current_dir(d.path())
            .args(["run", "--cold", path, "--", "true"])
            .output()
            .unwrap();
        let said = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{said}");
        assert!(said.starts_with(&format!("fsprof: {says}")), "{said}");
    }
    let o = fsprof()
        .args(["run", "--drop-caches", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--cold"), "{}", stderr(&o));
}
