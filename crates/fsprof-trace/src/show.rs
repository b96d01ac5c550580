//! `fsprof trace show`: a trace as text close to `strace -f -ttt -T -y`
//! (so it reads with the habits people have), or as JSON lines / CSV for
//! pandas and DuckDB. Bytes that are not printable are escaped as strace
//! escapes them, so a hostile path cannot reach the terminal raw.

use std::io::{self, Write};

use fsprof_core::ops::Role;
use fsprof_core::printable::csv_field;
use serde_json::{json, Map, Value};

use crate::event::{Access, Call, Data, Descriptor, Mapped, ProcessInfo, Record, AT_FDCWD};
use crate::file::TraceHeader;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Jsonl,
    Csv,
}

/// Prints records one by one.
pub struct Printer<W: Write> {
    out: W,
    format: Format,
    start_unix_ns: u64,
    header_done: bool,
}

pub const CSV_COLUMNS: &[&str] = &[
    "type",
    "start_ns",
    "end_ns",
    "duration_ns",
    "pid",
    "tid",
    "op",
    "ret",
    "errno",
    "fd",
    "fd2",
    "path",
    "resolved",
    "path2",
    "resolved2",
    "flags",
    "mode",
    "offset",
    "len",
    "whence",
    "size",
    "data",
];

impl<W: Write> Printer<W> {
    pub fn new(out: W, format: Format, header: &TraceHeader) -> Self {
        Printer {
            out,
            format,
            start_unix_ns: header.run.start_unix_ns,
            header_done: false,
        }
    }

    pub fn record(&mut self, r: &Record) -> io::Result<()> {
        match self.format {
            Format::Text => {
                let line = match r {
                    Record::Call(c) => text_call(c, self.start_unix_ns),
                    Record::Process(p) => text_process(p, self.start_unix_ns),
                    Record::Mapped(m) => text_mapped(m, self.start_unix_ns),
                    Record::Descriptor(d) => text_descriptor(d, self.start_unix_ns),
                };
                writeln!(self.out, "{line}")
            }
            Format::Jsonl => writeln!(self.out, "{}", json_record(r)),
            Format::Csv => {
                if !self.header_done {
                    writeln!(self.out, "{}", CSV_COLUMNS.join(","))?;
                    self.header_done = true;
                }
                match r {
                    Record::Call(c) => writeln!(self.out, "{}", csv_call(c))?,
                    Record::Mapped(m) => writeln!(self.out, "{}", csv_mapped(m))?,
                    Record::Process(_) | Record::Descriptor(_) => {}
                }
                Ok(())
            }
        }
    }

    /// Ends the output (a CSV's header if no record came) and gives the
    /// writer back.
    pub fn finish(mut self) -> io::Result<W> {
        if self.format == Format::Csv && !self.header_done {
            writeln!(self.out, "{}", CSV_COLUMNS.join(","))?;
        }
        self.out.flush()?;
        Ok(self.out)
    }
}

/// `strace`'s quoting: printable ASCII as is, `"` and `\` escaped, the
/// rest as `\n`, `\t` or `\ooo`.
pub fn quote(b: &[u8], max: usize) -> String {
    let mut s = String::with_capacity(b.len().min(max) + 2);
    s.push('"');
    for &c in b.iter().take(max) {
        match c {
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            b'\n' => s.push_str("\\n"),
            b'\t' => s.push_str("\\t"),
            b'\r' => s.push_str("\\r"),
            0x20..=0x7e => s.push(c as char),
            _ => s.push_str(&format!("\\{c:o}")),
        }
    }
    s.push('"');
    if b.len() > max {
        s.push_str("...");
    }
    s
}

/// `-y`'s `</path>` suffix, escaped the same way.
fn angle(path: &[u8]) -> String {
    let q = quote(path, usize::MAX);
    format!("<{}>", &q[1..q.len() - 1])
}

fn timestamp(start_unix_ns: u64, t: u64) -> String {
    let ns = start_unix_ns + t;
    format!("{}.{:06}", ns / 1_000_000_000, ns % 1_000_000_000 / 1000)
}

fn text_process(p: &ProcessInfo, start: u64) -> String {
    let argv: Vec<String> = p.argv.iter().map(|a| quote(a, 64)).collect();
    format!(
        "{:<6} {} +++ process image seq {} (ppid {}): {} [{}] in {} +++",
        p.pid,
        timestamp(start, p.start_ns),
        p.seq,
        p.ppid,
        quote(&p.exe, 256),
        argv.join(", "),
        quote(&p.cwd, 256)
    )
}

