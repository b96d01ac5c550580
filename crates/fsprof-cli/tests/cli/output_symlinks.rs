//! `-o NAME` never writes through NAME when NAME is a symbolic link, for
//! every command that writes a file: the link's target (here a 0600
//! canary, as /etc/shadow would be) keeps its bytes and its mode. Without
//! `--force` the command says NAME exists; with `--force` the link itself
//! is replaced by a regular file. As root the link is planted by another
//! user (nobody, through setpriv) in a directory that user owns, which is
//! the attack; without root the test plants it itself.
//!
//! A symbolic link in NAME's directory part is still followed
//! (`-o alias/p.json` with `alias -> real`): only the last component is
//! never resolved.

use std::ffi::OsString;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Output;

use fsprof_testkit::{fsprof, need_program, need_root, stderr};

const SECRET: &[u8] = b"SECRET: the canary's bytes\n";

/// A scratch directory: `canary` (0600, the test's own), and `u/`, the
/// directory the links are planted in (owned by nobody when run as root).
struct Scene {
    tmp: tempfile::TempDir,
    canary: PathBuf,
    planted_by_nobody: bool,
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

impl Scene {
    fn new() -> Scene {
        let tmp = tempfile::tempdir().unwrap();
        // Others may enter it (nobody plants links in u/), not list it.
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
        let canary = tmp.path().join("canary");
        std::fs::write(&canary, SECRET).unwrap();
        std::fs::set_permissions(&canary, std::fs::Permissions::from_mode(0o600)).unwrap();
        let u = tmp.path().join("u");
        std::fs::create_dir(&u).unwrap();
        let planted_by_nobody = euid() == 0;
        if planted_by_nobody {
            std::os::unix::fs::chown(&u, Some(65534), Some(65534)).unwrap();
        }
        Scene {
            tmp,
            canary,
            planted_by_nobody,
        }
    }

    fn dir(&self) -> &Path {
        self.tmp.path()
    }

    /// `u/NAME`, a symbolic link to the canary, planted by nobody as root.
    fn plant(&self, name: &str) -> PathBuf {
        let link = self.dir().join("u").join(name);
        let _ = std::fs::remove_file(&link);
        if self.planted_by_nobody {
            let o = std::process::Command::new(need_program("setpriv", "util-linux"))
                .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
                .arg("ln")
                .arg("-s")
                .arg(&self.canary)
                .arg(&link)
                .output()
                .unwrap();
            assert!(o.status.success(), "planting as nobody: {}", stderr(&o));
            assert_eq!(std::fs::symlink_metadata(&link).unwrap().uid(), 65534);
        } else {
            std::os::unix::fs::symlink(&self.canary, &link).unwrap();
        }
        link
    }

    /// The canary is as it was: its bytes, its mode, a regular file.
    #[track_caller]
    fn canary_untouched(&self, what: &str) {
        let m = std::fs::symlink_metadata(&self.canary).unwrap();
        assert!(m.file_type().is_file(), "{what}: the canary was replaced");
        assert_eq!(
            m.mode() & 0o7777,
            0o600,
            "{what}: the canary's mode changed"
        );
        assert_eq!(
            std::fs::read(&self.canary).unwrap(),
            SECRET,
            "{what}: wrote through the link into the canary"
        );
    }

    /// `fsprof ARGS` in the scene's directory; it must succeed; `made`.
    fn make(&self, args: &[OsString], made: PathBuf) -> PathBuf {
        let o = fsprof()
            .args(args)
            .current_dir(self.dir())
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        made
    }

    /// A profile of a small run, to give the commands that read one.
    fn profile(&self) -> PathBuf {
        let p = self.dir().join("p.json");
        self.make(&argv("run -q -o P -- cat /etc/hostname", &[("P", &p)]), p)
    }

    /// A trace of a small run (and its profile beside it).
    fn trace(&self) -> PathBuf {
        let t = self.dir().join("t.trace");
        let mut args = argv("trace -o T -- sh -c", &[("T", &t)]);
        args.push("echo x > f; cat f; rm f".into());
        self.make(&args, t)
    }

