//! `strace -f -ttt -T -y` logs (one file, or the per-pid files of `-ff -o
//! LOG`) to a trace. Understood: `PID` prefixes (or the pid of an `-ff`
//! file), `-ttt` timestamps, `-T` durations, `-y` fd paths (`3</etc/passwd>`),
//! quoted strings with strace's escapes and truncation (`"abc"...`: such data
//! is not kept), `<unfinished ...>` / `<... resumed>` pairs, errors
//! (`= -1 ENOENT (...)`), signals and exits (skipped), and clone/fork/execve
//! for processes and threads. Syscalls outside the trace vocabulary (mmap
//! of memory, brk, ...) are counted and left out. Not recoverable: data
//! beyond strace's `-s` limit, the cwd a relative path was opened from
//! unless `--cwd` gives the first process's, and fds without `-y`.

use std::collections::{BTreeMap, HashMap};

use fsprof_core::ops::{self, Role};

use crate::event::{Call, Data, FdInfo, Op, ProcessInfo, Record};
use crate::import::{ImportError, Sink};
use crate::resolve::join;
use crate::show::errno_from_name;

#[derive(Clone, Debug, Default)]
pub struct Options {
    pub lenient: bool,
    /// The first process's working directory, if known.
    pub cwd: Option<Vec<u8>>,
}

#[derive(Default, Clone)]
struct Proc {
    cwd: Option<Vec<u8>>,
    fds: BTreeMap<i32, Vec<u8>>,
    seq: u64,
}

pub struct Parser {
    opts: Options,
    tgid: HashMap<i32, i32>,
    procs: HashMap<i32, Proc>,
    pending: HashMap<i32, (u64, String)>,
    seq: u64,
    pub ignored: BTreeMap<String, u64>,
}

/// Syscalls imported under the libc op of the same name: the trace's op
/// vocabulary ([`fsprof_core::ops::libc`]), whose entry says where each
/// argument's role is; the syscall takes the same arguments in the same
/// order. Other syscalls are counted as ignored.
#[rustfmt::skip]
const SAME_NAME_LIST: &[&str] = &[
    "open", "openat", "creat", "close", "read", "write", "pread", "pwrite", "readv", "writev",
    "preadv", "pwritev", "lseek", "stat", "lstat", "fstat", "statx", "access", "faccessat",
    "fsync", "fdatasync", "sync", "syncfs", "truncate", "ftruncate", "fallocate", "mkdir",
    "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat", "renameat2", "link",
    "linkat", "symlink", "symlinkat", "readlink", "readlinkat", "chmod", "fchmod", "fchmodat",
    "chown", "fchown", "lchown", "fchownat", "utimensat", "chdir", "fchdir", "getdents64",
    "statfs", "fstatfs", "fcntl", "flock", "sendfile", "copy_file_range", "mknod", "mknodat",
];

fsprof_core::name_table! { static SAME_NAME = SAME_NAME_LIST; }

/// Syscalls imported under another op's name.
const RENAMED: &[(&str, &str)] = &[
    ("pread64", "pread"),
    ("pwrite64", "pwrite"),
    ("newfstatat", "fstatat"),
    ("fstatat64", "fstatat"),
    ("faccessat2", "faccessat"),
    ("fadvise64", "posix_fadvise"),
    ("sendfile64", "sendfile"),
];

/// What strace prints at an argument position that the trace keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Arg {
    /// An operand, by its role in the op vocabulary.
    Operand(Role),
    /// The data a write wrote.
    Written,
    /// The stat struct a stat call filled in.
    Stat,
    /// The buffer a readlink filled in.
    Result,
}

