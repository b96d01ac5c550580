//! `fsprof compile` and `fsprof replay`: a real program's tree rebuilt by
//! replaying its trace; cross-thread ordering kept; hostile traces kept
//! under the root; corrupt replay files refused.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Output;

use fsprof_testkit::{canonical_tempdir, compile, fsprof, need_program, HandTrace};
use fsprof_trace::event::{Call, Data};
use fsprof_trace::replayfile::Compiled;

fn run(args: &[&std::ffi::OsStr], dir: &Path) -> Output {
    fsprof().args(args).current_dir(dir).output().unwrap()
}

pub(super) fn ok(o: &Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "status {:?}: {err}", o.status);
    err
}

/// `fsprof trace OPTS... -o TRACE -- CMD...` in `dir`; it must succeed.
pub(super) fn trace_in(dir: &Path, opts: &[&str], trace: &Path, cmd: &[&std::ffi::OsStr]) {
    let mut c = fsprof();
    c.arg("trace")
        .args(opts)
        .arg("-o")
        .arg(trace)
        .arg("--")
        .args(cmd);
    ok(&c.current_dir(dir).output().unwrap());
}

/// `fsprof compile TRACE -o REPLAY` in `dir`; it must succeed; what it said.
pub(super) fn compile_trace(dir: &Path, trace: &Path, replay_file: &Path) -> String {
    ok(&run(
        &[
            os("compile"),
            trace.as_os_str(),
            os("-o"),
            replay_file.as_os_str(),
        ],
        dir,
    ))
}

/// Replay into an empty root, as fast as possible, every result checked.
pub(super) const STRICT: [&str; 4] = ["--prepare", "--afap", "--verify", "strict"];

/// `fsprof replay FILE --root ROOT OPTS...` in `dir`.
pub(super) fn replay(dir: &Path, file: &Path, root: &Path, opts: &[&str]) -> Output {
    fsprof()
        .arg("replay")
        .arg(file)
        .arg("--root")
        .arg(root)
        .args(opts)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn os(s: &str) -> &std::ffi::OsStr {
    std::ffi::OsStr::new(s)
}

/// Every entry under `dir`: type, permission bits, size, contents or target.
fn tree(dir: &Path) -> BTreeMap<PathBuf, (String, u32, u64, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(dir).unwrap().to_path_buf();
            let (kind, body) = if m.file_type().is_symlink() {
                (
                    "symlink",
                    std::fs::read_link(&p)
                        .unwrap()
                        .into_os_string()
                        .into_encoded_bytes(),
                )
            } else if m.is_dir() {
                stack.push(p.clone());
                ("dir", Vec::new())
            } else {
                ("file", std::fs::read(&p).unwrap())
            };
            let size = if kind == "dir" { 0 } else { m.len() };
            out.insert(rel, (kind.to_string(), m.mode() & 0o7777, size, body));
        }
    }
    out
}