    /// A compiled trace.
    fn replay_file(&self) -> PathBuf {
        let (t, r) = (self.trace(), self.dir().join("t.replay"));
        self.make(&argv("compile T -o R", &[("T", &t), ("R", &r)]), r)
    }
}

/// The words of `spec` as arguments, each `(word, path)` of `paths`
/// standing for that path (`LINK` is left for the planted link).
fn argv(spec: &str, paths: &[(&str, &Path)]) -> Vec<OsString> {
    spec.split_whitespace()
        .map(|w| match paths.iter().find(|(k, _)| *k == w) {
            Some((_, p)) => p.as_os_str().to_os_string(),
            None => OsString::from(w),
        })
        .collect()
}

/// Runs `args` (`LINK` stands for the planted link) twice: without
/// `--force` (refused: NAME exists) and with it (the link, not its target,
/// replaced by a regular file).
fn against_a_planted_link(scene: &Scene, name: &str, args: &[OsString]) {
    for force in [false, true] {
        let link = scene.plant(name);
        let mut argv: Vec<OsString> = args
            .iter()
            .map(|a| {
                if a == "LINK" {
                    link.clone().into_os_string()
                } else {
                    a.clone()
                }
            })
            .collect();
        if force {
            // Before `--`, where a command follows.
            let at = argv.iter().position(|a| a == "--").unwrap_or(argv.len());
            argv.insert(at, "--force".into());
        }
        let o: Output = fsprof()
            .args(&argv)
            .current_dir(scene.dir())
            .output()
            .unwrap();
        let what = format!("fsprof {argv:?}");
        scene.canary_untouched(&what);
        let m = std::fs::symlink_metadata(&link).unwrap();
        if force {
            assert!(o.status.success(), "{what}: {}", stderr(&o));
            assert!(m.file_type().is_file(), "{what}: the link is still there");
            assert_eq!(m.mode() & 0o002, 0, "{what}: world-writable output");
            assert!(m.len() > 0, "{what}: an empty file");
        } else {
            assert_ne!(o.status.code(), Some(0), "{what}: succeeded");
            let err = stderr(&o);
            assert!(err.contains("exists"), "{what}: {err}");
            assert!(m.file_type().is_symlink(), "{what}: the link was replaced");
        }
    }
}

#[test]
fn run() {
    let s = Scene::new();
    against_a_planted_link(&s, "out.json", &argv("run -q -o LINK -- true", &[]));
}

/// The commands that read a profile or a trace, and `trace` itself.
#[test]
fn report_export_plot_merge_trace_compile_show() {
    let s = Scene::new();
    let (p, t) = (s.profile(), s.trace());
    let (profile, other) = (s.dir().join("trace-profile.json"), s.dir().join("t2.trace"));
    let at = [
        ("P", p.as_path()),
        ("T", t.as_path()),
        ("PROFILE", profile.as_path()),
        ("OTHER", other.as_path()),
    ];
    let cases = [
        ("report.txt", "report P -o LINK"),
        ("report.html", "report P --format html -o LINK"),
        ("metrics.txt", "export P --format prometheus -o LINK"),
        ("metrics.json", "export P --format otlp-json -o LINK"),
        ("read.svg", "plot P --op read -o LINK"),
        ("merged.json", "merge P -o LINK"),
        ("out.trace", "trace -o LINK --profile PROFILE -- true"),
        (
            "trace-profile.json",
            "trace -o OTHER --profile LINK -- true",
        ),
        ("out.replay", "compile T -o LINK"),
        ("calls.txt", "trace show T -o LINK"),
    ];
    for (name, spec) in cases {
        against_a_planted_link(&s, name, &argv(spec, &at));
    }
}

#[test]
fn import() {
    let s = Scene::new();
    let log = s.dir().join("fio.log");
    std::fs::write(
        &log,
        "fio version 2 iolog\nf add\nf open\nf write 0 4096\nf close\n",
    )
    .unwrap();
    let args = argv("import fio-iolog LOG -o LINK", &[("LOG", &log)]);
    against_a_planted_link(&s, "imported.trace", &args);
}

#[test]
fn replay_profile_and_timing() {
    let s = Scene::new();
    let r = s.replay_file();
    for (i, flag) in ["-o", "--timing"].into_iter().enumerate() {
        let root = s.dir().join(format!("root{i}"));
        std::fs::create_dir(&root).unwrap();
        let spec = format!("replay R --root ROOT --prepare --afap --verify off {flag} LINK");
        let args = argv(&spec, &[("R", &r), ("ROOT", &root)]);
        against_a_planted_link(&s, "replayed.json", &args);
    }
}

#[test]
fn bench() {
    let s = Scene::new();
    let work = tempfile::tempdir_in("/dev/shm").unwrap();
    let spec = "bench sprite --files 3 --file-size 32k --runs 3 --dir W -o LINK";
    against_a_planted_link(&s, "bench.json", &argv(spec, &[("W", work.path())]));
}

#[test]
fn discover_findings_and_profile() {
    let s = Scene::new();
    let work = tempfile::tempdir().unwrap();
    for flag in ["-o", "--profile"] {
        let spec =
            format!("discover --what block-size --iterations 1 --cold fadvise -q W {flag} LINK");
        against_a_planted_link(&s, "found.json", &argv(&spec, &[("W", work.path())]));
    }
}

#[test]
fn calibrate() {
    let s = Scene::new();
    let work = tempfile::tempdir().unwrap();
    let spec = "calibrate --rounds 2 --dir W -o LINK";
    against_a_planted_link(&s, "calibration.json", &argv(spec, &[("W", work.path())]));
}

/// The mount writes its profile at unmount (and at SIGUSR1), long after
/// `-o` was checked.
#[test]
#[ignore = "needs root, setpriv"]
fn mount_at_unmount() {
    need_root("a FUSE mount");
    let s = Scene::new();
    let (lower, mp) = (s.dir().join("lower"), s.dir().join("mnt"));
    std::fs::create_dir(&lower).unwrap();
    std::fs::create_dir(&mp).unwrap();
    for force in [false, true] {
        let link = s.plant("mount.json");
        let mut c = fsprof();
        c.arg("mount").arg(&lower).arg(&mp).arg("-o").arg(&link);
        if force {
            c.arg("--force");
        }
        let o = c.output().unwrap();
        let _detach = crate::mount_kit::Detach(mp.clone());
        if !force {
            assert_ne!(o.status.code(), Some(0), "mounted over an existing -o");
            assert!(stderr(&o).contains("exists"), "{}", stderr(&o));
            s.canary_untouched("mount without --force");
            continue;
        }
        assert!(o.status.success(), "{}", stderr(&o));
        let u = fsprof().arg("umount").arg(&mp).output().unwrap();
        assert!(u.status.success(), "{}", stderr(&u));
        s.canary_untouched("mount -f, at unmount");
        let m = std::fs::symlink_metadata(&link).unwrap();
        assert!(m.file_type().is_file(), "the link is still there");
    }
}

/// `fsprof kernel` writes through the same path as `run`; as root only.
#[test]
#[ignore = "needs root, setpriv"]
fn kernel() {
    need_root("eBPF");
    let s = Scene::new();
    against_a_planted_link(&s, "kernel.json", &argv("kernel -q -o LINK -- true", &[]));
}

/// Only the last component is never resolved: a directory reached through
/// a symbolic link is where the file goes, as before.
#[test]
fn a_symlinked_directory_part_is_followed() {
    let s = Scene::new();
    let real = s.dir().join("real");
    std::fs::create_dir(&real).unwrap();
    let alias = s.dir().join("alias");
    std::os::unix::fs::symlink(&real, &alias).unwrap();
    let o = fsprof()
        .args(["run", "-q", "-o"])
        .arg(alias.join("p.json"))
        .args(["--", "true"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::symlink_metadata(real.join("p.json"))
        .unwrap()
        .file_type()
        .is_file());
}

/// `fsprof man --dir DIR` installs pages, replacing what is there: a link
/// by a page's name is replaced, the file it points to never written.
#[test]
fn man_pages() {
    let s = Scene::new();
    let link = s.plant("fsprof.1");
    let o = fsprof()
        .args(["man", "--dir"])
        .arg(s.dir().join("u"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    s.canary_untouched("man --dir");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_file());
}