/// The buffers strace prints that the trace keeps (the op vocabulary
/// names operands only): (op, argument position, what).
const BUFFERS: &[(&str, usize, Arg)] = &[
    ("write", 1, Arg::Written),
    ("pwrite", 1, Arg::Written),
    ("stat", 1, Arg::Stat),
    ("lstat", 1, Arg::Stat),
    ("fstat", 1, Arg::Stat),
    ("fstatat", 2, Arg::Stat),
    ("statx", 4, Arg::Stat),
    ("readlink", 1, Arg::Result),
    ("readlinkat", 2, Arg::Result),
];

/// syscall → (op, what each argument is, by position; `None`: ignored).
fn syscall(name: &str) -> Option<(&'static str, Vec<Option<Arg>>)> {
    let op = match SAME_NAME.position(name).and_then(|i| SAME_NAME.get(i)) {
        Some(n) => n,
        None => RENAMED.iter().find(|(n, _)| *n == name)?.1,
    };
    let o = ops::libc::find(op)?;
    let mut args = vec![None; o.arity as usize];
    for &(role, i) in o.args.0 {
        args[i as usize] = Some(Arg::Operand(role));
    }
    for &(_, i, what) in BUFFERS.iter().filter(|(n, _, _)| *n == op) {
        args[i] = Some(what);
    }
    Some((op, args))
}

const NAMES: &[(&str, i64)] = &[
    ("O_RDONLY", 0),
    ("O_WRONLY", 1),
    ("O_RDWR", 2),
    ("O_CREAT", 0o100),
    ("O_EXCL", 0o200),
    ("O_NOCTTY", 0o400),
    ("O_TRUNC", 0o1000),
    ("O_APPEND", 0o2000),
    ("O_NONBLOCK", 0o4000),
    ("O_DSYNC", 0o10000),
    ("O_DIRECT", 0o40000),
    ("O_LARGEFILE", 0o100000),
    ("O_DIRECTORY", 0o200000),
    ("O_NOFOLLOW", 0o400000),
    ("O_NOATIME", 0o1000000),
    ("O_CLOEXEC", 0o2000000),
    ("O_SYNC", 0o4010000),
    ("O_PATH", 0o10000000),
    ("O_TMPFILE", 0o20200000),
    ("AT_SYMLINK_NOFOLLOW", 0x100),
    ("AT_REMOVEDIR", 0x200),
    ("AT_SYMLINK_FOLLOW", 0x400),
    ("AT_EMPTY_PATH", 0x1000),
    ("AT_EACCESS", 0x200),
    ("AT_STATX_SYNC_AS_STAT", 0),
    ("F_DUPFD", 0),
    ("F_GETFD", 1),
    ("F_SETFD", 2),
    ("F_GETFL", 3),
    ("F_SETFL", 4),
    ("F_GETLK", 5),
    ("F_SETLK", 6),
    ("F_SETLKW", 7),
    ("F_DUPFD_CLOEXEC", 1030),
    ("FD_CLOEXEC", 1),
    ("LOCK_SH", 1),
    ("LOCK_EX", 2),
    ("LOCK_NB", 4),
    ("LOCK_UN", 8),
    ("SEEK_SET", 0),
    ("SEEK_CUR", 1),
    ("SEEK_END", 2),
    ("SEEK_DATA", 3),
    ("SEEK_HOLE", 4),
    ("POSIX_FADV_NORMAL", 0),
    ("POSIX_FADV_RANDOM", 1),
    ("POSIX_FADV_SEQUENTIAL", 2),
    ("POSIX_FADV_WILLNEED", 3),
    ("POSIX_FADV_DONTNEED", 4),
    ("POSIX_FADV_NOREUSE", 5),
    ("RENAME_NOREPLACE", 1),
    ("RENAME_EXCHANGE", 2),
    ("RENAME_WHITEOUT", 4),
    ("F_OK", 0),
    ("R_OK", 4),
    ("W_OK", 2),
    ("X_OK", 1),
    ("S_IFREG", 0o100000),
    ("S_IFDIR", 0o40000),
    ("S_IFLNK", 0o120000),
    ("S_IFIFO", 0o10000),
    ("S_IFCHR", 0o20000),
    ("S_IFBLK", 0o60000),
    ("S_IFSOCK", 0o140000),
    ("FALLOC_FL_KEEP_SIZE", 1),
    ("FALLOC_FL_PUNCH_HOLE", 2),
    ("STATX_BASIC_STATS", 0x7ff),
    ("STATX_ALL", 0xfff),
];

