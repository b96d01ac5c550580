//! `fsprof compile TRACE -o REPLAY`: a trace made replayable
//! ([`crate::replayfile`]), in two passes over the trace.
//!
//! 1. Traced threads' lifetimes: replay threads are assigned greedily, a
//!    replay thread taking over a traced thread that started after its
//!    previous one's last call (Replayfs reuses threads the same way).
//! 2. Commands: fds become slots of the resource table (per-process fd
//!    tables; an fd inherited across fork or kept across exec shares its
//!    slot, reference-counted, as the kernel shares the open file); written
//!    data and strings go to de-duplicated tables; the initial state is
//!    inferred ([`crate::initial`]); and each command gets the commands of
//!    other threads it must wait for: per file (by path), directory and
//!    slot, a command that changes it waits for the last change and the
//!    reads since, a command that reads it waits for the last change (as
//!    ARTC/ROOT order replays; independent calls may overlap). A wait
//!    that an earlier wait of the same thread implies (on the same thread,
//!    at that command or later) is left out.
//!
//! Calls on /proc, /sys and /dev, on fds the trace never saw opened
//! (inherited stdio, pipes) and of ops the replayer does not issue
//! (xattrs, locks) are left out and counted by reason. Loads and stores
//! through mappings are commands on the mapping's slot ([`maps`]).

mod maps;
mod reopen;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::path::Path;

use crate::event::{Call, Data, Op, ProcessInfo, Record};
use crate::file::{TraceError, TraceReader};
use crate::initial::{Initial, Observation};
use crate::replayfile::{
    Command, Compiled, ReplayHeader, CMD_FIRST_ACCESS, CMD_UNVERIFIED, FORMAT_NAME, FORMAT_VERSION,
};

/// What compiling produced, for the user.
#[derive(Clone, Debug, Default)]
pub struct CompileStats {
    pub raw_trace_bytes: u64,
    pub trace_file_bytes: u64,
    pub compiled_bytes: u64,
    pub commands: u64,
    pub threads: u32,
    pub slots: u32,
    pub buffers: u64,
    pub buffer_bytes: u64,
    /// Bytes of written data that de-duplication saved.
    pub dedup_saved_bytes: u64,
    pub initial_entries: u64,
    pub waits: u64,
    pub skipped: BTreeMap<String, u64>,
}

pub fn compile(trace: &Path, out: &Path, force: bool) -> Result<CompileStats, TraceError> {
    if !force && out.exists() {
        return Err(TraceError::Exists { path: out.into() });
    }
    let threads = assign_threads(trace)?;
    let mut reader = TraceReader::open(trace)?;
    let mut c = Compiler::new(threads);
    // `fsprof trace` since format 4 records a descriptor at its first use,
    // not the images' whole tables: forks and execs keep every slot.
    c.whole_tables = reader.header.source == "shim" && reader.header.format_version >= 4;
    while let Some(r) = reader.next_record()? {
        match r {
            Record::Process(p) => c.process(&p),
            Record::Call(call) => c.call(&call),
            Record::Mapped(m) => c.mapped(&m),
            // The fd tables follow forks and execs whole (Compiler::process);
            // a descriptor the trace never saw made is opened anew.
            Record::Descriptor(d) => c.descriptor(&d),
        }
    }
    let raw = reader.raw_bytes;
    let compiled = c.finish(&reader, raw);
    let mut stats = CompileStats {
        raw_trace_bytes: raw,
        trace_file_bytes: std::fs::metadata(trace).map(|m| m.len()).unwrap_or(0),
        commands: compiled.commands.len() as u64,
        threads: compiled.header.threads,
        slots: compiled.header.slots,
        buffers: compiled.buffers.len() as u64,
        buffer_bytes: compiled.buffers.iter().map(|b| b.len() as u64).sum(),
        initial_entries: compiled.initial.len() as u64,
        waits: compiled.commands.iter().map(|c| c.waits.len() as u64).sum(),
        skipped: compiled.header.skipped.clone(),
        ..Default::default()
    };
    stats.dedup_saved_bytes = c_saved(&compiled);
    stats.compiled_bytes = compiled.write(out, force)?;
    Ok(stats)
}

fn c_saved(c: &Compiled) -> u64 {
    let used: u64 = c
        .commands
        .iter()
        .filter_map(|k| k.buf)
        .map(|b| c.buffers[b as usize].len() as u64)
        .sum();
    let stored: u64 = c.buffers.iter().map(|b| b.len() as u64).sum();
    used.saturating_sub(stored)
}