fn text_descriptor(d: &Descriptor, start: u64) -> String {
    let pos = match d.fd.pos {
        p if p < 0 => String::new(),
        p => format!(", position {p}"),
    };
    format!(
        "{:<6} {} +++ descriptor {} first used: {} ({}{pos}) +++",
        d.tid,
        timestamp(start, d.start_ns),
        d.fd.fd,
        quote(&d.fd.path, 256),
        open_flags(d.fd.flags),
    )
}

const OPEN_FLAGS: &[(i64, &str)] = &[
    (0o100, "O_CREAT"),
    (0o200, "O_EXCL"),
    (0o400, "O_NOCTTY"),
    (0o1000, "O_TRUNC"),
    (0o2000, "O_APPEND"),
    (0o4000, "O_NONBLOCK"),
    (0o10000, "O_DSYNC"),
    (0o40000, "O_DIRECT"),
    (0o200000, "O_DIRECTORY"),
    (0o400000, "O_NOFOLLOW"),
    (0o1000000, "O_NOATIME"),
    (0o2000000, "O_CLOEXEC"),
    (0o4000000, "O_SYNC"),
    (0o10000000, "O_PATH"),
    (0o20000000, "O_TMPFILE"),
    (0o100000, "O_LARGEFILE"),
];

/// How bits no name covers are printed.
#[derive(Clone, Copy)]
enum Radix {
    Oct,
    Hex,
}

/// Names of the bits set in `v`, joined with `|`, then what is left.
fn bit_names(v: i64, names: &[(i64, &str)], none: &str, radix: Radix) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut rest = v;
    for &(bit, name) in names {
        if rest & bit == bit && bit != 0 {
            parts.push(name.into());
            rest &= !bit;
        }
    }
    if rest != 0 {
        parts.push(match radix {
            Radix::Oct => format!("{rest:#o}"),
            Radix::Hex => format!("{rest:#x}"),
        });
    }
    if parts.is_empty() {
        none.into()
    } else {
        parts.join("|")
    }
}

/// mmap's protection and flags, msync's flags, as strace names them.
fn map_arg(op: &str, role: Role, c: &Call) -> Option<String> {
    const PROT: &[(i64, &str)] = &[(1, "PROT_READ"), (2, "PROT_WRITE"), (4, "PROT_EXEC")];
    const MAP: &[(i64, &str)] = &[
        (0x03, "MAP_SHARED_VALIDATE"),
        (0x01, "MAP_SHARED"),
        (0x02, "MAP_PRIVATE"),
        (0x10, "MAP_FIXED"),
        (0x20, "MAP_ANONYMOUS"),
        (0x4000, "MAP_NORESERVE"),
        (0x8000, "MAP_POPULATE"),
        (0x2000, "MAP_LOCKED"),
        (0x100000, "MAP_FIXED_NOREPLACE"),
    ];
    const MS: &[(i64, &str)] = &[(1, "MS_ASYNC"), (2, "MS_INVALIDATE"), (4, "MS_SYNC")];
    Some(match (op, role) {
        ("mmap", Role::Mode) => bit_names(c.mode? as i64, PROT, "PROT_NONE", Radix::Hex),
        ("mmap", Role::Flags) => bit_names(c.flags?, MAP, "0", Radix::Hex),
        ("msync", Role::Flags) => bit_names(c.flags?, MS, "0", Radix::Hex),
        ("msync" | "munmap", Role::Int) => format!("{:#x}", c.arg?),
        _ => return None,
    })
}

pub fn open_flags(f: i64) -> String {
    let access = match f & 3 {
        0 => "O_RDONLY",
        1 => "O_WRONLY",
        2 => "O_RDWR",
        _ => "O_ACCMODE",
    };
    // O_TMPFILE includes O_DIRECTORY's bit; name it once.
    match bit_names(f & !3, OPEN_FLAGS, "", Radix::Oct).as_str() {
        "" => access.to_string(),
        rest => format!("{access}|{rest}"),
    }
}

fn fd_text(fd: i32, path: Option<&[u8]>) -> String {
    if fd == AT_FDCWD {
        return "AT_FDCWD".into();
    }
    match path {
        Some(p) => format!("{fd}{}", angle(p)),
        None => fd.to_string(),
    }
}

fn data_text(c: &Call) -> String {
    match &c.data {
        Data::Full(b) => quote(b, 32),
        Data::Digest(d) => format!("<xxh64 {d:016x}>"),
        Data::None => "...".into(),
    }
}

