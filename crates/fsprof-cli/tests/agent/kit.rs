//! What the `fsprof agent` tests share: a running agent whose log is
//! watched, cgroups of the v2 hierarchy and a raw loop device whose every
//! request the test makes itself (`dd ... iflag=direct`), so counts are
//! known exactly.
#![allow(dead_code)]

use crate::loopfs;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A running `fsprof agent --serve-metrics 127.0.0.1:0`, stopped (SIGKILL)
/// on drop if the test did not stop it.
pub struct Agent {
    pub child: Option<Child>,
    pub addr: String,
    pub log: PathBuf,
}

impl Agent {
    /// Starts the agent with `args` (its log in `dir`) and waits until it
    /// serves.
    pub fn start(dir: &Path, args: &[&str]) -> Agent {
        fsprof_testkit::need_root("eBPF");
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let log = dir.join(format!("agent-{stamp}.log"));
        let child = fsprof_testkit::fsprof()
            .args(["agent", "--serve-metrics", "127.0.0.1:0"])
            .args(args)
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut a = Agent {
            child: Some(child),
            addr: String::new(),
            log,
        };
        let line = a.wait_for_line("serving metrics on", Duration::from_secs(60));
        a.addr = fsprof_testkit::metrics_addr(&line);
        a
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits for a log line containing `what`; panics with the log after
    /// `limit`.
    pub fn wait_for_line(&mut self, what: &str, limit: Duration) -> String {
        let t0 = Instant::now();
        loop {
            let text = self.log_text();
            if let Some(l) = text.lines().find(|l| l.contains(what)) {
                return l.to_string();
            }
            if let Some(st) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("the agent exited ({st}) before saying {what:?}:\n{text}");
            }
            assert!(
                t0.elapsed() < limit,
                "no {what:?} in the agent's log after {limit:?}:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// GET /metrics (text).
    pub fn scrape(&self) -> String {
        http_get(&self.addr, "/metrics", None)
            .unwrap_or_else(|| panic!("no answer from {}", self.addr))
    }

    /// Sends `sig` and waits for the exit (at most 30 s).
    pub fn stop(&mut self, sig: i32) -> ExitStatus {
        let mut child = self.child.take().unwrap();
        // SAFETY: signalling our own child by its pid.
        unsafe { libc::kill(child.id() as i32, sig) };
        let t0 = Instant::now();
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                return st;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "the agent did not stop"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: signalling our own child by its pid.
        unsafe { libc::kill(self.pid(), sig) };
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// GET `path` from `addr`; the body. `accept` asks for an exposition.
pub fn http_get(addr: &str, path: &str, accept: Option<&str>) -> Option<String> {
    let mut c = TcpStream::connect_timeout(&addr.parse().ok()?, Duration::from_secs(5)).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{accept}Connection: close\r\n\r\n"
    )
    .ok()?;
    let mut s = Vec::new();
    c.read_to_end(&mut s).ok()?;
    let s = String::from_utf8_lossy(&s).into_owned();
    let (head, body) = s.split_once("\r\n\r\n")?;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}\n{body}");
    Some(body.to_string())
}

/// A sample line's metric name and labels (sorted), e.g.
/// `fsprof_op_latency_seconds_count{cgroup="/a",layer="block",op="loop3:read"}`.
pub type SampleKey = (String, BTreeMap<String, String>);

/// The samples of a text exposition (no escapes in the values fsprof
/// writes here).
pub fn samples(text: &str) -> BTreeMap<SampleKey, f64> {
    let mut out = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (series, value) = line.rsplit_once(' ').unwrap();
        let (name, labels) = match series.split_once('{') {
            Some((n, rest)) => (n, rest.trim_end_matches('}')),
            None => (series, ""),
        };
        let mut map = BTreeMap::new();
        for pair in labels.split("\",").filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once("=\"").unwrap();
            map.insert(k.to_string(), v.trim_end_matches('"').to_string());
        }
        out.insert((name.to_string(), map), value.parse().unwrap());
    }
    out
}

/// The value of `metric` with these labels (and any others), summed.
pub fn value(samples: &BTreeMap<SampleKey, f64>, metric: &str, labels: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|((n, l), _)| {
            n == metric
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|(_, v)| v)
        .sum()
}

/// The cgroup v2 hierarchy's mount.
pub fn cgroup_root() -> PathBuf {
    fsprof_agent::registry::find_root()
        .expect("a cgroup v2 hierarchy (/sys/fs/cgroup or /sys/fs/cgroup/unified)")
}

/// A v2 cgroup, removed on drop.
pub struct Cgroup {
    pub path: PathBuf,
    /// Its path below the root, as the agent labels it.
    pub label: String,
}

impl Cgroup {
    pub fn new(name: &str) -> Cgroup {
        let path = cgroup_root().join(name);
        let _ = std::fs::remove_dir(&path);
        std::fs::create_dir(&path).unwrap();
        Cgroup {
            label: format!("/{name}"),
            path,
        }
    }

