//! Paths as the kernel saw them: each process's cwd and fd table followed
//! through the trace in time order, so that a relative path or a
//! directory fd can be joined into an absolute path (lexically: symlinks
//! and `..` stay for whoever resolves it later), and an fd call can say
//! which file it was on. Each process's file mappings are followed the
//! same way (made by `mmap`, cut or removed by `munmap`, inherited by a
//! fork, dropped by an exec), so that an access through a mapping can say
//! which file and offset it touched.

use std::collections::{BTreeMap, HashMap};

use crate::event::{Access, Call, Descriptor, Mapped, ProcessInfo, AT_FDCWD};

const PAGE: u64 = 4096;

/// A file mapping: its length, the file and the offset it starts at.
#[derive(Clone, Debug)]
struct Mapping {
    len: u64,
    path: Option<Vec<u8>>,
    offset: u64,
}

#[derive(Default)]
struct Proc {
    cwd: Vec<u8>,
    fds: HashMap<i32, Vec<u8>>,
    /// Start address → mapping.
    maps: BTreeMap<u64, Mapping>,
}

/// Removes `[lo, hi)` from `maps`, keeping the parts of mappings outside it.
fn unmap(maps: &mut BTreeMap<u64, Mapping>, lo: u64, hi: u64) {
    let hit: Vec<u64> = maps
        .range(..hi)
        .filter(|(s, m)| s.saturating_add(m.len) > lo)
        .map(|(s, _)| *s)
        .collect();
    for s in hit {
        let m = maps.remove(&s).expect("a mapping just found");
        let e = s.saturating_add(m.len);
        if s < lo {
            maps.insert(
                s,
                Mapping {
                    len: lo - s,
                    ..m.clone()
                },
            );
        }
        if e > hi {
            let offset = m.offset.saturating_add(hi - s);
            maps.insert(
                hi,
                Mapping {
                    len: e - hi,
                    path: m.path,
                    offset,
                },
            );
        }
    }
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
    /// A fork inherits its parent's mappings; an exec (an image of a pid
    /// seen before) has none.
    pub fn process(&mut self, p: &ProcessInfo) {
        let fds = p
            .fds
            .iter()
            .filter(|f| f.path.first() == Some(&b'/'))
            .map(|f| (f.fd, f.path.clone()))
            .collect();
        let maps = match self.procs.contains_key(&p.pid) {
            true => BTreeMap::new(),
            false => self
                .procs
                .get(&p.ppid)
                .map(|pp| pp.maps.clone())
                .unwrap_or_default(),
        };
        self.procs.insert(
            p.pid,
            Proc {
                cwd: p.cwd.clone(),
                fds,
                maps,
            },
        );
    }

    /// A descriptor at its first use in its image: its path, if absolute,
    /// is the fd's.
    pub fn descriptor(&mut self, d: &Descriptor) {
        let Some(p) = self.procs.get_mut(&d.pid) else {
            return;
        };
        match d.fd.path.first() {
            Some(b'/') => p.fds.insert(d.fd.fd, d.fd.path.clone()),
            // A pipe, a socket: whatever the number was before is gone.
            _ => p.fds.remove(&d.fd.fd),
        };
    }

    /// Fills a mapped record's file and offset (unless already set) from
    /// the mapping its address is in, as its process had it then.
    pub fn mapped(&mut self, m: &mut Mapped) {
        if m.resolved.is_some() {
            return;
        }
        let Some(p) = self.procs.get(&m.pid) else {
            return;
        };
        let Some((&start, map)) = p.maps.range(..=m.addr).next_back() else {
            return;
        };
        if m.addr - start >= map.len {
            return;
        }
        let at = match m.access {
            Access::Contents => m.addr,
            Access::Read | Access::Write => m.addr & !(PAGE - 1),
        };
        m.resolved = map.path.clone();
        m.offset = Some(map.offset.saturating_add(at.saturating_sub(start)));
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
            // dup2, dup3: the number holds the old one's file, or one
            // whose path is unknown (its next use describes it).
            "dup2" if ok => {
                if let (Some(old), Some(new)) = (c.fd, c.fd2) {
                    match p.fds.get(&old).cloned() {
                        Some(path) => p.fds.insert(new, path),
                        None => p.fds.remove(&new),
                    };
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
            "mmap" if ok => {
                let (start, len) = (c.ret as u64, c.len.unwrap_or(0).div_ceil(PAGE) * PAGE);
                unmap(&mut p.maps, start, start.saturating_add(len));
                let path = c.resolved.clone();
                let offset = c.offset.unwrap_or(0).max(0) as u64;
                p.maps.insert(start, Mapping { len, path, offset });
            }
            "munmap" if ok => {
                let start = c.arg.unwrap_or(0) as u64;
                let len = c.len.unwrap_or(0).div_ceil(PAGE) * PAGE;
                unmap(&mut p.maps, start, start.saturating_add(len));
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

    fn fault(pid: i32, addr: u64) -> Mapped {
        Mapped {
            pid,
            addr,
            ..Default::default()
        }
    }

    /// Mappings follow mmap and munmap (a partial unmap keeps the rest
    /// with its offset), forks inherit them, execs drop them.
    #[test]
    fn mapped_accesses_resolve_to_file_and_offset() {
        let mut r = Resolver::default();
        let image = |pid, ppid| ProcessInfo {
            pid,
            ppid,
            cwd: b"/w".to_vec(),
            ..Default::default()
        };
        r.process(&image(7, 1));
        let mut o = call("open", None, Some("db"), 3);
        r.call(&mut o);
        let mut m = call("mmap", Some(3), None, 0x10000);
        (m.len, m.offset) = (Some(8 * 4096), Some(4096));
        r.call(&mut m);
        let mut f = fault(7, 0x10000 + 2 * 4096 + 17);
        r.mapped(&mut f);
        assert_eq!(
            (f.resolved.as_deref(), f.offset),
            (Some(&b"/w/db"[..]), Some(3 * 4096))
        );
        let mut u = call("munmap", None, None, 0);
        (u.arg, u.len) = (Some(0x10000 + 4096), Some(2 * 4096));
        r.call(&mut u);
        let mut hole = fault(7, 0x10000 + 2 * 4096);
        r.mapped(&mut hole);
        assert_eq!(hole.offset, None, "unmapped");
        let mut after = fault(7, 0x10000 + 5 * 4096);
        r.mapped(&mut after);
        assert_eq!(after.offset, Some(6 * 4096));
        r.process(&image(8, 7));
        let mut child = fault(8, 0x10000);
        r.mapped(&mut child);
        assert_eq!(child.offset, Some(4096), "a fork inherits the mapping");
        r.process(&image(7, 1));
        let mut exec = fault(7, 0x10000);
        r.mapped(&mut exec);
        assert_eq!(exec.resolved, None, "an exec drops the mappings");
    }
}