/// The arguments in the order of the call's signature.
fn args_text(c: &Call) -> Vec<String> {
    let symlink = c.op.is("symlink") || c.op.is("symlinkat");
    let path_of_fd = c.resolved.as_deref();
    let mut out = Vec::new();
    let mut buffers = 0;
    for role in crate::chunks::roles(c.op) {
        out.push(match role {
            Some(Role::Fd | Role::Stream | Role::DirStream | Role::DirFd) => fd_text(
                c.fd.unwrap_or(-1),
                if c.path.is_some() { None } else { path_of_fd },
            ),
            Some(Role::Fd2 | Role::DirFd2) => fd_text(
                c.fd2.unwrap_or(-1),
                if c.path2.is_some() {
                    None
                } else {
                    c.resolved2.as_deref()
                },
            ),
            Some(Role::Path) => c
                .path
                .as_deref()
                .map(|p| quote(p, 4096))
                .unwrap_or("NULL".into()),
            Some(Role::Path2) if !symlink => c
                .path2
                .as_deref()
                .map(|p| quote(p, 4096))
                .unwrap_or("NULL".into()),
            Some(Role::Path2 | Role::Name) => c
                .name
                .as_deref()
                .map(|p| quote(p, 256))
                .unwrap_or("NULL".into()),
            Some(role @ (Role::Mode | Role::Flags | Role::Int))
                if map_arg(c.op.name(), role, c).is_some() =>
            {
                map_arg(c.op.name(), role, c).unwrap_or_default()
            }
            Some(Role::Flags) => match (c.op.name(), c.flags) {
                ("open" | "openat", Some(f)) => open_flags(f),
                (_, Some(f)) => format!("{f:#x}"),
                (_, None) => "?".into(),
            },
            Some(Role::Mode) => c.mode.map(|m| format!("0{m:o}")).unwrap_or("?".into()),
            Some(Role::Offset) => c.offset.map(|o| o.to_string()).unwrap_or("?".into()),
            Some(Role::Size | Role::ItemSize) => c.len.map(|o| o.to_string()).unwrap_or("?".into()),
            Some(Role::Int | Role::Items) => c.arg.map(|o| o.to_string()).unwrap_or("?".into()),
            Some(Role::Whence) => match c.whence {
                Some(0) => "SEEK_SET".into(),
                Some(1) => "SEEK_CUR".into(),
                Some(2) => "SEEK_END".into(),
                Some(w) => w.to_string(),
                None => "?".into(),
            },
            _ => {
                buffers += 1;
                if buffers == 1 && matches!(c.data, Data::Full(_) | Data::Digest(_)) {
                    data_text(c)
                } else if let (1, Some(size), Some(mode)) = (buffers, c.size, c.st_mode) {
                    format!("{{st_mode=0{mode:o}, st_size={size}, ...}}")
                } else if let (1, Some(r)) = (buffers, &c.result) {
                    quote(r, 4096)
                } else {
                    "...".into()
                }
            }
        });
    }
    out
}

fn returns_fd(op: &str) -> bool {
    matches!(
        op,
        "open" | "openat" | "creat" | "opendir" | "fdopendir" | "fopen" | "freopen" | "fdopen"
    )
}

pub fn text_call(c: &Call, start: u64) -> String {
    let ret = if c.failed() {
        format!("-1 {} ({})", errno_name(c.errno), errno_message(c.errno))
    } else if c.op.is("mmap") {
        format!("{:#x}", c.ret)
    } else if returns_fd(c.op.name()) {
        match &c.resolved {
            Some(p) => format!("{}{}", c.ret, angle(p)),
            None => c.ret.to_string(),
        }
    } else {
        c.ret.to_string()
    };
    let pid = pid_tid(c.pid, c.tid);
    // What the shim's fstat said of the file as it was mapped.
    let size = match c.size {
        Some(s) if c.op.is("mmap") => format!(" [file size {s}]"),
        _ => String::new(),
    };
    format!(
        "{pid} {} {}({}) = {ret} <{:.6}>{size}",
        timestamp(start, c.start_ns),
        c.op,
        args_text(c).join(", "),
        c.duration_ns() as f64 / 1e9
    )
}

fn pid_tid(pid: i32, tid: i32) -> String {
    if pid == tid {
        format!("{pid:<6}")
    } else {
        format!("{:<6}", format!("{pid}/{tid}"))
    }
}