/// A number strace prints: decimal, 0x hex, 0 octal, or `NAME|NAME|0644`.
fn number(tok: &str) -> Option<i64> {
    let tok = tok.trim();
    let mut total = 0i64;
    for part in tok.split('|') {
        let p = part.trim();
        let v = if let Some(h) = p.strip_prefix("0x") {
            i64::from_str_radix(h, 16).ok()?
        } else if p.len() > 1 && p.starts_with('0') && p.bytes().all(|b| b.is_ascii_digit()) {
            i64::from_str_radix(&p[1..], 8).ok()?
        } else if let Ok(v) = p.parse::<i64>() {
            v
        } else {
            NAMES.iter().find(|(n, _)| *n == p).map(|&(_, v)| v)?
        };
        total |= v;
    }
    Some(total)
}

/// Splits an argument list at top-level commas.
fn split_args(s: &str) -> Result<Vec<&str>, String> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let (mut depth, mut start, mut i) = (0i32, 0usize, 0usize);
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                if i >= b.len() {
                    return Err("unterminated string".into());
                }
            }
            // A -y annotation (`3</a,b>`) runs to its `>`; other `<`s
            // (`=>` in clone3's output, the shifts of capget's
            // `1<<CAP_CHOWN|...`) are plain text.
            b'<' if i > 0 && b[i - 1].is_ascii_digit() && b.get(i + 1) != Some(&b'<') => {
                while i < b.len() && b[i] != b'>' {
                    i += 1;
                }
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            b',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    if depth != 0 {
        return Err("unbalanced brackets".into());
    }
    if !s[start..].trim().is_empty() {
        out.push(s[start..].trim());
    }
    Ok(out)
}

/// A quoted string: its bytes and whether strace cut it (`"..."...`).
fn string(tok: &str) -> Option<(Vec<u8>, bool)> {
    let t = tok.trim();
    let inner_end = t.rfind('"')?;
    if !t.starts_with('"') || inner_end == 0 {
        return None;
    }
    let truncated = t[inner_end + 1..].starts_with("...");
    let b = &t.as_bytes()[1..inner_end];
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        i += 1;
        let c = *b.get(i)?;
        match c {
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'v' => out.push(0x0b),
            b'f' => out.push(0x0c),
            b'x' => {
                let h = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(h, 16).ok()?);
                i += 2;
            }
            b'0'..=b'7' => {
                let mut v = 0u32;
                let mut k = 0;
                while k < 3 && i < b.len() && (b'0'..=b'7').contains(&b[i]) {
                    v = v * 8 + (b[i] - b'0') as u32;
                    i += 1;
                    k += 1;
                }
                out.push(v as u8);
                continue;
            }
            c => out.push(c),
        }
        i += 1;
    }
    Some((out, truncated))
}

/// `3</path>` → (3, Some(path)); `AT_FDCWD` → (-100, None).
fn fd(tok: &str) -> Option<(i32, Option<Vec<u8>>)> {
    let t = tok.trim();
    // `3</path>`, also `3</path>(deleted)`.
    let (num, ann) = match (t.find('<'), t.rfind('>')) {
        (Some(i), Some(j)) if j > i => (&t[..i], Some(unescape_angle(&t[i + 1..j]))),
        _ => (t, None),
    };
    let v = if num == "AT_FDCWD" {
        -100
    } else {
        num.parse().ok()?
    };
    Some((v, ann))
}

