//! Calls on descriptors that are not files (pipes, sockets, devices,
//! eventfd...) are not file-system I/O: they are counted in the
//! `user-nonfile` layer, by class, and reports show them only on request.

use fsprof_core::Profile;
use fsprof_testkit::{count, fsprof, load, run_profiled};

fn nonfile(p: &Profile, op: &str) -> u64 {
    p.layer("user-nonfile")
        .and_then(|l| l.op(op))
        .map_or(0, |o| o.post)
}

fn proc_ops<'a>(p: &'a Profile, exe_suffix: &str) -> &'a fsprof_core::Process {
    p.processes
        .iter()
        .find(|pr| pr.exe.ends_with(exe_suffix))
        .unwrap_or_else(|| panic!("no {exe_suffix} process"))
}

#[test]
fn a_pipe_reader_waits_on_a_pipe_not_on_the_file_system() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("data"), vec![b'x'; 256 << 10]).unwrap();
    let (o, path) = run_profiled(dir.path(), &["sh", "-c", "cat data | wc -c"]);
    assert!(o.status.success());
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "262144");
    let p = load(&path);
    let cat = proc_ops(&p, "/cat");
    let wc = proc_ops(&p, "/wc");
    let op = |pr: &fsprof_core::Process, layer: &str, name: &str| {
        pr.layers
            .iter()
            .find(|l| l.name == layer)
            .and_then(|l| l.op(name))
            .map_or(0, |o| o.post)
    };
    // cat reads the file (file-system reads) and writes the pipe; wc
    // reads the pipe and writes the test's pipe.
    assert!(op(cat, "user", "read") >= 2, "{cat:?}");
    assert_eq!(op(cat, "user", "write"), 0, "{cat:?}");
    assert!(op(cat, "user-nonfile", "pipe_write") >= 2, "{cat:?}");
    assert_eq!(op(wc, "user", "read"), 0, "{wc:?}");
    assert!(op(wc, "user-nonfile", "pipe_read") >= 2, "{wc:?}");
    // The layer totals agree with the processes.
    let user_reads: u64 = p.processes.iter().map(|pr| op(pr, "user", "read")).sum();
    assert_eq!(count(&p, "read"), user_reads);
}

#[test]
fn sockets_devices_and_eventfds_each_have_their_class() {
    let dir = tempfile::tempdir().unwrap();
    let script = "import os, socket\n\
                  a, b = socket.socketpair()\n\
                  os.write(a.fileno(), b'x' * 10); os.read(b.fileno(), 10)\n\
                  n = os.open('/dev/null', os.O_WRONLY); os.write(n, b'y'); os.close(n)\n\
                  e = os.eventfd(0); os.write(e, (1).to_bytes(8, 'little')); os.read(e, 8)\n\
                  f = os.open('f', os.O_CREAT | os.O_WRONLY); os.write(f, b'z'); os.close(f)\n";
    let (o, path) = run_profiled(dir.path(), &["/usr/bin/python3", "-c", script]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let p = load(&path);
    assert_eq!(nonfile(&p, "socket_write"), 1);
    assert_eq!(nonfile(&p, "socket_read"), 1);
    assert_eq!(nonfile(&p, "device_write"), 1);
    assert_eq!(nonfile(&p, "other_write"), 1);
    assert_eq!(nonfile(&p, "other_read"), 1);
    // Only the write to the regular file is a file-system write.
    assert_eq!(count(&p, "write"), 1);
}

#[test]
fn reports_show_non_file_calls_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let (o, path) = run_profiled(dir.path(), &["sh", "-c", "cat /etc/hostname | wc -c"]);
    assert!(o.status.success());
    let report = |extra: &[&str]| {
        let o = fsprof()
            .arg("report")
            .arg(&path)
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success());
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let default = report(&[]);
    assert!(default.contains("layer user:"), "{default}");
    assert!(!default.contains("pipe_read"), "{default}");
    let asked = report(&["--layer", "user-nonfile"]);
    assert!(
        asked.contains("layer user-nonfile:") && asked.contains("pipe_read"),
        "{asked}"
    );
    // fsprof run says where they went.
    let run = fsprof()
        .args(["run", "-f", "-o"])
        .arg(dir.path().join("q.json"))
        .args(["--", "sh", "-c", "cat /etc/hostname | wc -c"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(err.contains("--layer user-nonfile"), "{err}");
    assert!(
        err.contains("layer user:") && !err.contains("layer user-nonfile:"),
        "{err}"
    );
}

/// An io_uring ring mapped with mmap (liburing makes the ring with a raw
/// system call, so the shim first sees the descriptor at the mmap) is
/// not a file mapping; a mapping of a regular file still is.
#[test]
fn an_io_uring_ring_mapping_is_not_a_file_mmap() {
    let dir = tempfile::tempdir().unwrap();
    let script = "import ctypes, mmap, os\n\
                  libc = ctypes.CDLL(None, use_errno=True)\n\
                  libc.syscall.restype = ctypes.c_long\n\
                  params = ctypes.create_string_buffer(120)\n\
                  fd = libc.syscall(425, 4, params)  # io_uring_setup\n\
                  assert fd >= 0, os.strerror(ctypes.get_errno())\n\
                  mmap.mmap(fd, 4096, offset=0).close()  # IORING_OFF_SQ_RING\n\
                  with open('data', 'wb') as f: f.write(b'x' * 4096)\n\
                  with open('data', 'rb') as f: mmap.mmap(f.fileno(), 4096, prot=mmap.PROT_READ).close()\n";
    let (o, path) = run_profiled(dir.path(), &["/usr/bin/python3", "-c", script]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let p = load(&path);
    assert_eq!(count(&p, "mmap"), 1, "only the file mapping is a file mmap");
    assert_eq!(nonfile(&p, "other_mmap"), 1);
}