/// A mapped access in the calls' style: the address with the file and
/// offset it touched, as `-y` gives an fd's path, then what the kernel
/// said of it.
pub fn text_mapped(m: &Mapped, start: u64) -> String {
    let at = match (&m.resolved, m.offset) {
        (Some(p), Some(o)) => format!(
            "{:#x}{}",
            m.addr,
            angle(&[p.as_slice(), format!("+{o:#x}").as_bytes()].concat())
        ),
        _ => format!("{:#x}", m.addr),
    };
    let mut notes = Vec::new();
    if m.resolved.is_none() {
        notes.push("not in a file mapping the trace saw made".to_string());
    }
    if m.major {
        notes.push("major: waited for the device".into());
    }
    if m.in_kernel {
        notes.push("touched by a system call".into());
    }
    if let Some((a, b)) = m.around {
        notes.push(format!(
            "file pages {a}..={b} mapped around it: their later loads are not seen"
        ));
    }
    let args = match (&m.access, &m.data) {
        (Access::Contents, Data::Full(b)) => {
            if m.superset {
                notes.push("every present page, not only the written ones".into());
            }
            format!("{at}, {}, {}", quote(b, 32), b.len())
        }
        _ => at,
    };
    let suffix = if notes.is_empty() {
        String::new()
    } else {
        format!(" [{}]", notes.join("; "))
    };
    format!(
        "{} {} {}({args}) = 0 <{:.6}>{suffix}",
        pid_tid(m.pid, m.tid),
        timestamp(start, m.start_ns),
        m.access.name(),
        m.duration_ns() as f64 / 1e9
    )
}

fn lossy(b: &Option<Vec<u8>>) -> Value {
    b.as_deref()
        .map(|b| Value::String(String::from_utf8_lossy(b).into_owned()))
        .unwrap_or(Value::Null)
}

fn json_data(d: &Data, opt: &mut dyn FnMut(&str, Value)) {
    match d {
        Data::Digest(d) => opt("data_xxh64", format!("{d:016x}").into()),
        Data::Full(b) => {
            opt("data_len", b.len().into());
            opt(
                "data_xxh64",
                format!("{:016x}", xxhash_rust::xxh64::xxh64(b, 0)).into(),
            );
        }
        Data::None => {}
    }
}

/// The fields every call and mapped access starts with: its type, times
/// (start, end, duration), pid and tid, op.
fn json_head(kind: &str, t: (u64, u64, u64), ids: (i32, i32), op: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("type".into(), kind.into());
    m.insert("start_ns".into(), t.0.into());
    m.insert("end_ns".into(), t.1.into());
    m.insert("duration_ns".into(), t.2.into());
    m.insert("pid".into(), ids.0.into());
    m.insert("tid".into(), ids.1.into());
    m.insert("op".into(), op.into());
    m
}

fn json_mapped(x: &Mapped) -> Value {
    let t = (x.start_ns, x.end_ns, x.duration_ns());
    let mut m = json_head("mapped", t, (x.pid, x.tid), x.access.name());
    m.insert("addr".into(), x.addr.into());
    m.insert("major".into(), x.major.into());
    m.insert("in_kernel".into(), x.in_kernel.into());
    let mut opt = |k: &str, v: Value| {
        if !v.is_null() {
            m.insert(k.into(), v);
        }
    };
    opt("resolved", lossy(&x.resolved));
    opt("offset", x.offset.into());
    if let Some((a, b)) = x.around {
        opt("around_first_page", a.into());
        opt("around_last_page", b.into());
    }
    if x.access == Access::Contents {
        opt("superset", x.superset.into());
    }
    json_data(&x.data, &mut opt);
    Value::Object(m)
}