fn unescape_angle(s: &str) -> Vec<u8> {
    string(&format!("\"{}\"", s.replace('"', "\\\"")))
        .map(|x| x.0)
        .unwrap_or_else(|| s.as_bytes().to_vec())
}

/// `123.456789` → ns.
fn seconds(tok: &str) -> Option<u64> {
    let (s, f) = tok.split_once('.').unwrap_or((tok, ""));
    let s: u64 = s.parse().ok()?;
    if f.len() > 9 || !f.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac: u64 = if f.is_empty() {
        0
    } else {
        format!("{f:0<9}").parse().ok()?
    };
    s.checked_mul(1_000_000_000)?.checked_add(frac)
}

fn field(st: &str, key: &str) -> Option<i64> {
    let at = st.find(key)? + key.len();
    let rest = &st[at..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    number(&rest[..end])
}

/// `name(args) = ret [ERRNO (msg)] [<dur>]` parsed.
struct Line<'a> {
    name: &'a str,
    args: Vec<&'a str>,
    ret: &'a str,
    errno: i32,
    dur_ns: u64,
}

fn call_line(s: &str) -> Result<Line<'_>, String> {
    let open = s.find('(').ok_or("no `(`: not a call")?;
    let name = &s[..open];
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(format!("{name:?} is not a syscall name"));
    }
    // strace pads the result into a column: `brk(NULL)       = 0x...`.
    let eq = s.rfind(" = ").ok_or("no `) = result`")?;
    let close = s[..eq].trim_end();
    if !close.ends_with(')') || close.len() <= open {
        return Err("no `) = result`".into());
    }
    let args = split_args(&close[open + 1..close.len() - 1])?;
    let rest = s[eq + 3..].trim();
    let (rest, dur_ns) = match (rest.rfind(" <"), rest.ends_with('>')) {
        (Some(i), true)
            if rest[i + 2..rest.len() - 1]
                .bytes()
                .all(|b| b.is_ascii_digit() || b == b'.') =>
        {
            (
                rest[..i].trim(),
                seconds(&rest[i + 2..rest.len() - 1]).ok_or("bad duration")?,
            )
        }
        _ => (rest, 0),
    };
    let digits = rest
        .trim_start_matches('-')
        .bytes()
        .take_while(u8::is_ascii_digit)
        .count();
    if digits > 0 && rest.trim_start_matches('-')[digits..].starts_with('<') && rest.ends_with('>')
    {
        // `3</a path with spaces>`: the annotation is the rest.
        return Ok(Line {
            name,
            args,
            ret: rest,
            errno: 0,
            dur_ns,
        });
    }
    let mut words = rest.splitn(3, ' ');
    let ret = words.next().unwrap_or("");
    let errno = match words.next() {
        Some(e) if e.starts_with('E') => errno_from_name(e).unwrap_or(-1),
        _ => 0,
    };
    Ok(Line {
        name,
        args,
        ret,
        errno,
        dur_ns,
    })
}

impl Parser {
    pub fn new(opts: Options) -> Parser {
        Parser {
            opts,
            tgid: HashMap::new(),
            procs: HashMap::new(),
            pending: HashMap::new(),
            seq: 0,
            ignored: BTreeMap::new(),
        }
    }

    fn ignore(&mut self, what: &str) {
        *self.ignored.entry(what.to_string()).or_default() += 1;
    }

    fn tgid_of(&mut self, tid: i32, t: u64, sink: &mut dyn Sink) -> Result<i32, ImportError> {
        if let Some(&g) = self.tgid.get(&tid) {
            return Ok(g);
        }
        // First seen without a clone in the log: a process of its own.
        self.tgid.insert(tid, tid);
        let p = Proc {
            cwd: self.opts.cwd.clone(),
            seq: self.next_seq(),
            ..Default::default()
        };
        sink.record(Record::Process(self.info(tid, 0, t, &p, b"", Vec::new())))?;
        self.procs.insert(tid, p);
        Ok(tid)
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq - 1
    }