/// Pass 1: traced (pid, tid) → replay thread, reusing a replay thread
/// whose previous traced thread made its last call before this one's first.
fn assign_threads(trace: &Path) -> Result<HashMap<(i32, i32), u32>, TraceError> {
    let mut life: HashMap<(i32, i32), (u64, u64)> = HashMap::new();
    for r in TraceReader::open(trace)? {
        let (key, start, end) = match r? {
            Record::Call(c) => ((c.pid, c.tid), c.start_ns, c.end_ns),
            Record::Mapped(m) => ((m.pid, m.tid), m.start_ns, m.end_ns),
            // A descriptor's record may become the thread's first command.
            Record::Descriptor(d) => ((d.pid, d.tid), d.start_ns, d.start_ns),
            Record::Process(_) => continue,
        };
        let e = life.entry(key).or_insert((start, end));
        e.1 = e.1.max(end);
    }
    let mut order: Vec<((i32, i32), (u64, u64))> = life.into_iter().collect();
    order.sort_by_key(|&(k, (first, _))| (first, k));
    let mut free: BinaryHeap<Reverse<(u64, u32)>> = BinaryHeap::new();
    let mut next = 0u32;
    let mut out = HashMap::new();
    for (key, (first, last)) in order {
        let id = match free.peek() {
            Some(&Reverse((end, id))) if end < first => {
                free.pop();
                id
            }
            _ => {
                next += 1;
                next - 1
            }
        };
        free.push(Reverse((last, id)));
        out.insert(key, id);
    }
    Ok(out)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Key {
    Path(u32),
    Slot(u32),
}

#[derive(Default)]
struct Hazard {
    last_write: Option<(u32, u32)>,
    /// Per thread, its latest read since the last write.
    reads: Vec<(u32, u32)>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    Read,
    Write,
}

struct Slot {
    refs: u32,
    /// The file it was opened on (string id).
    node: u32,
    /// File position as far as the trace tells (for sequential reads).
    pos: Option<u64>,
}

struct Compiler {
    thread_of: HashMap<(i32, i32), u32>,
    per_thread: Vec<u32>,
    thread_map: Vec<Vec<[i32; 2]>>,
    strings: Vec<Vec<u8>>,
    string_ids: HashMap<Vec<u8>, u32>,
    buffers: Vec<Vec<u8>>,
    buffer_ids: HashMap<(u64, usize), Vec<u32>>,
    fds: HashMap<i32, HashMap<i32, u32>>,
    /// Process records list no fds (the trace records each at its first
    /// use): an image starts with its parent's or its previous image's
    /// whole table.
    whole_tables: bool,
    /// Per process, its file mappings ([`maps`]).
    maps: HashMap<i32, maps::Maps>,
    /// Stores through mappings whose bytes are still to come ([`maps`]).
    pending_stores: maps::Pending,
    slots: Vec<Option<Slot>>,
    free_slots: BinaryHeap<Reverse<u32>>,
    hazards: HashMap<Key, Hazard>,
    /// Per replay thread, per other thread: the highest command index it
    /// already waits for.
    waited: Vec<HashMap<u32, u32>>,
    touched: std::collections::HashSet<u32>,
    initial: Initial,
    commands: Vec<Command>,
    skipped: BTreeMap<String, u64>,
    first_ns: Option<u64>,
    last_ns: u64,
}

fn special(path: &[u8]) -> bool {
    path.first() != Some(&b'/')
        || ["/proc", "/sys", "/dev"].iter().any(|p| {
            path.starts_with(p.as_bytes()) && matches!(path.get(p.len()), None | Some(b'/'))
        })
}

/// `path` without `.` components, repeated or trailing slashes. `..` stays:
/// whether it undoes the component before it depends on symlinks, which
/// only the kernel (under the replay root) knows.
pub fn clean(path: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(path.len());
    for comp in path.split(|&b| b == b'/') {
        if comp.is_empty() || comp == b"." {
            continue;
        }
        out.push(b'/');
        out.extend_from_slice(comp);
    }
    if out.is_empty() {
        out.push(b'/');
    }
    out
}

/// Whether `path` ends in a slash or `/.` (not `/` itself): the kernel
/// then resolves it only to a directory (`stat("file/")` is ENOTDIR), so
/// the command keeps a trailing slash that [`clean`] takes off the node.
pub fn names_a_directory(path: &[u8]) -> bool {
    let last = path.rsplit(|&b| b == b'/').next().unwrap_or_default();
    path.len() > 1 && path.contains(&b'/') && (last.is_empty() || last == b".")
}

/// `path` (cleaned) with the trailing slash that makes it name a directory.
fn with_slash(path: &[u8], dir: bool) -> Vec<u8> {
    let mut p = path.to_vec();
    if dir && p.last() != Some(&b'/') {
        p.push(b'/');
    }
    p
}

pub fn parent(path: &[u8]) -> &[u8] {
    let trimmed = path.strip_suffix(b"/").unwrap_or(path);
    match trimmed.iter().rposition(|&b| b == b'/') {
        Some(0) => b"/",
        Some(i) => &trimmed[..i],
        None => b"/",
    }
}

/// Open flags of an fopen mode string.
pub fn fopen_flags(mode: &[u8]) -> i64 {
    let plus = mode.contains(&b'+');
    let base = match mode.first() {
        Some(b'w') => {
            libc::O_CREAT | libc::O_TRUNC | if plus { libc::O_RDWR } else { libc::O_WRONLY }
        }
        Some(b'a') => {
            libc::O_CREAT | libc::O_APPEND | if plus { libc::O_RDWR } else { libc::O_WRONLY }
        }
        _ => {
            if plus {
                libc::O_RDWR
            } else {
                libc::O_RDONLY
            }
        }
    };
    let x = if mode.contains(&b'x') {
        libc::O_EXCL
    } else {
        0
    };
    (base | x) as i64
}

/// Ops whose commands move the fd's file position.
fn moves_position(op: &str) -> bool {
    matches!(
        op,
        "read"
            | "write"
            | "readv"
            | "writev"
            | "lseek"
            | "fread"
            | "fwrite"
            | "fgets"
            | "fputs"
            | "fprintf"
            | "puts"
            | "fputc"
            | "dprintf"
            | "getline"
            | "getdelim"
            | "fseek"
            | "readdir"
            | "getdents64"
            | "fflush"
    )
}

fn writes_file(op: &str) -> bool {
    is_write(op)
        || matches!(
            op,
            "fflush"
                | "ftruncate"
                | "fallocate"
                | "posix_fallocate"
                | "fsync"
                | "fdatasync"
                | "sync_file_range"
                | "fchmod"
                | "fchown"
                | "futimens"
                | "futimes"
        )
}

/// The ops the replayer issues, and on what: `f` an fd slot, `p` a path,
/// `o` an open (path → slot), `c` a close.
fn replay_kind(op: &str) -> Option<char> {
    Some(match op {
        "open" | "openat" | "creat" | "opendir" | "fopen" => 'o',
        "fdopen" | "fdopendir" => 'w',
        "close" | "fclose" | "closedir" => 'c',
        "read" | "write" | "pread" | "pwrite" | "readv" | "writev" | "preadv" | "pwritev"
        | "preadv2" | "pwritev2" | "lseek" | "fstat" | "fsync" | "fdatasync" | "syncfs"
        | "sync_file_range" | "ftruncate" | "fallocate" | "posix_fallocate" | "posix_fadvise"
        | "fchmod" | "fchown" | "futimens" | "futimes" | "fchdir" | "readdir" | "getdents64"
        | "fstatfs" | "fstatvfs" | "flock" | "fread" | "fwrite" | "fgets" | "fputs" | "fflush"
        | "getline" | "getdelim" | "fseek" | "ftell" | "fprintf" | "puts" | "fputc" | "dprintf" => {
            'f'
        }
        "fcntl" => 'f',
        "sendfile" | "copy_file_range" => 'f',
        "stat" | "lstat" | "fstatat" | "statx" | "access" | "faccessat" | "truncate" | "mkdir"
        | "mkdirat" | "rmdir" | "unlink" | "unlinkat" | "rename" | "renameat" | "renameat2"
        | "link" | "linkat" | "symlink" | "symlinkat" | "readlink" | "readlinkat" | "chmod"
        | "fchmodat" | "chown" | "lchown" | "fchownat" | "utimensat" | "utime" | "utimes"
        | "lutimes" | "chdir" | "statfs" | "statvfs" | "mknod" | "mknodat" => 'p',
        "sync" => 's',
        _ => return None,
    })
}

impl Compiler {
    fn new(thread_of: HashMap<(i32, i32), u32>) -> Self {
        let n = thread_of.values().map(|&t| t + 1).max().unwrap_or(0);
        let mut thread_map = vec![Vec::new(); n as usize];
        let mut order: Vec<_> = thread_of.iter().collect();
        order.sort();
        for (&(pid, tid), &t) in order {
            thread_map[t as usize].push([pid, tid]);
        }
        Compiler {
            thread_of,
            per_thread: vec![0; n as usize],
            thread_map,
            strings: Vec::new(),
            string_ids: HashMap::new(),
            buffers: Vec::new(),
            buffer_ids: HashMap::new(),
            fds: HashMap::new(),
            whole_tables: false,
            maps: HashMap::new(),
            pending_stores: HashMap::new(),
            slots: Vec::new(),
            free_slots: BinaryHeap::new(),
            hazards: HashMap::new(),
            waited: vec![HashMap::new(); n as usize],
            touched: Default::default(),
            initial: Initial::default(),
            commands: Vec::new(),
            skipped: BTreeMap::new(),
            first_ns: None,
            last_ns: 0,
        }
    }

    fn skip(&mut self, why: &str) {
        *self.skipped.entry(why.to_string()).or_default() += 1;
    }

    fn string(&mut self, s: &[u8]) -> u32 {
        if let Some(&id) = self.string_ids.get(s) {
            return id;
        }
        let id = self.strings.len() as u32;
        self.strings.push(s.to_vec());
        self.string_ids.insert(s.to_vec(), id);
        id
    }

    fn buffer(&mut self, b: &[u8]) -> u32 {
        let key = (xxhash_rust::xxh64::xxh64(b, 0), b.len());
        if let Some(ids) = self.buffer_ids.get(&key) {
            // Same hash and length: compare, a collision must not merge
            // different data.
            if let Some(&id) = ids.iter().find(|&&id| self.buffers[id as usize] == b) {
                return id;
            }
        }
        let id = self.buffers.len() as u32;
        self.buffers.push(b.to_vec());
        self.buffer_ids.entry(key).or_default().push(id);
        id
    }

    fn new_slot(&mut self, node: u32) -> u32 {
        let id = match self.free_slots.pop() {
            Some(Reverse(id)) => id,
            None => {
                self.slots.push(None);
                self.slots.len() as u32 - 1
            }
        };
        self.slots[id as usize] = Some(Slot {
            refs: 1,
            node,
            pos: Some(0),
        });
        id
    }

    /// A process image starts: a forked child shares its parent's slots
    /// for the fds it inherited; an exec'd image keeps its pid's slots for
    /// the fds that survived the exec.
    fn process(&mut self, p: &ProcessInfo) {
        let previous = self.fds.remove(&p.pid);
        let from_exec = previous.is_some();
        let source = previous
            .or_else(|| self.fds.get(&p.ppid).cloned())
            .unwrap_or_default();
        let mut table = HashMap::new();
        let kept: Vec<i32> = match self.whole_tables {
            // A fork copies the whole table. An exec keeps what was not
            // close-on-exec, which the trace no longer says: every slot is
            // kept, and the replay closes at its end what the image did not.
            true => source.keys().copied().collect(),
            false => p.fds.iter().map(|f| f.fd).collect(),
        };
        for fd in kept {
            if let Some(&slot) = source.get(&fd) {
                if !from_exec {
                    if let Some(s) = self.slots[slot as usize].as_mut() {
                        s.refs += 1;
                    }
                }
                table.insert(fd, slot);
            }
        }
        // Fds an exec closed (close-on-exec) give back their reference;
        // the replayer closes what is left open at the end.
        if from_exec {
            for (fd, slot) in &source {
                if !table.contains_key(fd) {
                    if let Some(s) = self.slots[*slot as usize].as_mut() {
                        s.refs = s.refs.saturating_sub(1);
                    }
                }
            }
        }
        self.fds.insert(p.pid, table);
        self.maps_of_new_image(p.pid, p.ppid, from_exec);
    }

    fn slot_of(&self, pid: i32, fd: Option<i32>) -> Option<u32> {
        self.fds.get(&pid)?.get(&fd?).copied()
    }

    fn call(&mut self, c: &Call) {
        let op = c.op.name();
        if op == "dup2" {
            return self.dup2(c);
        }
        let Some(kind) =
            replay_kind(op).or(matches!(op, "mmap" | "msync" | "munmap").then_some('m'))
        else {
            self.skip("op not replayed (xattrs, ...)");
            return;
        };
        if op == "fcntl" {
            return self.fcntl(c);
        }
        if matches!(op, "mmap" | "msync" | "munmap") {
            return self.mapping(c);
        }
        let dir = [&c.resolved, &c.resolved2].map(|p| p.as_deref().is_some_and(names_a_directory));
        let Some(c) = self.admit(c, kind) else { return };
        let c = &c;
        let mut cmd = Command {
            t_ns: c.start_ns,
            dur_ns: c.duration_ns(),
            op: c.op,
            flags: c.flags.unwrap_or(0),
            mode: c.mode.unwrap_or(0),
            offset: c.offset.unwrap_or(0),
            len: c.len.unwrap_or(0),
            whence: c.whence.unwrap_or(0),
            arg: c.arg.unwrap_or(0),
            ret: c.ret,
            errno: c.errno,
            ..Default::default()
        };
        if matches!(op, "copy_file_range" | "sendfile") {
            // `cat` and `cp` copy "everything" with a length of ~2^63: the
            // replay copies what the call did (a failed one nothing: the
            // kernel checks the descriptors before the length), which is
            // also what the replay's space budget is charged.
            cmd.len = cmd.len.min(c.ret.max(0) as u64);
        }
        let mut keys: Vec<(Key, Access)> = Vec::new();
        let node = match kind {
            'f' | 'w' | 'c' => match self.on_fd(c, kind, &mut cmd, &mut keys) {
                Some(node) => node,
                None => return,
            },
            'o' | 'p' => Some(self.on_path(c, dir, &mut cmd, &mut keys)),
            _ => None,
        };
        self.data_and_state(c, node, dir[0], &mut cmd);
        if self.effects(c, kind, node, &mut cmd, &mut keys) {
            self.emit(c, cmd, &keys);
        }
    }

    /// The call with its resolved paths cleaned, or None (counted as
    /// skipped) when a path it needs is unknown or under /proc, /sys, /dev.
    fn admit(&mut self, c: &Call, kind: char) -> Option<Call> {
        let op = c.op.name();
        let mut c = c.clone();
        c.resolved = c
            .resolved
            .as_deref()
            .filter(|p| p.first() == Some(&b'/'))
            .map(clean);
        c.resolved2 = c
            .resolved2
            .as_deref()
            .filter(|p| p.first() == Some(&b'/'))
            .map(clean);
        if !matches!(kind, 'o' | 'p') {
            return Some(c);
        }
        match c.resolved.as_deref() {
            None => {
                self.skip("path could not be resolved");
                return None;
            }
            Some(p) if special(p) => {
                self.skip("path under /proc, /sys or /dev");
                return None;
            }
            _ => {}
        }
        if c.resolved2.as_deref().is_some_and(special) {
            self.skip("path under /proc, /sys or /dev");
            return None;
        }
        if matches!(op, "rename" | "renameat" | "renameat2" | "link" | "linkat")
            && c.resolved2.is_none()
        {
            self.skip("path could not be resolved");
            return None;
        }
        Some(c)
    }

    /// A call on an fd (`kind` f, w or c): its slots and what it touches.
    /// Returns the file's node, or None (counted as skipped) when the fd
    /// was never seen opened.
    fn on_fd(
        &mut self,
        c: &Call,
        kind: char,
        cmd: &mut Command,
        keys: &mut Vec<(Key, Access)>,
    ) -> Option<Option<u32>> {
        let op = c.op.name();
        let Some(slot) = self.slot_of(c.pid, c.fd) else {
            self.skip("fd not opened in the trace (inherited, a pipe, stdio)");
            return None;
        };
        cmd.slot = Some(slot);
        let n = self.slots[slot as usize].as_ref().map(|s| s.node);
        let slot_access = if moves_position(op) || kind == 'c' || kind == 'w' {
            Access::Write
        } else {
            Access::Read
        };
        keys.push((Key::Slot(slot), slot_access));
        if let Some(n) = n {
            let a = if writes_file(op) {
                Access::Write
            } else {
                Access::Read
            };
            keys.push((Key::Path(n), a));
        }
        if op == "sendfile" || op == "copy_file_range" {
            let Some(s2) = self.slot_of(c.pid, c.fd2) else {
                self.skip("fd not opened in the trace (inherited, a pipe, stdio)");
                return None;
            };
            cmd.slot2 = Some(s2);
            keys.push((Key::Slot(s2), Access::Write));
            if let Some(n2) = self.slots[s2 as usize].as_ref().map(|s| s.node) {
                keys.push((Key::Path(n2), Access::Write));
            }
        }
        if kind == 'w' {
            cmd.out = Some(slot);
            if let Some(m) = &c.name {
                cmd.name = Some(self.string(m));
            }
        }
        Some(n)
    }

    /// A call on a path (`kind` o or p; [`Self::admit`] checked that it
    /// has one): its strings and what it touches. Returns its node (the
    /// path without a trailing slash; `dir` says which of the call's paths
    /// had one, which its command keeps).
    fn on_path(
        &mut self,
        c: &Call,
        dir: [bool; 2],
        cmd: &mut Command,
        keys: &mut Vec<(Key, Access)>,
    ) -> u32 {
        let op = c.op.name();
        let p = c.resolved.clone().unwrap_or_default();
        let id = self.string(&p);
        cmd.path = Some(if dir[0] {
            self.string(&with_slash(&p, true))
        } else {
            id
        });
        let changes = self.changes_namespace(c);
        let a = if changes { Access::Write } else { Access::Read };
        keys.push((Key::Path(id), a));
        if changes {
            let par = self.string(parent(&p));
            keys.push((Key::Path(par), Access::Write));
        }
        if let Some(p2) = c.resolved2.as_deref() {
            let id2 = self.string(p2);
            cmd.path2 = Some(self.string(&with_slash(p2, dir[1])));
            keys.push((Key::Path(id2), Access::Write));
            let par2 = self.string(parent(p2));
            keys.push((Key::Path(par2), Access::Write));
        }
        if let Some(n) = &c.name {
            cmd.name = Some(self.string(n));
        }
        if op == "fopen" {
            cmd.flags = fopen_flags(c.name.as_deref().unwrap_or(b"r"));
        }
        if op == "opendir" {
            cmd.flags = (libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) as i64;
        }
        if op == "creat" {
            cmd.flags = (libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC) as i64;
        }
        id
    }

    /// The command's data and check flags, and what the call shows of the
    /// initial state.
    fn data_and_state(&mut self, c: &Call, node: Option<u32>, dir: bool, cmd: &mut Command) {
        let op = c.op.name();
        // Data: full data becomes a buffer; a digest or nothing leaves the
        // replayer to write `len` bytes of its own.
        if is_write(op) {
            match &c.data {
                Data::Full(d) => {
                    cmd.len = d.len() as u64;
                    cmd.buf = Some(self.buffer(d));
                }
                // fputc's result is its character, not a count.
                _ if c.ret > 0 && op != "fputc" => cmd.len = cmd.len.max(c.ret as u64),
                _ => {}
            }
        }
        if matches!(op, "getdents64" | "readdir") {
            // Listings of directories the initial state made differ in
            // size and order; only success and the end are checked.
            cmd.cflags |= CMD_UNVERIFIED;
        }
        let slot_pos = cmd
            .slot
            .and_then(|s| self.slots[s as usize].as_ref().and_then(|s| s.pos));
        let obs = Observation::of(c, node.map(|n| self.strings[n as usize].clone()), slot_pos)
            .naming_a_directory(dir);
        let content = match (&c.data, is_read(op)) {
            (Data::Full(d), true) if c.ret > 0 => Some(self.buffer(d)),
            _ => None,
        };
        self.initial.observe(&obs, content);
        if let Some(n) = node {
            if self.touched.insert(n) {
                cmd.cflags |= CMD_FIRST_ACCESS;
            }
        }
    }

    /// The call's effects on fd tables and slots; false (counted as
    /// skipped) for a close that leaves the open file to another fd.
    fn effects(
        &mut self,
        c: &Call,
        kind: char,
        node: Option<u32>,
        cmd: &mut Command,
        keys: &mut Vec<(Key, Access)>,
    ) -> bool {
        let ok = !c.failed();
        match kind {
            'o' if ok => {
                let Some(node) = node else { return true };
                let slot = self.new_slot(node);
                if c.flags.unwrap_or(0) & libc::O_APPEND as i64 != 0 {
                    if let Some(s) = self.slots[slot as usize].as_mut() {
                        s.pos = None;
                    }
                }
                cmd.out = Some(slot);
                keys.push((Key::Slot(slot), Access::Write));
                self.fds
                    .entry(c.pid)
                    .or_default()
                    .insert(c.ret as i32, slot);
            }
            'c' => {
                let Some(slot) = cmd.slot else { return true };
                if let Some(fd) = c.fd {
                    self.fds.entry(c.pid).or_default().remove(&fd);
                }
                let Some(s) = self.slots[slot as usize].as_mut() else {
                    return true;
                };
                s.refs = s.refs.saturating_sub(1);
                if s.refs > 0 {
                    // Another fd still holds the open file: nothing to do.
                    self.skip("close of an fd another fd still shares");
                    return false;
                }
                self.slots[slot as usize] = None;
                self.free_slots.push(Reverse(slot));
            }
            'f' if ok => self.advance(cmd.slot, c),
            _ => {}
        }
        true
    }

    /// Follows the slot's file position (for the initial state's sizes).
    fn advance(&mut self, slot: Option<u32>, c: &Call) {
        let Some(s) = slot.and_then(|s| self.slots[s as usize].as_mut()) else {
            return;
        };
        let op = c.op.name();
        match op {
            "lseek" | "fseek" => s.pos = (c.ret >= 0 && op == "lseek").then_some(c.ret as u64),
            // A copy moves the position of the descriptor it reads (the
            // trace does not keep an offset pointer: the replay passes
            // none either).
            "read" | "write" | "readv" | "writev" | "sendfile" | "copy_file_range" | "dprintf" => {
                s.pos = s.pos.map(|p| p + c.ret.max(0) as u64)
            }
            "fread" | "fwrite" | "fgets" | "fputs" | "getline" | "getdelim" | "fprintf"
            | "puts" | "fputc" => s.pos = None,
            _ => {}
        }
    }

    fn changes_namespace(&self, c: &Call) -> bool {
        let op = c.op.name();
        match op {
            "open" | "openat" | "fopen" => {
                let f = if op == "fopen" {
                    fopen_flags(c.name.as_deref().unwrap_or(b"r"))
                } else {
                    c.flags.unwrap_or(0)
                };
                f & (libc::O_CREAT | libc::O_TRUNC) as i64 != 0
            }
            "creat" | "truncate" | "mkdir" | "mkdirat" | "rmdir" | "unlink" | "unlinkat"
            | "rename" | "renameat" | "renameat2" | "link" | "linkat" | "symlink" | "symlinkat"
            | "chmod" | "fchmodat" | "chown" | "lchown" | "fchownat" | "utimensat" | "utime"
            | "utimes" | "lutimes" | "mknod" | "mknodat" => true,
            _ => false,
        }
    }

    /// dup2 and dup3: the number now holds the old number's open file (its
    /// slot, shared as F_DUPFD shares it) or, where the trace has no slot
    /// for that, none: its next use is described and opened anew
    /// (reopen.rs), not taken for what the number held before. That loses
    /// a reference (a slot no number holds stays open to the replay's end).
    fn dup2(&mut self, c: &Call) {
        if let (Some(old), Some(new), false) = (c.fd, c.fd2, c.failed()) {
            let from = self.slot_of(c.pid, Some(old));
            let table = self.fds.entry(c.pid).or_default();
            let before = table.remove(&new);
            if let Some(slot) = from {
                table.insert(new, slot);
            }
            for (slot, add) in [(before, false), (from, true)] {
                if let Some(s) = slot.and_then(|s| self.slots[s as usize].as_mut()) {
                    s.refs = if add {
                        s.refs + 1
                    } else {
                        s.refs.saturating_sub(1)
                    };
                }
            }
        }
        self.skip("dup2 (moves a slot)");
    }

    /// F_DUPFD makes a new fd on the same open file; F_GETFL/F_SETFL and
    /// F_GETFD/F_SETFD are replayed; record locks (pointer arguments the
    /// trace does not keep) are not.
    fn fcntl(&mut self, c: &Call) {
        let Some(slot) = self.slot_of(c.pid, c.fd) else {
            return self.skip("fd not opened in the trace (inherited, a pipe, stdio)");
        };
        match c.flags.unwrap_or(-1) as i32 {
            libc::F_DUPFD | libc::F_DUPFD_CLOEXEC if !c.failed() => {
                if let Some(s) = self.slots[slot as usize].as_mut() {
                    s.refs += 1;
                }
                self.fds
                    .entry(c.pid)
                    .or_default()
                    .insert(c.ret as i32, slot);
                self.skip("fcntl F_DUPFD (shares the slot)");
            }
            libc::F_GETFL | libc::F_SETFL | libc::F_GETFD | libc::F_SETFD => {
                let cmd = Command {
                    t_ns: c.start_ns,
                    dur_ns: c.duration_ns(),
                    op: c.op,
                    slot: Some(slot),
                    flags: c.flags.unwrap_or(0),
                    arg: c.arg.unwrap_or(0),
                    ret: c.ret,
                    errno: c.errno,
                    // F_GETFL's result carries flags of this process's
                    // open (O_LARGEFILE ...): only success is compared.
                    cflags: CMD_UNVERIFIED,
                    ..Default::default()
                };
                self.emit(c, cmd, &[(Key::Slot(slot), Access::Read)]);
            }
            _ => self.skip("fcntl locks and other commands"),
        }
    }

    fn emit(&mut self, c: &Call, mut cmd: Command, keys: &[(Key, Access)]) {
        let Some(&thread) = self.thread_of.get(&(c.pid, c.tid)) else {
            return self.skip("thread unknown");
        };
        let index = self.per_thread[thread as usize];
        let me = (thread, index);
        let mut waits: Vec<(u32, u32)> = Vec::new();
        let mut need = |w: (u32, u32)| {
            if w.0 == thread {
                return;
            }
            match waits.iter_mut().find(|x| x.0 == w.0) {
                Some(x) => x.1 = x.1.max(w.1),
                None => waits.push(w),
            }
        };
        for &(key, access) in keys {
            let h = self.hazards.entry(key).or_default();
            if let Some(w) = h.last_write {
                need(w);
            }
            match access {
                Access::Read => match h.reads.iter_mut().find(|r| r.0 == thread) {
                    Some(r) => r.1 = index,
                    None => h.reads.push(me),
                },
                Access::Write => {
                    for &r in &h.reads {
                        need(r);
                    }
                    h.reads.clear();
                    h.last_write = Some(me);
                }
            }
        }
        // A wait on a command that an earlier wait of this thread already
        // covers (the same thread, that index or later) is implied.
        let known = &mut self.waited[thread as usize];
        waits.retain(|&(u, i)| known.get(&u).is_none_or(|&k| i > k));
        for &(u, i) in &waits {
            known.insert(u, i);
        }
        waits.sort();
        cmd.thread = thread;
        cmd.waits = waits;
        self.per_thread[thread as usize] += 1;
        self.first_ns.get_or_insert(c.start_ns);
        self.last_ns = self.last_ns.max(c.start_ns);
        self.commands.push(cmd);
    }

    fn finish(mut self, reader: &TraceReader, raw: u64) -> Compiled {
        let h = &reader.header;
        // Times from the first command.
        let t0 = self.first_ns.unwrap_or(0);
        for c in &mut self.commands {
            c.t_ns -= t0;
        }
        let initial = self.initial.entries(&mut |p| {
            if let Some(&id) = self.string_ids.get(p) {
                return id;
            }
            let id = self.strings.len() as u32;
            self.strings.push(p.to_vec());
            self.string_ids.insert(p.to_vec(), id);
            id
        });
        Compiled {
            header: ReplayHeader {
                format: FORMAT_NAME.into(),
                format_version: FORMAT_VERSION,
                fsprof_version: env!("CARGO_PKG_VERSION").into(),
                trace_source: h.source.clone(),
                trace_command: h.command.clone(),
                trace_host: h.run.host.clone(),
                trace_start_time: h.run.start_time.clone(),
                trace_data: h.data.clone(),
                duration_ns: self.last_ns.saturating_sub(t0),
                threads: self.per_thread.len() as u32,
                slots: self.slots.len() as u32,
                thread_map: self.thread_map,
                ops: Op::names(),
                skipped: self.skipped,
                raw_trace_bytes: raw,
            },
            strings: self.strings,
            buffers: self.buffers,
            initial,
            commands: self.commands,
        }
    }
}

fn is_write(op: &str) -> bool {
    matches!(
        op,
        "write"
            | "pwrite"
            | "writev"
            | "pwritev"
            | "pwritev2"
            | "fwrite"
            | "fputs"
            | "fprintf"
            | "puts"
            | "fputc"
            | "dprintf"
    )
}

fn is_read(op: &str) -> bool {
    matches!(
        op,
        "read" | "pread" | "readv" | "preadv" | "preadv2" | "fread"
    )
}