    /// Runs `sh -c script` inside this cgroup; panics unless it succeeds.
    pub fn run(&self, script: &str) -> String {
        let procs = self.path.join("cgroup.procs");
        let o = Command::new("sh")
            .arg("-c")
            .arg(format!("echo $$ > '{}' && {script}", procs.display()))
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{script}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        // Its tasks have exited (each `run` waits); a zombie's removal may
        // lag a moment.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.path).is_ok() || !self.path.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A loop device over a sparse file, no file system: only the test's own
/// `dd ... iflag=direct` reaches it. Detached on drop.
pub struct RawLoop {
    _dir: tempfile::TempDir,
    pub dev: String,
}

impl RawLoop {
    pub fn new(size_mib: u64) -> RawLoop {
        let (dir, dev) = loopfs::attach(size_mib, |_| {});
        RawLoop { _dir: dir, dev }
    }

    /// `loopN`.
    pub fn name(&self) -> String {
        self.dev.trim_start_matches("/dev/").to_string()
    }

    /// Completed reads and writes (`/sys/block/loopN/stat`).
    pub fn stat(&self) -> (u64, u64) {
        let t = std::fs::read_to_string(format!("/sys/block/{}/stat", self.name())).unwrap();
        let f: Vec<u64> = t.split_whitespace().map(|w| w.parse().unwrap()).collect();
        (f[0], f[4])
    }

    /// `dd` reading `count` blocks of `bs` bytes, one request each.
    pub fn read_script(&self, bs: u32, count: u32, skip: u32) -> String {
        format!(
            "dd if={} of=/dev/null bs={bs} count={count} skip={skip} iflag=direct status=none",
            self.dev
        )
    }

    /// `dd` writing `count` blocks of `bs` bytes, one request each.
    pub fn write_script(&self, bs: u32, count: u32, seek: u32) -> String {
        format!(
            "dd if=/dev/zero of={} bs={bs} count={count} seek={seek} oflag=direct conv=notrunc status=none",
            self.dev
        )
    }
}

impl Drop for RawLoop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.dev).status();
    }
}

/// Names of the BPF programs and maps of process `pid` still in the
/// kernel (fsprof names both `f<pid hex>_...`).
pub fn bpf_objects_of(pid: i32) -> Vec<String> {
    let prefix = fsprof_kernel::session::prog_prefix(pid as u32);
    let mut names = fsprof_kernel::sys::loaded_prog_names().unwrap();
    names.extend(fsprof_kernel::sys::loaded_map_names().unwrap());
    names.retain(|n| n.starts_with(&prefix));
    names
}

/// Waits (at most 5 s: the kernel frees maps after an RCU grace period)
/// until process `pid` has no BPF object left; returns what is left.
pub fn wait_bpf_gone(pid: i32) -> Vec<String> {
    let t0 = Instant::now();
    loop {
        let left = bpf_objects_of(pid);
        if left.is_empty() || t0.elapsed() > Duration::from_secs(5) {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Resident set size of `pid` in KiB.
pub fn rss_kib(pid: i32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}