    fn info(
        &self,
        pid: i32,
        ppid: i32,
        t: u64,
        p: &Proc,
        exe: &[u8],
        argv: Vec<Vec<u8>>,
    ) -> ProcessInfo {
        ProcessInfo {
            start_ns: t,
            pid,
            ppid,
            seq: p.seq,
            exe: exe.to_vec(),
            argv,
            cwd: p.cwd.clone().unwrap_or_default(),
            fds: p
                .fds
                .iter()
                .map(|(&fd, path)| FdInfo {
                    fd,
                    path: path.clone(),
                    flags: 0,
                    pos: -1,
                })
                .collect(),
        }
    }

    /// Parses one log; `file_pid` is the pid of an `-ff` file (its lines
    /// carry none).
    pub fn parse(
        &mut self,
        text: &str,
        file_pid: Option<i32>,
        lenient: bool,
        sink: &mut dyn Sink,
    ) -> Result<(), ImportError> {
        for (k, raw) in text.lines().enumerate() {
            let line = k + 1;
            if raw.trim().is_empty() {
                continue;
            }
            match self.line(raw, file_pid, sink) {
                Ok(()) => {}
                Err(LineError::Sink(e)) => return Err(e),
                Err(LineError::Parse(what)) if lenient => {
                    sink.skipped(&ImportError::line(line, &what).to_string())
                }
                Err(LineError::Parse(what)) => {
                    let what = format!("{what}: {}", super::excerpt(raw));
                    return Err(ImportError::line(line, &what));
                }
            }
        }
        Ok(())
    }

    fn line(
        &mut self,
        raw: &str,
        file_pid: Option<i32>,
        sink: &mut dyn Sink,
    ) -> Result<(), LineError> {
        let mut s = raw.trim_start();
        let tid = match file_pid {
            Some(p) => p,
            None => {
                let s2 = s.strip_prefix("[pid").map(str::trim_start).unwrap_or(s);
                let end = s2.find(|c: char| !c.is_ascii_digit()).unwrap_or(s2.len());
                let pid = s2[..end]
                    .parse::<i32>()
                    .map_err(|_| LineError::Parse("no pid at the start (use strace -f)".into()))?;
                s = s2[end..].trim_start().trim_start_matches(']').trim_start();
                pid
            }
        };
        let (ts, rest) = s
            .split_once(' ')
            .ok_or_else(|| LineError::Parse("no timestamp".into()))?;
        let t = seconds(ts).ok_or_else(|| LineError::Parse("no -ttt timestamp".into()))?;
        let rest = rest.trim();
        if rest.starts_with("---") || rest.starts_with("+++") {
            self.ignore(if rest.starts_with("---") {
                "signal"
            } else {
                "exit"
            });
            return Ok(());
        }
        if let Some(prefix) = rest.strip_suffix("<unfinished ...>") {
            self.pending.insert(tid, (t, prefix.trim_end().to_string()));
            return Ok(());
        }
        let (start, text) = if let Some(r) = rest.strip_prefix("<... ") {
            let close = r
                .find(" resumed>")
                .ok_or_else(|| LineError::Parse("bad resumed line".into()))?;
            let (t0, prefix) = self
                .pending
                .remove(&tid)
                .ok_or_else(|| LineError::Parse("resumed call that never started".into()))?;
            let tail = r[close + " resumed>".len()..].trim_start();
            let sep = if prefix.ends_with(',') {
                " "
            } else if prefix.ends_with('(') || tail.starts_with(')') || tail.starts_with(',') {
                ""
            } else {
                ", "
            };
            (t0, format!("{prefix}{sep}{tail}"))
        } else {
            (t, rest.to_string())
        };
        let l = call_line(&text).map_err(LineError::Parse)?;
        let pid = self.tgid_of(tid, start, sink).map_err(LineError::Sink)?;
        self.call(pid, tid, start, &l, sink)
    }