pub fn json_record(r: &Record) -> Value {
    match r {
        Record::Mapped(m) => json_mapped(m),
        Record::Descriptor(d) => json!({
            "type": "descriptor",
            "start_ns": d.start_ns,
            "pid": d.pid,
            "tid": d.tid,
            "fd": d.fd.fd,
            "path": String::from_utf8_lossy(&d.fd.path),
            "flags": d.fd.flags,
            "pos": d.fd.pos,
        }),
        Record::Process(p) => json!({
            "type": "process",
            "start_ns": p.start_ns,
            "pid": p.pid,
            "ppid": p.ppid,
            "seq": p.seq,
            "exe": String::from_utf8_lossy(&p.exe),
            "argv": p.argv.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect::<Vec<_>>(),
            "cwd": String::from_utf8_lossy(&p.cwd),
            "fds": p.fds.iter().map(|f| json!({"fd": f.fd, "path": String::from_utf8_lossy(&f.path), "flags": f.flags, "pos": f.pos})).collect::<Vec<_>>(),
        }),
        Record::Call(c) => {
            let t = (c.start_ns, c.end_ns, c.duration_ns());
            let mut m = json_head("call", t, (c.pid, c.tid), c.op.name());
            m.insert("ret".into(), c.ret.into());
            m.insert("errno".into(), c.errno.into());
            if c.errno > 0 {
                m.insert("errno_name".into(), errno_name(c.errno).into());
            }
            let mut opt = |k: &str, v: Value| {
                if !v.is_null() {
                    m.insert(k.into(), v);
                }
            };
            opt("fd", c.fd.into());
            opt("fd2", c.fd2.into());
            opt("path", lossy(&c.path));
            opt("resolved", lossy(&c.resolved));
            opt("path2", lossy(&c.path2));
            opt("resolved2", lossy(&c.resolved2));
            opt("flags", c.flags.into());
            opt("mode", c.mode.into());
            opt("offset", c.offset.into());
            opt("len", c.len.into());
            opt("whence", c.whence.into());
            opt("arg", c.arg.into());
            opt("name", lossy(&c.name));
            opt("size", c.size.into());
            opt("st_mode", c.st_mode.into());
            opt("result", lossy(&c.result));
            json_data(&c.data, &mut opt);
            Value::Object(m)
        }
    }
}

fn csv_data(d: &Data) -> String {
    match d {
        Data::Digest(d) => format!("xxh64:{d:016x}"),
        Data::Full(b) => format!("xxh64:{:016x}", xxhash_rust::xxh64::xxh64(b, 0)),
        Data::None => String::new(),
    }
}

/// A mapped access in the calls' columns: the file as `resolved`, its
/// offset, the bytes of a page (or of contents) as `len`.
fn csv_mapped(m: &Mapped) -> String {
    let len = match &m.data {
        Data::Full(b) => b.len() as u64,
        _ => 4096,
    };
    let mut fields = vec![String::new(); CSV_COLUMNS.len()];
    for (k, v) in [
        ("type", "mapped".to_string()),
        ("start_ns", m.start_ns.to_string()),
        ("end_ns", m.end_ns.to_string()),
        ("duration_ns", m.duration_ns().to_string()),
        ("pid", m.pid.to_string()),
        ("tid", m.tid.to_string()),
        ("op", m.access.name().to_string()),
        ("ret", "0".into()),
        ("errno", "0".into()),
        (
            "resolved",
            m.resolved
                .as_deref()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default(),
        ),
        (
            "offset",
            m.offset.map(|o| o.to_string()).unwrap_or_default(),
        ),
        ("len", len.to_string()),
        ("data", csv_data(&m.data)),
    ] {
        let i = CSV_COLUMNS
            .iter()
            .position(|c| *c == k)
            .expect("a CSV column");
        fields[i] = v;
    }
    fields
        .iter()
        .map(|f| csv_field(f))
        .collect::<Vec<_>>()
        .join(",")
}

fn csv_call(c: &Call) -> String {
    let o = |v: Option<String>| v.unwrap_or_default();
    let b = |v: &Option<Vec<u8>>| {
        v.as_deref()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    };
    let fields = [
        "call".to_string(),
        c.start_ns.to_string(),
        c.end_ns.to_string(),
        c.duration_ns().to_string(),
        c.pid.to_string(),
        c.tid.to_string(),
        c.op.name().to_string(),
        c.ret.to_string(),
        c.errno.to_string(),
        o(c.fd.map(|v| v.to_string())),
        o(c.fd2.map(|v| v.to_string())),
        b(&c.path),
        b(&c.resolved),
        b(&c.path2),
        b(&c.resolved2),
        o(c.flags.map(|v| v.to_string())),
        o(c.mode.map(|v| v.to_string())),
        o(c.offset.map(|v| v.to_string())),
        o(c.len.map(|v| v.to_string())),
        o(c.whence.map(|v| v.to_string())),
        o(c.size.map(|v| v.to_string())),
        csv_data(&c.data),
    ];
    fields
        .iter()
        .map(|f| csv_field(f))
        .collect::<Vec<_>>()
        .join(",")
}

fsprof_core::name_table! {
    /// Linux errno names (x86-64 / generic numbering), without a pointer
    /// per name in the binary.
    static ERRNO_NAMES = ERRNO_LIST;
}

