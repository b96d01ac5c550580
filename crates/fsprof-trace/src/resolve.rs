//! Paths as the kernel saw them: each process's cwd and fd table followed
//! through the trace in time order, so that a relative path or a
//! directory fd can be joined into an absolute path (lexically: symlinks
//! and `..` stay for whoever resolves it later), and an fd call can say
//! which file it was on.

use std::collections::HashMap;

use crate::event::{Call, ProcessInfo, AT_FDCWD};

#[derive(Default)]
struct Proc {
    cwd: Vec<u8>,
    fds: HashMap<i32, Vec<u8>>,
}

/// Follows cwds and fd tables; feed it every record in time order.
#[derive(Default)]
pub struct Resolver {
    procs: HashMap<i32, Proc>,
}

/// `base` + `/` + `rel`, or `rel` when it is absolute.
pub fn join(base: &[u8], rel: &[u8]) -> Vec<u8> {
    if rel.first() == Some(&b'/') {
        return rel.to_vec();
    }
    if rel.is_empty() {
        return base.to_vec();
    }
    let mut out = base.to_vec();
    if out.last() != Some(&b'/') {
        out.push(b'/');
    }
    out.extend_from_slice(rel);
    out
}

impl Resolver {
    /// A process image starts: its cwd and fds replace what was known of
    /// its pid.
    pub fn process(&mut self, p: &ProcessInfo) {
        let fds = p
            .fds
            .iter()
            .filter(|f| f.path.first() == Some(&b'/'))
            .map(|f| (f.fd, f.path.clone()))
            .collect();
        self.procs.insert(
            p.pid,
            Proc {
                cwd: p.cwd.clone(),
                fds,
            },
        );
    }

    /// The directory a `*at` call's path is relative to.
    fn base(&self, pid: i32, dirfd: Option<i32>) -> Option<Vec<u8>> {
        let p = self.procs.get(&pid)?;
        match dirfd {
            None | Some(AT_FDCWD) => (!p.cwd.is_empty()).then(|| p.cwd.clone()),
            Some(fd) => p.fds.get(&fd).cloned(),
        }
    }

    /// The path of an fd of process `pid`, if known.
    pub fn fd_path(&self, pid: i32, fd: i32) -> Option<&[u8]> {
        self.procs.get(&pid)?.fds.get(&fd).map(Vec::as_slice)
    }

    /// Fills `resolved`/`resolved2` (unless already set, as strace -y
    /// imports do) and follows the call's effect on cwd and fds.
    pub fn call(&mut self, c: &mut Call) {
        let op = c.op.name();
        let dirfd_op = op.ends_with("at") || op == "statx" || op == "renameat2";
        let uses_dirfd = dirfd_op && op != "creat";
        if c.resolved.is_none() {
            if let Some(path) = &c.path {
                let base = if uses_dirfd { c.fd } else { None };
                let absolute = path.first() == Some(&b'/');
                c.resolved = if absolute {
                    Some(path.clone())
                } else {
                    self.base(c.pid, base).map(|b| join(&b, path))
                };
            } else if let Some(fd) = c.fd {
                c.resolved = self.fd_path(c.pid, fd).map(<[u8]>::to_vec);
            }
        }
        if c.resolved2.is_none() {
            if let Some(path) = &c.path2 {
                let base = if uses_dirfd { c.fd2 } else { None };
                c.resolved2 = if path.first() == Some(&b'/') {
                    Some(path.clone())
                } else {
                    self.base(c.pid, base).map(|b| join(&b, path))
                };
            } else if let Some(fd) = c.fd2 {
                c.resolved2 = self.fd_path(c.pid, fd).map(<[u8]>::to_vec);
            }
        }
        self.effect(c);
    }

    fn effect(&mut self, c: &Call) {
        let ok = !c.failed();
        let p = self.procs.entry(c.pid).or_default();
        match c.op.name() {
            "open" | "openat" | "creat" | "opendir" | "fopen" | "freopen" if ok => {
                if let Some(r) = &c.resolved {
                    p.fds.insert(c.ret as i32, r.clone());
                }
            }
            "fcntl" if ok && matches!(c.flags, Some(0) | Some(1030)) => {
                // F_DUPFD, F_DUPFD_CLOEXEC: a new fd on the same file.
                if let Some(path) = c.fd.and_then(|fd| p.fds.get(&fd).cloned()) {
                    p.fds.insert(c.ret as i32, path);
                }
            }
            "close" | "fclose" | "closedir" => {
                if let Some(fd) = c.fd {
                    p.fds.remove(&fd);
                }
            }
            "chdir" if ok => {
                if let Some(r) = &c.resolved {
                    p.cwd = r.clone();
                }
            }
            "fchdir" if ok => {
                if let Some(path) = c.fd.and_then(|fd| p.fds.get(&fd).cloned()) {
                    p.cwd = path;
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{FdInfo, Op};

    fn call(op: &str, fd: Option<i32>, path: Option<&str>, ret: i64) -> Call {
        Call {
            pid: 7,
            tid: 7,
            op: Op::named(op),
            fd,
            path: path.map(|p| p.as_bytes().to_vec()),
            ret,
            ..Default::default()
        }
    }

    #[test]
    fn relative_paths_follow_cwd_and_dirfds() {
        let mut r = Resolver::default();
        r.process(&ProcessInfo {
            pid: 7,
            cwd: b"/work".to_vec(),
            fds: vec![FdInfo {
                fd: 1,
                path: b"/dev/pts/0".to_vec(),
                flags: 1,
                pos: -1,
            }],
            ..Default::default()
        });
        let mut c = call("open", None, Some("a/b.txt"), 3);
        r.call(&mut c);
        assert_eq!(c.resolved.as_deref(), Some(&b"/work/a/b.txt"[..]));
        let mut d = call("openat", Some(AT_FDCWD), Some("src"), 4);
        r.call(&mut d);
        let mut e = call("openat", Some(4), Some("main.c"), 5);
        r.call(&mut e);
        assert_eq!(e.resolved.as_deref(), Some(&b"/work/src/main.c"[..]));
        let mut rd = call("read", Some(5), None, 10);
        r.call(&mut rd);
        assert_eq!(rd.resolved.as_deref(), Some(&b"/work/src/main.c"[..]));
        let mut w = call("write", Some(1), None, 10);
        r.call(&mut w);
        assert_eq!(w.resolved.as_deref(), Some(&b"/dev/pts/0"[..]));
        let mut cd = call("chdir", None, Some("../tmp"), 0);
        r.call(&mut cd);
        let mut f = call("stat", None, Some("x"), 0);
        r.call(&mut f);
        assert_eq!(f.resolved.as_deref(), Some(&b"/work/../tmp/x"[..]));
        let mut cl = call("close", Some(5), None, 0);
        r.call(&mut cl);
        let mut gone = call("read", Some(5), None, -1);
        r.call(&mut gone);
        assert_eq!(gone.resolved, None, "a closed fd has no path");
    }
}