    fn call(
        &mut self,
        pid: i32,
        tid: i32,
        start: u64,
        l: &Line,
        sink: &mut dyn Sink,
    ) -> Result<(), LineError> {
        let (ret_num, ret_path) = match fd(l.ret) {
            Some((v, p)) => (v as i64, p),
            None => (number(l.ret).unwrap_or(-1), None),
        };
        let ok = l.errno == 0 && ret_num != -1;
        if self.lifecycle(pid, start, l, ret_num, ok, sink)? {
            return Ok(());
        }
        let Some((op, args)) = syscall(l.name) else {
            self.ignore(l.name);
            return Ok(());
        };
        let mut c = Call {
            start_ns: start,
            end_ns: start.saturating_add(l.dur_ns),
            pid,
            tid,
            op: Op::named(op),
            ret: if ok { ret_num } else { -1 },
            errno: l.errno,
            ..Default::default()
        };
        let symlink = matches!(op, "symlink" | "symlinkat");
        for (i, arg) in args.into_iter().enumerate() {
            let Some(a) = l.args.get(i) else { break };
            if *a == "NULL" {
                continue;
            }
            let Some(arg) = arg else { continue };
            fill(&mut c, arg, a, ok, symlink)
                .map_err(|what| LineError::Parse(format!("{}: {what}", l.name)))?;
        }
        self.follow(pid, op, ok, ret_num, ret_path, &mut c);
        sink.record(Record::Call(c)).map_err(LineError::Sink)
    }

    /// clone/fork (a thread or a process), execve (a new image), dup (an
    /// fd on a known file): true when the line was one of them.
    fn lifecycle(
        &mut self,
        pid: i32,
        start: u64,
        l: &Line,
        ret_num: i64,
        ok: bool,
        sink: &mut dyn Sink,
    ) -> Result<bool, LineError> {
        match l.name {
            "clone" | "clone3" | "fork" | "vfork" if ok && ret_num > 0 => {
                let child = ret_num as i32;
                let thread = l.args.iter().any(|a| a.contains("CLONE_THREAD"));
                if thread {
                    self.tgid.insert(child, pid);
                } else {
                    self.tgid.insert(child, child);
                    let mut p = self.procs.get(&pid).cloned().unwrap_or_default();
                    p.seq = self.next_seq();
                    sink.record(Record::Process(self.info(
                        child,
                        pid,
                        start,
                        &p,
                        b"",
                        Vec::new(),
                    )))
                    .map_err(LineError::Sink)?;
                    self.procs.insert(child, p);
                }
                return Ok(true);
            }
            "execve" if ok => {
                let exe = l
                    .args
                    .first()
                    .and_then(|a| string(a))
                    .map(|x| x.0)
                    .unwrap_or_default();
                let argv = l
                    .args
                    .get(1)
                    .map(|a| {
                        split_args(a.trim().trim_start_matches('[').trim_end_matches(']'))
                            .unwrap_or_default()
                            .iter()
                            .filter_map(|x| string(x).map(|s| s.0))
                            .collect()
                    })
                    .unwrap_or_default();
                let mut p = self.procs.get(&pid).cloned().unwrap_or_default();
                p.seq = self.next_seq();
                sink.record(Record::Process(self.info(pid, 0, start, &p, &exe, argv)))
                    .map_err(LineError::Sink)?;
                self.procs.insert(pid, p);
                return Ok(true);
            }
            "dup" | "dup2" | "dup3" if ok => {
                if let Some(path) = l.args.first().and_then(|a| fd(a)).and_then(|x| x.1) {
                    self.procs
                        .entry(pid)
                        .or_default()
                        .fds
                        .insert(ret_num as i32, path);
                }
                self.ignore(l.name);
                return Ok(true);
            }
            _ => {}
        }
        Ok(false)
    }