const ERRNO_LIST: &[&str] = &[
    "0",
    "EPERM",
    "ENOENT",
    "ESRCH",
    "EINTR",
    "EIO",
    "ENXIO",
    "E2BIG",
    "ENOEXEC",
    "EBADF",
    "ECHILD",
    "EAGAIN",
    "ENOMEM",
    "EACCES",
    "EFAULT",
    "ENOTBLK",
    "EBUSY",
    "EEXIST",
    "EXDEV",
    "ENODEV",
    "ENOTDIR",
    "EISDIR",
    "EINVAL",
    "ENFILE",
    "EMFILE",
    "ENOTTY",
    "ETXTBSY",
    "EFBIG",
    "ENOSPC",
    "ESPIPE",
    "EROFS",
    "EMLINK",
    "EPIPE",
    "EDOM",
    "ERANGE",
    "EDEADLK",
    "ENAMETOOLONG",
    "ENOLCK",
    "ENOSYS",
    "ENOTEMPTY",
    "ELOOP",
    "E41",
    "ENOMSG",
    "EIDRM",
    "ECHRNG",
    "EL2NSYNC",
    "EL3HLT",
    "EL3RST",
    "ELNRNG",
    "EUNATCH",
    "ENOCSI",
    "EL2HLT",
    "EBADE",
    "EBADR",
    "EXFULL",
    "ENOANO",
    "EBADRQC",
    "EBADSLT",
    "E58",
    "EBFONT",
    "ENOSTR",
    "ENODATA",
    "ETIME",
    "ENOSR",
    "ENONET",
    "ENOPKG",
    "EREMOTE",
    "ENOLINK",
    "EADV",
    "ESRMNT",
    "ECOMM",
    "EPROTO",
    "EMULTIHOP",
    "EDOTDOT",
    "EBADMSG",
    "EOVERFLOW",
    "ENOTUNIQ",
    "EBADFD",
    "EREMCHG",
    "ELIBACC",
    "ELIBBAD",
    "ELIBSCN",
    "ELIBMAX",
    "ELIBEXEC",
    "EILSEQ",
    "ERESTART",
    "ESTRPIPE",
    "EUSERS",
    "ENOTSOCK",
    "EDESTADDRREQ",
    "EMSGSIZE",
    "EPROTOTYPE",
    "ENOPROTOOPT",
    "EPROTONOSUPPORT",
    "ESOCKTNOSUPPORT",
    "EOPNOTSUPP",
    "EPFNOSUPPORT",
    "EAFNOSUPPORT",
    "EADDRINUSE",
    "EADDRNOTAVAIL",
    "ENETDOWN",
    "ENETUNREACH",
    "ENETRESET",
    "ECONNABORTED",
    "ECONNRESET",
    "ENOBUFS",
    "EISCONN",
    "ENOTCONN",
    "ESHUTDOWN",
    "ETOOMANYREFS",
    "ETIMEDOUT",
    "ECONNREFUSED",
    "EHOSTDOWN",
    "EHOSTUNREACH",
    "EALREADY",
    "EINPROGRESS",
    "ESTALE",
    "EUCLEAN",
    "ENOTNAM",
    "ENAVAIL",
    "EISNAM",
    "EREMOTEIO",
    "EDQUOT",
    "ENOMEDIUM",
    "EMEDIUMTYPE",
    "ECANCELED",
    "ENOKEY",
    "EKEYEXPIRED",
    "EKEYREVOKED",
    "EKEYREJECTED",
    "EOWNERDEAD",
    "ENOTRECOVERABLE",
    "ERFKILL",
    "EHWPOISON",
];

pub fn errno_name(e: i32) -> String {
    match e {
        -1 => "E?".into(),
        e => usize::try_from(e)
            .ok()
            .filter(|&i| i > 0)
            .and_then(|i| ERRNO_NAMES.get(i))
            .map_or_else(|| format!("E{e}"), str::to_owned),
    }
}

/// The errno for a name strace prints (`ENOENT`), if it is one.
pub fn errno_from_name(name: &str) -> Option<i32> {
    ERRNO_NAMES
        .position(name)
        .filter(|&i| i > 0)
        .map(|i| i as i32)
}

pub fn errno_message(e: i32) -> String {
    if e <= 0 {
        return "failed without an errno".into();
    }
    std::io::Error::from_raw_os_error(e)
        .to_string()
        .split(" (os error")
        .next()
        .unwrap_or("")
        .to_string()
}