#[test]
#[ignore = "needs tar"]
fn replaying_tar_extract_rebuilds_the_same_tree() {
    let tar = need_program("tar", "tar");
    let (_d, base) = canonical_tempdir();
    // The archive: nested directories, files of several sizes and modes,
    // an empty file and a symlink.
    let src = base.join("src");
    std::fs::create_dir_all(src.join("a/b/c")).unwrap();
    let files: [(&str, usize, u32); 5] = [
        ("top.txt", 13, 0o644),
        ("a/run.sh", 300, 0o755),
        ("a/b/private", 5000, 0o600),
        ("a/b/c/big.bin", 300_000, 0o640),
        ("a/empty", 0, 0o644),
    ];
    for (name, size, mode) in files {
        let bytes: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
        std::fs::write(src.join(name), bytes).unwrap();
        std::fs::set_permissions(src.join(name), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    std::os::unix::fs::symlink("b/private", src.join("a/link")).unwrap();
    let st = std::process::Command::new(&tar)
        .args(["-cf", "a.tar", "-C", "src", "."])
        .current_dir(&base)
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::create_dir(base.join("out")).unwrap();

    let t = base.join("x.trace");
    trace_in(
        &base,
        &["--data", "full"],
        &t,
        &[
            tar.as_os_str(),
            os("-xpf"),
            os("a.tar"),
            os("-C"),
            os("out"),
        ],
    );
    let r = base.join("x.replay");
    let msg = compile_trace(&base, &t, &r);
    assert!(msg.contains("% of raw"), "{msg}");
    let root = base.join("root");
    std::fs::create_dir(&root).unwrap();
    let msg = ok(&replay(&base, &r, &root, &STRICT));
    assert!(msg.contains("mismatches: 0"), "{msg}");
    let original = tree(&base.join("out"));
    let replayed = tree(&root.join(base.join("out").strip_prefix("/").unwrap()));
    assert_eq!(original.len(), 9, "{original:#?}");
    for (path, want) in &original {
        let got = replayed
            .get(path)
            .unwrap_or_else(|| panic!("{} missing in the replay", path.display()));
        assert_eq!(
            (&got.0, got.1, got.2),
            (&want.0, want.1, want.2),
            "{}",
            path.display()
        );
        assert!(got.3 == want.3, "{}: contents differ", path.display());
    }
    assert_eq!(original.len(), replayed.len());
    // Into a root that is not empty, --prepare refuses (nothing is overwritten).
    let o = replay(&base, &r, &root, &["--prepare"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not empty"));
}

#[test]
fn afap_replay_keeps_cross_thread_order() {
    let (_d, base) = canonical_tempdir();
    let exe = compile("trace_threads", &base, &["-pthread"]);
    let t = base.join("t.trace");
    trace_in(&base, &[], &t, &[exe.as_os_str(), os("2000")]);
    let r = base.join("t.replay");
    compile_trace(&base, &t, &r);
    let compiled = Compiled::read(&r).unwrap();
    assert!(
        compiled.header.threads >= 2,
        "the two threads replay on threads of their own"
    );
    // Each command's (replay thread, index in that thread's commands).
    let mut next = vec![0u32; compiled.header.threads as usize];
    let pos: Vec<(u32, u32)> = compiled
        .commands
        .iter()
        .map(|c| {
            next[c.thread as usize] += 1;
            (c.thread, next[c.thread as usize] - 1)
        })
        .collect();
    let dep = |i: usize| {
        let c = &compiled.commands[i];
        c.op.name().starts_with("open")
            && c.path
                .is_some_and(|p| compiled.strings[p as usize].ends_with(b"/dep"))
    };
    let create = (0..compiled.commands.len())
        .find(|&i| dep(i) && compiled.commands[i].flags & libc::O_CREAT as i64 != 0)
        .expect("the maker's create is replayed");
    let open = (0..compiled.commands.len())
        .find(|&i| dep(i) && compiled.commands[i].flags & libc::O_CREAT as i64 == 0)
        .expect("the user's open is replayed");
    assert_ne!(pos[create].0, pos[open].0, "on different replay threads");
    // The constraint itself: the user's open waits for the create (or a
    // later command of the maker's thread).
    assert!(
        compiled.commands[open]
            .waits
            .iter()
            .any(|&(t, k)| t == pos[create].0 && k >= pos[create].1),
        "the open waits for the create: {:?} vs {:?}",
        compiled.commands[open].waits,
        pos[create]
    );
    let into_new_root = |file: &Path, root: &Path| {
        std::fs::create_dir(root).unwrap();
        replay(&base, file, root, &STRICT)
    };
    let o = into_new_root(&r, &base.join("root1"));
    let msg = ok(&o);
    assert!(msg.contains("mismatches: 0"), "{msg}");
    // The replayer orders by the constraints it is given, not by luck:
    // with the constraint turned around (the create waits for the open),
    // the open runs before the file exists, every time. This is what the
    // compiled constraint prevents.
    // (A wait names an earlier command: the open moves up to just before
    // the create; each thread's own order is unchanged.)
    let mut reversed = compiled.clone();
    for c in &mut reversed.commands {
        c.waits.clear();
    }
    reversed.commands[create].waits = vec![pos[open]];
    assert!(create < open);
    let moved = reversed.commands.remove(open);
    reversed.commands.insert(create, moved);
    let rr = base.join("reversed.replay");
    reversed.write(&rr, false).unwrap();
    let o = into_new_root(&rr, &base.join("root2"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("replayed -1 ENOENT"), "{err}");
}

/// `c` relative to the working directory (AT_FDCWD), with its second path
/// (as traced and resolved) and open flags.
fn at_cwd(c: Call, path2: Option<&str>, flags: i64) -> Call {
    let path2 = path2.map(|p| p.as_bytes().to_vec());
    Call {
        fd: Some(-100),
        path2: path2.clone(),
        resolved2: path2,
        flags: Some(flags),
        ..c
    }
}

/// A trace that tries every way out of the root.
fn hostile_trace(path: &Path, outside: &Path) {
    let mut w = HandTrace::create(path, "full", "/");
    let o = outside.to_str().unwrap();
    // A symlink's target is `path2` (the outside directory when none).
    let mut call = |op: &str, path: &str, path2: Option<&str>, flags: i64, ret: i64| {
        let link = op == "symlink";
        let c = Call {
            name: link.then(|| path2.unwrap_or(o).as_bytes().to_vec()),
            mode: Some(0o644),
            ..at_cwd(
                w.next(1, op, Some(path), ret),
                path2.filter(|_| !link),
                flags,
            )
        };
        w.push(c);
    };
    let creat = (libc::O_CREAT | libc::O_WRONLY) as i64;
    call("openat", &format!("/../../../..{o}/dotdot"), None, creat, 3);
    call("close", "", None, 0, 0);
    call("mkdir", &format!("/..{o}/made"), None, 0, 0);
    call("symlink", "/escape", None, 0, 0);
    call("openat", "/escape/through-link", None, creat, 3);
    call("close", "", None, 0, 0);
    // A last component that is a symlink to a file outside, opened for
    // truncation through its cached parent: not followed there, and
    // followed from the root it lands inside.
    let keep = format!("{o}/keep");
    call("symlink", "/escape-file", Some(&keep), 0, 0);
    call(
        "openat",
        "/escape-file",
        None,
        creat | libc::O_TRUNC as i64,
        3,
    );
    call("unlink", &format!("/../..{o}/keep"), None, 0, 0);
    call(
        "rename",
        "/escape/../../../victim",
        Some(&format!("/..{o}/renamed")),
        0,
        0,
    );
    call(
        "openat",
        &format!("/proc/self/root{o}/magic"),
        None,
        creat,
        3,
    );
    call("truncate", &format!("/../{o}/keep"), None, 0, 0);
    call("chmod", "/escape/keep", None, 0, 0);
    // A descriptor first used with a path out of the root, written at a
    // position: reopened under the root like any open.
    let wr = libc::O_WRONLY as i64;
    w.push_descriptor(1, 7, &format!("/../..{o}/keep"), wr, 2);
    let mut write = w.next(1, "write", None, 6);
    (write.fd, write.len) = (Some(7), Some(6));
    write.data = Data::Full(b"gotcha".to_vec());
    w.push(write);
    w.finish();
}

#[test]
fn hostile_traces_cannot_touch_anything_outside_the_root() {
    let (_d, base) = canonical_tempdir();
    let outside = base.join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("keep"), "precious").unwrap();
    std::fs::write(base.join("victim"), "mine").unwrap();
    let before = tree(&base);
    let t = base.join("h.trace");
    hostile_trace(&t, &outside);
    let r = base.join("h.replay");
    compile_trace(&base, &t, &r);
    // Also a replay file made by hand, past the compiler's /proc filter.
    let mut c = Compiled::read(&r).unwrap();
    let magic = format!("/proc/self/root{}/magic2", outside.display());
    let id = c.strings.len() as u32;
    c.strings.push(magic.into_bytes());
    let mut open = c
        .commands
        .iter()
        .find(|k| k.op.is("openat"))
        .unwrap()
        .clone();
    open.path = Some(id);
    open.out = None;
    open.t_ns = c.commands.last().unwrap().t_ns + 1;
    c.commands.push(open);
    let hr = base.join("hand.replay");
    c.write(&hr, false).unwrap();
    for (file, root) in [(&r, "root1"), (&hr, "root2")] {
        let root = base.join(root);
        std::fs::create_dir(&root).unwrap();
        let o = replay(&base, file, &root, &["--prepare", "--afap"]);
        // Every way out failed or landed inside: results differ (exit 1).
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("differ from the trace"), "{err}");
        // The descriptor with a path out of the root was reopened (an open
        // and a seek to its position), under the root.
        assert!(err.contains("; 2 set-up command(s)"), "{err}");
    }
    let mut after = tree(&base);
    after.retain(|p, _| {
        !p.starts_with("root1")
            && !p.starts_with("root2")
            && p.extension().is_none_or(|e| e != "replay" && e != "trace")
    });
    let mut want = before.clone();
    want.retain(|p, _| p.extension().is_none_or(|e| e != "replay" && e != "trace"));
    assert_eq!(after, want, "nothing outside the roots changed");
    assert_eq!(
        std::fs::read_to_string(outside.join("keep")).unwrap(),
        "precious"
    );
    // Inside, `..` stopped at the root: the file landed under root1.
    let inside = base.join("root1").join(outside.strip_prefix("/").unwrap());
    assert!(
        inside.join("dotdot").exists(),
        "{:#?}",
        tree(&base.join("root1"))
    );
}

#[test]
fn corrupt_replay_files_are_refused_in_one_line() {
    let (_d, base) = canonical_tempdir();
    let t = base.join("h.trace");
    hostile_trace(&t, &base.join("nowhere"));
    let r = base.join("h.replay");
    compile_trace(&base, &t, &r);
    let bytes = std::fs::read(&r).unwrap();
    let root = base.join("root");
    std::fs::create_dir(&root).unwrap();
    let bad = base.join("bad.replay");
    for (what, content) in [
        ("truncated", bytes[..bytes.len() - 7].to_vec()),
        ("a trace", std::fs::read(&t).unwrap()),
        ("empty", Vec::new()),
    ] {
        std::fs::write(&bad, &content).unwrap();
        let o = replay(&base, &bad, &root, &[]);
        assert_eq!(o.status.code(), Some(2), "{what}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{what}: {err}");
    }
    let o = replay(&base, &r, Path::new("/no/such/dir"), &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a directory"));
}

/// One traced call: op, path, second path, flags, return value, errno.
type PlainCall<'a> = (&'a str, &'a str, Option<&'a str>, i64, i64, i32);

/// A single-thread trace of these calls.
fn plain_trace(path: &Path, calls: &[PlainCall]) {
    let mut w = HandTrace::create(path, "none", "/");
    for &(op, p, p2, flags, ret, errno) in calls {
        let c = Call {
            errno,
            mode: Some(0o755),
            ..at_cwd(w.next(1, op, Some(p), ret), p2, flags)
        };
        w.push(c);
    }
    w.finish();
}

/// The replayer keeps parent directories open between calls; a rename or
/// removal must make it look them up again, or a call on `/a/d/f` after
/// `/a/d` moved would act on the moved directory.
#[test]
fn cached_parent_directories_follow_renames_and_removals() {
    let (_d, base) = canonical_tempdir();
    let t = base.join("r.trace");
    let creat = (libc::O_CREAT | libc::O_WRONLY) as i64;
    let nofollow = libc::AT_SYMLINK_NOFOLLOW as i64;
    plain_trace(
        &t,
        &[
            ("mkdir", "/a", None, 0, 0, 0),
            ("mkdir", "/a/d", None, 0, 0, 0),
            ("openat", "/a/d/f", None, creat, 3, 0),
            ("close", "", None, 0, 0, 0),
            ("stat", "/a/d/f", None, 0, 0, 0),
            ("rename", "/a/d", Some("/a/e"), 0, 0, 0),
            ("stat", "/a/d/f", None, 0, -1, libc::ENOENT),
            ("mkdir", "/a/d", None, 0, 0, 0),
            ("stat", "/a/d/f", None, 0, -1, libc::ENOENT),
            ("stat", "/a/e/f", None, 0, 0, 0),
            ("unlink", "/a/e/f", None, 0, 0, 0),
            ("stat", "/a/e/f", None, nofollow, -1, libc::ENOENT),
            ("rmdir", "/a/e", None, 0, 0, 0),
            ("mkdir", "/a/e/g", None, 0, -1, libc::ENOENT),
        ],
    );
    let r = base.join("r.replay");
    compile_trace(&base, &t, &r);
    let root = base.join("root");
    std::fs::create_dir(&root).unwrap();
    let o = replay(&base, &r, &root, &["--afap", "--verify", "strict"]);
    let msg = ok(&o);
    assert!(msg.contains("mismatches: 0"), "{msg}");
    assert!(root.join("a/d").is_dir() && !root.join("a/d/f").exists());
    assert!(!root.join("a/e").exists());
}

/// Traces `exe` (`--data full`) run in `base/work`, compiles the trace and
/// replays it with [`STRICT`] into `base/root`; returns the trace and what
/// replay said.
fn trace_and_replay_strict(base: &Path, exe: &Path) -> (PathBuf, String) {
    let work = base.join("work");
    std::fs::create_dir(&work).unwrap();
    let t = base.join("c.trace");
    trace_in(&work, &["--data", "full"], &t, &[exe.as_os_str()]);
    let r = base.join("c.replay");
    compile_trace(base, &t, &r);
    let root = base.join("root");
    std::fs::create_dir(&root).unwrap();
    let msgs = ok(&replay(base, &r, &root, &STRICT));
    // The report ends with the fidelity comparison, op by op; stderr is
    // not a terminal, so no progress bar is drawn into it.
    let fidelity = msgs
        .split("fidelity: the trace's latencies (A) vs the replay's (B), per op:")
        .nth(1)
        .unwrap_or_else(|| panic!("no fidelity comparison: {msgs}"));
    assert!(fidelity.contains("open"), "{fidelity}");
    assert!(!msgs.contains('\r') && !msgs.contains('\u{1b}'), "{msgs:?}");
    (t, msgs)
}

/// Calls that name an entry keep a trailing slash too: `unlink("file/")`,
/// `rename("file/", …)`, `link("dir/", …)`, `readlink("file/")` fail as
/// traced (the replayer used to drop the slash, so `unlink("file/")`
/// removed the file), and `rmdir`/`mkdir`/`rename` of `dir/` succeed.
#[test]
fn entry_calls_with_trailing_slashes_replay_with_their_traced_results() {
    let (_d, base) = canonical_tempdir();
    let exe = fsprof_testkit::compile_source(
        "entry_slashes",
        r#"#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
int main(void) {
    char buf[64];
    int f = open("file", O_CREAT | O_WRONLY | O_EXCL, 0644);
    if (f < 0 || close(f) != 0 || mkdir("dir", 0755) != 0) return 1;
    if (symlink("dir", "ldir") != 0 || symlink("file", "lfile") != 0) return 1;
    if (unlink("file/") != -1 || errno != ENOTDIR) return 2;
    if (rename("file/", "moved") != -1 || errno != ENOTDIR) return 3;
    if (rename("file", "moved/") != -1 || errno != ENOTDIR) return 4;
    if (rmdir("file/") != -1 || errno != ENOTDIR) return 5;
    if (link("file/", "hard") != -1 || errno != ENOTDIR) return 6;
    if (link("ldir/", "hard") != -1 || errno != EPERM) return 7;
    if (link("file", "hard/") != -1 || errno != ENOENT) return 8;
    if (readlink("lfile/", buf, sizeof buf) != -1 || errno != ENOTDIR) return 9;
    if (readlink("ldir/", buf, sizeof buf) != -1 || errno != EINVAL) return 10;
    if (unlink("dir/") != -1 || errno != EISDIR) return 11;
    if (symlink("file", "new/") != -1 || errno != ENOENT) return 12;
    if (mkdir("made/", 0755) != 0 || rename("made/", "renamed/") != 0) return 13;
    if (rmdir("renamed/") != 0 || rename("dir/", "dir2") != 0) return 14;
    return 0;
}
"#,
        &base,
        &[],
    );
    let (t, msgs) = trace_and_replay_strict(&base, &exe);
    let slashed = |p: &Option<Vec<u8>>| p.as_deref().is_some_and(|p| p.ends_with(b"/"));
    let calls: Vec<(String, i32)> = fsprof_trace::TraceReader::open(&t)
        .unwrap()
        .filter_map(|r| match r.unwrap() {
            fsprof_trace::Record::Call(c) if slashed(&c.path) || slashed(&c.path2) => {
                Some((c.op.name().to_string(), c.errno))
            }
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 15, "{calls:?}");
    assert!(msgs.contains("mismatches: 0"), "{msgs}");
    let work = base
        .join("root")
        .join(base.strip_prefix("/").unwrap())
        .join("work");
    assert!(work.join("file").is_file(), "unlink(\"file/\") left it");
    assert!(work.join("dir2").is_dir() && !work.join("hard").exists());
    assert!(!work.join("made").exists() && !work.join("renamed").exists());
}

/// `--realtime` runs every replay thread under SCHED_FIFO (the report
/// counts them); where that is not permitted (CAP_SYS_NICE dropped from
/// the bounding set, RLIMIT_RTPRIO 0) it is refused in one line, exit 2,
/// before anything is made under the root.
#[test]
fn realtime_replay_runs_under_sched_fifo_or_is_refused_in_one_line() {
    fsprof_testkit::need_root("SCHED_FIFO");
    let setpriv = need_program("setpriv", "util-linux");
    let (_d, base) = canonical_tempdir();
    let work = base.join("work");
    std::fs::create_dir(&work).unwrap();
    let t = base.join("rt.trace");
    let script = "echo hello > f; cat f > g; mkdir d";
    trace_in(&work, &[], &t, &[os("sh"), os("-c"), os(script)]);
    let r = base.join("rt.replay");
    compile_trace(&base, &t, &r);
    let root = base.join("root");
    std::fs::create_dir(&root).unwrap();
    let err = ok(&replay(&base, &r, &root, &["--prepare", "--realtime"]));
    let line = err
        .lines()
        .find(|l| l.contains("replay threads: "))
        .unwrap_or_else(|| panic!("{err}"));
    let threads: u64 = line
        .split("replay threads: ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(
        threads >= 2,
        "sh and cat replay on threads of their own: {line}"
    );
    assert!(
        line.ends_with(&format!(", {threads} under SCHED_FIFO")),
        "{line}"
    );
    let plain = base.join("plain");
    std::fs::create_dir(&plain).unwrap();
    let err = ok(&replay(&base, &r, &plain, &["--prepare"]));
    assert!(!err.contains("SCHED_FIFO"), "{err}");

    let refused = base.join("refused");
    std::fs::create_dir(&refused).unwrap();
    let mut c = std::process::Command::new(setpriv);
    c.args(["--bounding-set", "-sys_nice", "--"])
        .arg(fsprof_testkit::fsprof_path())
        .arg("replay")
        .arg(&r)
        .arg("--root")
        .arg(&refused)
        .args(["--prepare", "--realtime"])
        .current_dir(&base);
    // SAFETY: setrlimit only, between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut c, || {
            let none = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            if libc::setrlimit(libc::RLIMIT_RTPRIO, &none) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let o = c.output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--realtime: SCHED_FIFO priority 10 is not permitted"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_dir(&refused).unwrap().count(),
        0,
        "nothing prepared"
    );
}

/// `sendfile` and `copy_file_range` replay with their input and output
/// the right way round (the trace's fd is the file read, its second fd the
/// output, from the op vocabulary's roles).
#[test]
fn sendfile_and_copy_file_range_replay_into_their_outputs() {
    let (_d, base) = canonical_tempdir();
    let msg = "sendfile and copy_file_range carry these bytes\n";
    let exe = fsprof_testkit::compile_source(
        "copies",
        &format!(
            r#"#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <sys/sendfile.h>
#include <unistd.h>
int main(void) {{
    const char *msg = "{}";
    ssize_t n = strlen(msg);
    int s = open("src", O_CREAT | O_RDWR | O_TRUNC, 0644);
    int a = open("a", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    int b = open("b", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (s < 0 || a < 0 || b < 0 || write(s, msg, n) != n) return 1;
    lseek(s, 0, SEEK_SET);
    if (sendfile(a, s, NULL, 4096) != n) return 2;
    lseek(s, 0, SEEK_SET);
    if (copy_file_range(s, NULL, b, NULL, 4096, 0) != n) return 3;
    return close(s) | close(a) | close(b);
}}
"#,
            msg.trim_end().to_owned() + "\\n"
        ),
        &base,
        &[],
    );
    let (work, root) = (base.join("work"), base.join("root"));
    let (_, msgs) = trace_and_replay_strict(&base, &exe);
    assert_eq!(std::fs::read_to_string(work.join("a")).unwrap(), msg);
    assert!(msgs.contains("mismatches: 0"), "{msgs}");
    let inside = root.join(work.strip_prefix("/").unwrap());
    for f in ["a", "b"] {
        assert_eq!(std::fs::read_to_string(inside.join(f)).unwrap(), msg, "{f}");
    }
}

/// A path with a trailing slash resolves only to a directory: `stat` and
/// `open` of `file/` fail with ENOTDIR, of `dir/` succeed. The compiled
/// commands keep the slash, so the replay gets the traced results (it used
/// to normalise `file/` to `file`, and the calls succeeded).
#[test]
fn trailing_slashes_replay_with_their_traced_results() {
    let (_d, base) = canonical_tempdir();
    let exe = fsprof_testkit::compile_source(
        "slashes",
        r#"#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
int main(void) {
    struct stat st;
    int f = open("file", O_CREAT | O_WRONLY | O_EXCL, 0644);
    if (f < 0 || mkdir("dir", 0755) != 0 || close(f) != 0) return 1;
    if (stat("file/", &st) != -1 || errno != ENOTDIR) return 2;
    if (open("file/", O_RDONLY) != -1 || errno != ENOTDIR) return 3;
    if (stat("file/.", &st) != -1 || errno != ENOTDIR) return 4;
    if (stat("dir/", &st) != 0 || stat("dir/.", &st) != 0) return 5;
    int d = open("dir/", O_RDONLY);
    if (d < 0) return 6;
    return close(d);
}
"#,
        &base,
        &[],
    );
    let (t, msgs) = trace_and_replay_strict(&base, &exe);
    let calls: Vec<Call> = fsprof_trace::TraceReader::open(&t)
        .unwrap()
        .filter_map(|r| match r.unwrap() {
            fsprof_trace::Record::Call(c) => Some(c),
            _ => None,
        })
        .collect();
    let results = |path: &str| {
        calls
            .iter()
            .filter(|c| c.path.as_deref() == Some(path.as_bytes()))
            .map(|c| (c.op.name(), c.errno))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        results("file/"),
        [("stat", libc::ENOTDIR), ("open", libc::ENOTDIR)]
    );
    assert_eq!(results("dir/"), [("stat", 0), ("open", 0)]);
    assert!(msgs.contains("mismatches: 0"), "{msgs}");
    let work = base
        .join("root")
        .join(base.strip_prefix("/").unwrap())
        .join("work");
    assert!(work.join("dir").is_dir() && work.join("file").is_file());
}

/// On a terminal the replay draws its progress bar (indicatif, on stderr):
/// the other replay tests hold it off a pipe; this one gives `fsprof
/// replay` a pseudo-terminal through `script(1)` and looks for the bar's
/// line in what the terminal received.
#[test]
#[ignore = "needs script"]
fn a_replay_on_a_terminal_draws_its_progress_bar() {
    let script = need_program("script", "bsdutils");
    let (_d, base) = canonical_tempdir();
    let t = base.join("p.trace");
    let mut calls: Vec<PlainCall> = vec![("mkdir", "/d", None, 0, 0, 0)];
    calls.extend((0..200).map(|_| ("stat", "/d", None, 0, 0, 0)));
    plain_trace(&t, &calls);
    let r = base.join("p.replay");
    compile_trace(&base, &t, &r);
    let root = base.join("root");
    std::fs::create_dir(&root).unwrap();
    // Every path is a canonical temporary directory or the test binary's
    // target directory: no quote to escape for script's `sh -c`.
    let line = format!(
        "'{}' replay '{}' --root '{}' --afap --verify strict",
        fsprof_testkit::fsprof_path().display(),
        r.display(),
        root.display()
    );
    let o = std::process::Command::new(script)
        .args(["-q", "-e", "-c", &line, "/dev/null"])
        .env("XDG_CONFIG_HOME", "/nonexistent-fsprof-test")
        .stdin(std::process::Stdio::null())
        .current_dir(&base)
        .output()
        .unwrap();
    let tty = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "status {:?}: {tty}", o.status);
    assert!(tty.contains("mismatches: 0"), "{tty}");
    let bar = tty
        .split(['\r', '\n'])
        .find(|l| l.contains("replay") && l.contains(" commands, "))
        .unwrap_or_else(|| panic!("no progress bar drawn on the terminal: {tty:?}"));
    // The mkdir and the 200 stats.
    assert!(bar.contains("/201 commands"), "{bar:?}");
}

/// Opens go through their cached parent directory and the last component
/// unfollowed; a symlink there (relative, absolute, to a directory, one
/// created during the replay in place of a renamed directory, a dangling
/// one an O_CREAT follows) still resolves from the root, O_NOFOLLOW still
/// refuses it, a `stat` follows it where `lstat` does not (a dangling one:
/// ENOENT and the link), and every result is the traced one.
#[test]
fn opens_through_symlinks_replay_with_their_traced_results() {
    let (_d, base) = canonical_tempdir();
    let exe = c_program(&base, "links", LINKS_C);
    let (work, root) = (base.join("work"), base.join("root"));
    let (_, msgs) = trace_and_replay_strict(&base, &exe);
    assert!(msgs.contains("mismatches: 0"), "{msgs}");
    let inside = root.join(work.strip_prefix("/").unwrap());
    assert!(inside.join("d/new-target").is_file(), "{msgs}");
    assert!(inside.join("d/moved/file").is_file(), "{msgs}");
    assert_eq!(
        std::fs::read_link(inside.join("d/sub")).unwrap(),
        Path::new("moved")
    );
}

/// A program that maps a file shared, stores through the mapping, msyncs
/// and unmaps it: `compile` replays mmap, msync and munmap (it used to
/// leave them out), and the replay re-creates the mapping on its own file
/// under the root with the traced length and flags.
#[test]
fn mmap_msync_and_munmap_replay_on_the_file_under_the_root() {
    let (_d, base) = canonical_tempdir();
    let exe = c_program(&base, "mm", MMAP_C);
    let (t, msgs) = trace_and_replay_strict(&base, &exe);
    assert!(msgs.contains("mismatches: 0"), "{msgs}");
    let r = base.join("c.replay");
    let compiled = Compiled::read(&r).unwrap();
    let ops: Vec<&str> = compiled.commands.iter().map(|c| c.op.name()).collect();
    for op in ["mmap", "msync", "munmap"] {
        assert!(ops.contains(&op), "{op} not compiled: {ops:?}");
    }
    assert!(
        !compiled.header.skipped.keys().any(|k| k.contains("mmap")),
        "{:?}",
        compiled.header.skipped
    );
    let msync = compiled.commands.iter().find(|c| c.op.is("msync")).unwrap();
    assert_eq!((msync.offset, msync.len), (8192, 4096));
    drop(t);
    // A hand-made file asking for more than the replayer maps, or for a
    // range outside its mapping: refused with the kernel's errno, not a
    // crash, and reported as differences.
    let mut c = compiled.clone();
    for cmd in c.commands.iter_mut() {
        if cmd.op.is("mmap") {
            cmd.len = 1 << 50;
        }
    }
    let mut d = compiled.clone();
    for cmd in d.commands.iter_mut() {
        if cmd.op.is("msync") {
            cmd.offset = 1 << 30;
        }
    }
    for (name, file, want) in [("huge", &c, "mmap"), ("outside", &d, "msync")] {
        let path = base.join(format!("{name}.replay"));
        file.write(&path, false).unwrap();
        let root = base.join(format!("root-{name}"));
        std::fs::create_dir(&root).unwrap();
        let o = replay(&base, &path, &root, &["--prepare", "--afap"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{name}: {err}");
        assert!(
            err.contains(&format!("{want}(")) && err.contains("replayed -1 ENOMEM"),
            "{name}: {err}"
        );
    }
}

/// A C program built from `src` in `base`.
pub(super) fn c_program(base: &Path, name: &str, src: &str) -> PathBuf {
    fsprof_testkit::compile_source(name, src, base, &[])
}

const LINKS_C: &str = r#"#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
static int fail(int line) { fprintf(stderr, "line %d: %d\n", line, errno); return 1; }
#define CHECK(x) do { if (!(x)) return fail(__LINE__); } while (0)
int main(void) {
    char cwd[4096], abs[4200];
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    CHECK(mkdir("d", 0755) == 0 && mkdir("d/sub", 0755) == 0);
    int f = open("d/sub/file", O_CREAT | O_WRONLY, 0644);
    CHECK(f >= 0 && write(f, "x", 1) == 1 && close(f) == 0);
    CHECK(symlink("sub/file", "d/rel") == 0);
    snprintf(abs, sizeof abs, "%s/d/sub", cwd);
    CHECK(symlink(abs, "d/abs") == 0);
    CHECK((f = open("d/rel", O_RDONLY)) >= 0 && close(f) == 0);
    DIR *dd = opendir("d/abs");
    CHECK(dd != NULL && closedir(dd) == 0);
    CHECK(open("d/rel", O_RDONLY | O_NOFOLLOW) == -1 && errno == ELOOP);
    CHECK(open("d/rel", O_RDONLY | O_DIRECTORY) == -1 && errno == ENOTDIR);
    CHECK(symlink("new-target", "d/dangling") == 0);
    struct stat st;
    CHECK(stat("d/dangling", &st) == -1 && errno == ENOENT);
    CHECK(lstat("d/dangling", &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(stat("d/rel", &st) == 0 && S_ISREG(st.st_mode));
    CHECK((f = open("d/dangling", O_CREAT | O_WRONLY, 0644)) >= 0 && close(f) == 0);
    CHECK(rename("d/sub", "d/moved") == 0);
    CHECK(open("d/sub/file", O_RDONLY) == -1 && errno == ENOENT);
    CHECK((f = open("d/moved/file", O_RDONLY)) >= 0 && close(f) == 0);
    CHECK(symlink("moved", "d/sub") == 0);
    CHECK((f = open("d/sub/file", O_RDONLY)) >= 0 && close(f) == 0);
    return 0;
}
"#;

const MMAP_C: &str = r#"#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
int main(void) {
    int fd = open("data.bin", O_CREAT | O_RDWR | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, 1 << 20) != 0) return 1;
    char *m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) return 2;
    close(fd);
    for (int p = 0; p < 256; p++) m[p * 4096] = (char)p;
    if (msync(m + 8192, 4096, MS_SYNC) != 0 || msync(m, 1 << 20, MS_SYNC) != 0) return 3;
    return munmap(m, 1 << 20);
}
"#;

/// Directory streams as `tar` and `find` use them: a directory opened,
/// made a stream with `fdopendir`, read to its end with `readdir` (and
/// once more past it: NULL with errno 0), closed with `closedir`; and
/// `fdopendir` of a regular file, which fails with ENOTDIR. The replay
/// makes the same libc calls on its own streams (made ready before their
/// time, the slot changing hands after the call), with every traced
/// result: a stream not filled into its slot, or the end of a stream
/// taken for an error, is a mismatch here.
#[test]
fn directory_streams_replay_with_their_traced_results() {
    let (_d, base) = canonical_tempdir();
    let msgs = trace_and_replay_strict(&base, &c_program(&base, "dirs", DIRS_C)).1;
    let fidelity = msgs.split("fidelity:").nth(1).unwrap_or_default();
    for op in ["fdopendir", "readdir", "closedir"] {
        assert!(fidelity.contains(op), "{op} not replayed: {msgs}");
    }
    assert!(msgs.contains("mismatches: 0"), "{msgs}");
}

const DIRS_C: &str = r#"#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
static int fail(int line) { fprintf(stderr, "line %d: %d\n", line, errno); return 1; }
#define CHECK(x) do { if (!(x)) return fail(__LINE__); } while (0)
int main(void) {
    char name[32];
    CHECK(mkdir("d", 0755) == 0);
    for (int i = 0; i < 40; i++) {
        snprintf(name, sizeof name, "d/f%d", i);
        int f = open(name, O_CREAT | O_WRONLY, 0644);
        CHECK(f >= 0 && close(f) == 0);
    }
    for (int round = 0; round < 2; round++) {
        int fd = open("d", O_RDONLY | O_DIRECTORY);
        CHECK(fd >= 0);
        DIR *dp = fdopendir(fd);
        CHECK(dp != NULL);
        int n = 0;
        errno = 0;
        while (readdir(dp) != NULL)
            n++;
        CHECK(errno == 0 && n == 42);
        CHECK(readdir(dp) == NULL && errno == 0);
        CHECK(closedir(dp) == 0);
    }
    int f = open("d/f0", O_RDONLY);
    CHECK(f >= 0);
    CHECK(fdopendir(f) == NULL && errno == ENOTDIR);
    CHECK(close(f) == 0);
    return 0;
}
"#;

/// A trace records descriptors at their first use, not each image's table:
/// a forked child's write to a file its parent opened, and an exec'd
/// image's write to a file the image
/// before it opened, still replay onto those files.
#[test]
fn writes_through_descriptors_a_fork_or_an_exec_kept_replay_onto_their_files() {
    let (_d, base) = canonical_tempdir();
    let exe = c_program(
        &base,
        "kept_fds",
        r#"#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc > 1)
        return write(atoi(argv[1]), "exec'd", 6) == 6 ? 0 : 1;
    int out = open("out", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    int kept = open("kept", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (out < 0 || kept < 0) return 2;
    pid_t k = fork();
    if (k == 0)
        _exit(write(out, "child", 5) == 5 ? 0 : 4);
    int status;
    if (waitpid(k, &status, 0) != k || status != 0 || close(out)) return 6;
    char n[16];
    snprintf(n, sizeof n, "%d", kept);
    execl(argv[0], argv[0], n, (char *)0);
    return 7;
}
"#,
    );
    let (_t, msgs) = trace_and_replay_strict(&base, &exe);
    assert!(msgs.contains("mismatches: 0"), "{msgs}");
    let work = base
        .join("root")
        .join(base.strip_prefix("/").unwrap())
        .join("work");
    let read = |name: &str| std::fs::read(work.join(name)).unwrap_or_default();
    assert_eq!(read("out"), b"child", "the forked child's write: {msgs}");
    assert_eq!(read("kept"), b"exec'd", "the exec'd image's write: {msgs}");
}