    /// The call's effect on the process's fd table and cwd.
    fn follow(
        &mut self,
        pid: i32,
        op: &str,
        ok: bool,
        ret_num: i64,
        ret_path: Option<Vec<u8>>,
        c: &mut Call,
    ) {
        // -y names the file an open returned: the kernel's own resolution.
        if ok && ret_path.is_some() && matches!(op, "open" | "openat" | "creat") {
            c.resolved = ret_path.clone();
        }
        let proc_ = self.procs.entry(pid).or_default();
        match op {
            "open" | "openat" | "creat" if ok => {
                if let Some(p) = ret_path.or_else(|| c.resolved.clone()) {
                    proc_.fds.insert(ret_num as i32, p);
                }
            }
            "close" => {
                if let Some(f) = c.fd {
                    proc_.fds.remove(&f);
                }
            }
            "chdir" if ok => {
                let path = c.path.clone().unwrap_or_default();
                proc_.cwd = if path.first() == Some(&b'/') {
                    Some(path)
                } else {
                    proc_.cwd.as_ref().map(|cwd| join(cwd, &path))
                };
            }
            "fchdir" if ok => proc_.cwd = c.resolved.clone(),
            _ => {}
        }
    }
}

enum LineError {
    Parse(String),
    Sink(ImportError),
}

