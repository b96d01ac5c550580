//! A process that outlives its run keeps FSPROF_SHM, and the run
//! directory's name under /dev/shm is visible to every user. Once the run
//! is over, another user can put a directory (with a forged control file)
//! or a symlink where the run directory was. Root's surviving processes
//! must then neither crash nor create files anywhere: the shim accepts the
//! run directory only by its identity (device, inode, owner, mode), never
//! by its name, and stops recording when the run is over.
//!
//! Runs as root with a throwaway unprivileged user (nobody, through
//! setpriv), as the attack needs two users.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use fsprof_shim::abi;
use fsprof_testkit::{fsprof, need_program, need_root, succeeds};

/// Root, setpriv, unshare and Debian's python3 (which nobody can run).
fn need_all() {
    need_root("a second user attacks root's run");
    need_program("setpriv", "util-linux");
    need_program("unshare", "util-linux");
    fsprof_testkit::need_file(Path::new("/usr/bin/python3"), "python3");
}

/// A daemon the profiled command leaves behind: it writes its FSPROF_SHM
/// to `dir/shm`, waits for `dir/go`, then forks a child that reads a file
/// and runs `cat` (fork + exec), and writes both exit statuses to
/// `dir/status`.
const DAEMON: &str = r#"
import os, sys, time, subprocess
d = sys.argv[1]
open(d + '/shm', 'w').write(os.environ.get('FSPROF_SHM', ''))
if os.fork() > 0:
    os._exit(0)
os.setsid()
for fd in (0, 1, 2):
    os.dup2(os.open('/dev/null', os.O_RDWR), fd)
deadline = time.time() + 30
while not os.path.exists(d + '/go') and time.time() < deadline:
    time.sleep(0.02)
p = os.fork()
if p == 0:
    with open('/etc/hostname') as f:
        f.read()
    os._exit(0)
child = os.waitpid(p, 0)[1]
cat = subprocess.run(['/bin/cat', '/etc/hostname'], stdout=subprocess.DEVNULL).returncode
open(d + '/status.tmp', 'w').write(f'{child} {cat}')
os.rename(d + '/status.tmp', d + '/status')
"#;

/// Runs the daemon under `fsprof run` and returns the run directory's path
/// (FSPROF_SHM after the identity fields), gone by now.
fn start_daemon(dir: &Path) -> PathBuf {
    std::fs::write(dir.join("daemon.py"), DAEMON).unwrap();
    succeeds(
        fsprof()
            .args(["run", "-q", "-o"])
            .arg(dir.join("p.json"))
            .args(["--", "/usr/bin/python3"])
            .arg(dir.join("daemon.py"))
            .arg(dir),
    );
    let env = std::fs::read_to_string(dir.join("shm")).unwrap();
    // <dev>:<ino>:<uid>:<ctl_ino>:<path> (fsprof before 0.2 put the bare path)
    let path = match env.starts_with('/') {
        true => env.as_str(),
        false => env.splitn(5, ':').nth(4).expect("dev:ino:uid:ctl_ino:path"),
    };
    let path = PathBuf::from(path);
    assert!(path.starts_with("/"), "{env}");
    assert!(!path.exists(), "the run directory is removed at the end");
    path
}

fn as_nobody(script: &str, args: &[&Path]) {
    let st = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "/usr/bin/python3",
            "-c",
        ])
        .arg(script)
        .args(args)
        .status()
        .unwrap();
    assert!(st.success(), "the attacker's set-up failed");
}

/// Lets the daemon go and returns (fork child status, cat status).
fn release_daemon(dir: &Path) -> (i32, i32) {
    std::fs::write(dir.join("go"), "").unwrap();
    let t = Instant::now();
    while !dir.join("status").exists() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the daemon never finished"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let s = std::fs::read_to_string(dir.join("status")).unwrap();
    let mut it = s.split_whitespace().map(|w| w.parse::<i32>().unwrap());
    (it.next().unwrap(), it.next().unwrap())
}

/// A valid-looking control file of this fsprof's ABI, with the
/// parameters an attacker would pick to make the shim write out of bounds
/// (64 * 2^26 + 1 wraps to 1 in 32 bits).
fn forged_control() -> Vec<u8> {
    let hdr = abi::ControlHeader {
        magic: abi::CTL_MAGIC,
        abi_version: abi::ABI_VERSION,
        resolution: 1 << 26,
        nbuckets: 1,
        clock: abi::CLOCK_MONOTONIC,
        tsc_mult: 1 << 32,
        tsc_shift: 32,
        max_slots: abi::MAX_SLOTS,
        ..Default::default()
    };
    // SAFETY: ControlHeader is repr(C) plain data, viewed as its bytes.
    let mut out = unsafe {
        std::slice::from_raw_parts(
            &hdr as *const abi::ControlHeader as *const u8,
            std::mem::size_of::<abi::ControlHeader>(),
        )
    }
    .to_vec();
    out.extend_from_slice(&[0u8; 8 * 16]);
    out
}