/// One argument of a call as strace printed it (`a`), into the field of
/// `c` its role names; the error says what was expected instead.
fn fill(c: &mut Call, arg: Arg, a: &str, ok: bool, symlink: bool) -> Result<(), &'static str> {
    match arg {
        Arg::Operand(role @ (Role::Fd | Role::DirFd)) => {
            let (v, p) = fd(a).ok_or("expected an fd")?;
            c.fd = Some(v);
            if role == Role::Fd {
                c.resolved = p;
            }
        }
        Arg::Operand(role @ (Role::Fd2 | Role::DirFd2)) => {
            let (v, p) = fd(a).ok_or("expected an fd")?;
            c.fd2 = Some(v);
            if role == Role::Fd2 {
                c.resolved2 = p;
            }
        }
        Arg::Operand(Role::Path) => c.path = Some(string(a).ok_or("expected a path")?.0),
        // The trace keeps a symlink's target as a string, not a path.
        Arg::Operand(Role::Path2) if !symlink => {
            c.path2 = Some(string(a).ok_or("expected a path")?.0)
        }
        Arg::Operand(Role::Path2 | Role::Name) => {
            c.name = Some(string(a).ok_or("expected a string")?.0)
        }
        Arg::Operand(Role::Flags) => c.flags = Some(number(a).unwrap_or(0)),
        Arg::Operand(Role::Mode) => c.mode = number(a).map(|m| m as u32),
        Arg::Operand(Role::Offset) => c.offset = number(a),
        Arg::Operand(Role::Size) => c.len = number(a).map(|v| v as u64),
        Arg::Operand(Role::Whence) => c.whence = number(a).map(|v| v as i32),
        Arg::Operand(Role::Int) => c.arg = number(a),
        Arg::Written => {
            if let Some((d, truncated)) = string(a) {
                if !truncated && ok {
                    c.data = Data::Full(d);
                }
            }
        }
        Arg::Stat if ok => {
            c.size = field(a, "st_size=")
                .or_else(|| field(a, "stx_size="))
                .map(|v| v as u64);
            c.st_mode = field(a, "st_mode=")
                .or_else(|| field(a, "stx_mode="))
                .map(|v| v as u32);
        }
        Arg::Result if ok => c.result = string(a).map(|x| x.0),
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    struct Vec_(Vec<Record>, u64);
    impl Sink for Vec_ {
        fn record(&mut self, r: Record) -> Result<(), ImportError> {
            self.0.push(r);
            Ok(())
        }
        fn skipped(&mut self, _: &str) {
            self.1 += 1;
        }
    }

    fn calls(log: &str) -> Vec<Call> {
        let mut s = Vec_(Vec::new(), 0);
        Parser::new(Options::default())
            .parse(log, None, false, &mut s)
            .unwrap();
        s.0.into_iter()
            .filter_map(|r| match r {
                Record::Call(c) => Some(c),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn strace_lines_become_calls() {
        let log = r#"100 1700000000.000100 openat(AT_FDCWD</w>, "a \"q\"\n.txt", O_WRONLY|O_CREAT|O_TRUNC, 0644) = 3</w/a "q"\n.txt> <0.000020>
100 1700000000.000200 write(3</w/a.txt>, "hi\0\377", 4) = 4 <0.000005>
100 1700000000.000300 write(3</w/a.txt>, "0123456789"..., 100) = 100 <0.000005>
100 1700000000.000400 pread64(3</w/a.txt>, <unfinished ...>
101 1700000000.000450 --- SIGCHLD {si_signo=SIGCHLD} ---
100 1700000000.000500 <... pread64 resumed>"xy", 2, 8) = 2 <0.000100>
100 1700000000.000600 newfstatat(AT_FDCWD, "/etc", {st_mode=S_IFDIR|0755, st_size=4096, ...}, 0) = 0 <0.000002>
100 1700000000.000700 unlink("nope") = -1 ENOENT (No such file or directory) <0.000003>
100 1700000000.000800 brk(NULL) = 0x55d0c0000000 <0.000001>
100 1700000000.000850 capget({version=_LINUX_CAPABILITY_VERSION_3, pid=0}, {effective=1<<CAP_CHOWN|1<<CAP_KILL, permitted=1<<CAP_CHOWN, inheritable=0}) = 0 <0.000001>
100 1700000000.000900 +++ exited with 0 +++
"#;
        let cs = calls(log);
        assert_eq!(cs.len(), 6, "{cs:#?}");
        assert_eq!(cs[0].op.name(), "openat");
        assert_eq!(cs[0].path.as_deref(), Some(&b"a \"q\"\n.txt"[..]));
        assert_eq!(
            cs[0].flags,
            Some((libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC) as i64)
        );
        assert_eq!(
            (cs[0].mode, cs[0].ret, cs[0].duration_ns()),
            (Some(0o644), 3, 20_000)
        );
        assert_eq!(cs[1].data, Data::Full(vec![b'h', b'i', 0, 0o377]));
        assert_eq!(cs[2].data, Data::None, "truncated strings are not kept");
        assert_eq!(
            (cs[3].op.name(), cs[3].offset, cs[3].ret),
            ("pread", Some(8), 2)
        );
        assert_eq!(
            cs[3].start_ns, 1_700_000_000_000_400_000,
            "resumed calls start when they started"
        );
        assert_eq!((cs[4].size, cs[4].st_mode), (Some(4096), Some(0o40755)));
        assert_eq!((cs[5].ret, cs[5].errno), (-1, libc::ENOENT));
    }

    #[test]
    fn unparseable_lines_name_their_number_or_are_skipped() {
        let log = "100 1.5 close(3) = 0\nthis is not strace\n";
        let mut s = Vec_(Vec::new(), 0);
        let e = Parser::new(Options::default())
            .parse(log, None, false, &mut s)
            .err()
            .unwrap();
        assert!(e.to_string().starts_with("line 2:"), "{e}");
        let mut s = Vec_(Vec::new(), 0);
        Parser::new(Options::default())
            .parse(log, None, true, &mut s)
            .unwrap();
        assert_eq!(s.1, 1);
    }

    proptest! {
        #[test]
        fn any_line_parses_or_fails_cleanly(line in ".{0,200}") {
            let mut s = Vec_(Vec::new(), 0);
            let _ = Parser::new(Options::default()).parse(&line, None, false, &mut s);
            let _ = Parser::new(Options::default()).parse(&format!("1 1.0 {line}"), None, false, &mut s);
        }
    }
}