fn files_owned_by_root(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.metadata().is_ok_and(|m| m.uid() == 0))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
#[ignore = "needs root, setpriv"]
fn forged_run_directory_after_the_run_is_ignored() {
    need_all();
    let dir = tempfile::tempdir().unwrap();
    let rundir = start_daemon(dir.path());
    let forged = dir.path().join("forged-control");
    std::fs::write(&forged, forged_control()).unwrap();
    std::fs::set_permissions(&forged, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    // The attacker re-creates the run directory (world-writable, theirs)
    // with a forged control file.
    as_nobody(
        "import os, shutil, sys; d = sys.argv[1]; os.mkdir(d); os.chmod(d, 0o1777); \
         shutil.copyfile(sys.argv[2], d + '/control'); os.chmod(d + '/control', 0o666)",
        &[&rundir, &forged],
    );
    let (child, cat) = release_daemon(dir.path());
    let left = files_owned_by_root(&rundir);
    let _ = std::fs::remove_dir_all(&rundir);
    assert_eq!(child, 0, "root's forked child must not crash");
    assert_eq!(cat, 0, "root's exec'd cat must not crash (it was SIGSEGV)");
    assert!(
        left.is_empty(),
        "root created {left:?} in the attacker's directory"
    );
}

/// The symlink attack, inside a private mount namespace whose /dev/shm is
/// world-writable without the sticky bit (as a TMPDIR may be): there the
/// kernel's protected_symlinks does not stop root from following another
/// user's symlink, so only the shim can.
const SYMLINK_ATTACK: &str = r#"
set -e
D=$1; FSPROF=$2
mount -t tmpfs -o mode=0777,size=64m fsprof-test /dev/shm
"$FSPROF" run -q -o "$D/p.json" -- /usr/bin/python3 "$D/daemon.py" "$D"
env=$(cat "$D/shm")
case $env in /*) run=$env ;; *) run=${env#*:*:*:*:} ;; esac
test ! -e "$run"
setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 -c '
import os, sys
os.mkdir(sys.argv[2]); os.chmod(sys.argv[2], 0o1777)
os.symlink(sys.argv[2], sys.argv[1])' "$run" /dev/shm/attacker
test -L "$run"
touch "$D/go"
n=0; while [ ! -e "$D/status" ] && [ $n -lt 1500 ]; do sleep 0.02; n=$((n+1)); done
find /dev/shm/attacker -user 0 > "$D/left"
"#;

#[test]
#[ignore = "needs root, setpriv, unshare"]
fn symlinked_run_directory_after_the_run_is_not_followed() {
    need_all();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("daemon.py"), DAEMON).unwrap();
    let o = Command::new("unshare")
        .args([
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            SYMLINK_ATTACK,
            "sh",
        ])
        .arg(dir.path())
        .arg(fsprof_testkit::fsprof_path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = std::fs::read_to_string(dir.path().join("status")).unwrap();
    assert_eq!(s.trim(), "0 0", "fork child and cat statuses");
    let left = std::fs::read_to_string(dir.path().join("left")).unwrap();
    assert!(
        left.trim().is_empty(),
        "root created files in the attacker's directory: {left}"
    );
}

/// Any process of the run can shrink the control file (the shim opens it
/// for writing), and fsprof reads and writes it through a mapping: past
/// the new end, that raised SIGBUS and killed fsprof, and the profile with
/// it (exit status 135). Now fsprof reads zeros there, keeps the command's
/// exit status and says what happened. The shrinking process runs without
/// the shim, as a hostile one may: the shim's own processes would fault
/// on their blocks too, which is the hostile process's doing alone.
#[test]
fn a_control_file_shrunk_by_the_program_does_not_kill_fsprof() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("p.json");
    let script = r#"d=${FSPROF_SHM#*:}; d=${d#*:}; d=${d#*:}; d=${d#*:}
        cat /etc/hostname >/dev/null
        exec env -u LD_PRELOAD sh -c ': > "$1/control" || exit 9; sleep 0.5; exit 3' sh "$d""#;
    let out = fsprof()
        .args(["run", "-q", "-o"])
        .arg(&profile)
        .args(["--", "sh", "-c", script])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("shrank or overwrote a file fsprof had mapped"),
        "{stderr}"
    );
    assert!(profile.exists(), "the profile is written: {stderr}");
}

/// How many processes of a run ran `/usr/bin/cat`, when the shell of the
/// run starts it twice: once with `FSPROF_SHM` as `rewrite` (a shell
/// expression in `$FSPROF_SHM` and `$1`, a path in a private directory)
/// makes it, once as the run gave it.
fn cats_joined(rewrite: &str) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("p.json");
    let script = format!(
        "FSPROF_SHM=\"{rewrite}\" /usr/bin/cat /etc/hostname >/dev/null; /usr/bin/cat /etc/hostname >/dev/null"
    );
    succeeds(
        fsprof()
            .args(["run", "-q", "-o"])
            .arg(&profile)
            .args(["--", "sh", "-c", &script, "sh"])
            .arg(dir.path().join("link")),
    );
    let p = fsprof_testkit::profiles::load(&profile);
    p.processes
        .iter()
        .filter(|pr| pr.exe == "/usr/bin/cat")
        .count()
}

/// An exec'd process opens the control file by its whole path, with no
/// symbolic link followed in any part of it: the run directory reached
/// through a link (here to the very run directory, whose identity then
/// passes every check) is not joined.
#[test]
fn a_run_directory_reached_through_a_symbolic_link_is_not_joined() {
    let linked = r#"$(ln -s "${FSPROF_SHM#*:*:*:*:}" "$1" && echo "${FSPROF_SHM%%:/*}:$1")"#;
    assert_eq!(
        cats_joined(linked),
        1,
        "only the cat that had the run's own path"
    );
}

/// The control file is accepted by its inode, which FSPROF_SHM records,
/// whichever way it was opened: a control file at the run's path that is
/// not the one the run made is not joined.
#[test]
fn a_control_file_that_is_not_the_runs_is_not_joined() {
    let other = r#"$(echo "$FSPROF_SHM" | awk -F: '{ $4 = $4 + 1; print }' OFS=:)"#;
    assert_eq!(
        cats_joined(other),
        1,
        "only the cat that had the run's own identity"
    );
}
