//! Memory mappings in a compiled trace: `mmap` of a traced file becomes a
//! command that fills a resource slot with the mapping (the replayer maps
//! the same range of its own file there), `msync` and `munmap` commands
//! name that slot. The trace gives a mapping by its address, which is the
//! traced process's: a table per process keeps address → slot, copied on
//! fork and dropped on exec, as the kernel does with the mappings.
//!
//! The loads and stores the trace saw through a mapping (page faults)
//! become `mapped_read` and `mapped_write` commands on its slot, at the
//! page's offset in the mapping. A store's bytes come later in the trace
//! (the contents of the written pages, captured at the `msync` or
//! `munmap` after it, `--data full`): the compiler fills them into the
//! store's command when they come. Contents no store's fault was seen for
//! (an unprivileged capture, a large folio mapped writable whole at one
//! fault) are replayed as stores of their own, just before the `msync` or
//! `munmap` they were captured at.

use std::collections::{BTreeMap, HashMap};

use super::{Access, Compiler, Key};
use crate::event::{Access as Touch, Call, Data, Mapped};
use crate::replayfile::Command;

/// A mapping the trace made: its slot, length, the file (string id) and
/// the file offset it starts at; whether stores through it reach the file.
#[derive(Clone, Copy, Debug)]
pub(super) struct Mapping {
    slot: u32,
    len: u64,
    node: u32,
    file_off: u64,
    shared: bool,
}

/// Stores whose bytes are still to come: (slot, page offset in the
/// mapping) → the command's index.
pub(super) type Pending = HashMap<(u32, u64), usize>;

/// Per process: start address → mapping.
pub(super) type Maps = BTreeMap<u64, Mapping>;

const PAGE: u64 = 4096;

impl Compiler {
    /// `mmap`, `msync` or `munmap` (the shim traces file mappings only).
    pub(super) fn mapping(&mut self, c: &Call) {
        if c.failed() {
            return self.skip("mmap, msync or munmap that failed");
        }
        match c.op.name() {
            "mmap" => self.mmap(c),
            "msync" => self.on_mapping(c, false),
            _ => self.on_mapping(c, true),
        }
    }

    fn mmap(&mut self, c: &Call) {
        let Some(fd_slot) = self.slot_of(c.pid, c.fd) else {
            return self.skip("fd not opened in the trace (inherited, a pipe, stdio)");
        };
        let Some(node) = self.slots[fd_slot as usize].as_ref().map(|s| s.node) else {
            return self.skip("fd not opened in the trace (inherited, a pipe, stdio)");
        };
        // The file's size as the mapping was made (the shim's fstat), when
        // the trace has not changed it before: the initial state's.
        let path = self.strings[node as usize].clone();
        let obs = crate::initial::Observation::of(c, Some(path), None);
        self.initial.observe(&obs, None);
        let len = c.len.unwrap_or(0);
        let slot = self.new_slot(node);
        let cmd = Command {
            t_ns: c.start_ns,
            dur_ns: c.duration_ns(),
            op: c.op,
            slot: Some(fd_slot),
            out: Some(slot),
            flags: c.flags.unwrap_or(0),
            // The protection (PROT_*).
            mode: c.mode.unwrap_or(0),
            offset: c.offset.unwrap_or(0),
            len,
            ret: c.ret,
            errno: c.errno,
            ..Default::default()
        };
        self.maps.entry(c.pid).or_default().insert(
            c.ret as u64,
            Mapping {
                slot,
                len: len.div_ceil(PAGE) * PAGE,
                node,
                file_off: c.offset.unwrap_or(0).max(0) as u64,
                shared: c.flags.unwrap_or(0) & libc::MAP_SHARED as i64 != 0,
            },
        );
        let keys = [
            (Key::Slot(fd_slot), Access::Read),
            (Key::Path(node), Access::Read),
            (Key::Slot(slot), Access::Write),
        ];
        self.emit(c, cmd, &keys);
    }

    /// The mapping of process `pid` that `addr` is in: its start and itself.
    fn mapping_at(&self, pid: i32, addr: u64) -> Option<(u64, Mapping)> {
        self.maps
            .get(&pid)
            .and_then(|m| m.range(..=addr).next_back())
            .map(|(&start, &m)| (start, m))
            .filter(|(start, m)| addr - start < m.len)
    }

    /// A load or store the trace saw through a mapping, or the contents
    /// of pages written through one.
    pub(super) fn mapped(&mut self, m: &Mapped) {
        let Some((start, map)) = self.mapping_at(m.pid, m.addr) else {
            return self.skip("access through a mapping the trace did not see made");
        };
        match m.access {
            Touch::Read | Touch::Write => self.fault(m, start, map),
            Touch::Contents => self.contents(m, start, map),
        }
    }

    fn fault(&mut self, m: &Mapped, start: u64, map: Mapping) {
        let page = (m.addr & !(PAGE - 1)) - start;
        let write = m.access == Touch::Write;
        let Some(op) = m.op() else { return };
        let path = self.strings[map.node as usize].clone();
        self.initial
            .mapped(&path, map.file_off + page, write && map.shared);
        let cmd = Command {
            t_ns: m.start_ns,
            dur_ns: m.duration_ns(),
            op,
            slot: Some(map.slot),
            // The file, for the replay's report (the slot is what is used).
            path: Some(map.node),
            offset: page as i64,
            len: PAGE,
            ..Default::default()
        };
        let file = if write && map.shared {
            Access::Write
        } else {
            Access::Read
        };
        let keys = [
            (Key::Slot(map.slot), Access::Read),
            (Key::Path(map.node), file),
        ];
        let before = self.commands.len();
        self.emit_mapped(m, cmd, &keys);
        if write && map.shared && self.commands.len() > before {
            self.pending_stores.insert((map.slot, page), before);
        }
    }

    /// Bytes of written pages: into the stores whose faults the trace
    /// saw, and as stores of their own (at the time the bytes were taken,
    /// before the msync or munmap) for the rest: a page the kernel mapped
    /// writable together with another (a large folio), a page written by
    /// a call, or a trace without faults. The bytes are what the file
    /// gets; the faults only say when.
    fn contents(&mut self, m: &Mapped, start: u64, map: Mapping) {
        let Data::Full(bytes) = &m.data else { return };
        let first = m.addr - start;
        let end = first.saturating_add(bytes.len() as u64).min(map.len);
        // The pieces no store took, as runs [lo, hi) of the mapping.
        let mut left: Vec<(u64, u64)> = Vec::new();
        let mut page = first & !(PAGE - 1);
        while page < end {
            let (lo, hi) = (page.max(first), (page + PAGE).min(end));
            let b = &bytes[(lo - first) as usize..(hi - first) as usize];
            match self.pending_stores.remove(&(map.slot, page)) {
                Some(idx) => {
                    let id = self.buffer(b);
                    let cmd = &mut self.commands[idx];
                    (cmd.buf, cmd.len, cmd.offset) = (Some(id), hi - lo, lo as i64);
                }
                None => match left.last_mut() {
                    Some(run) if run.1 == lo => run.1 = hi,
                    _ => left.push((lo, hi)),
                },
            }
            page += PAGE;
        }
        for (lo, hi) in left {
            let b = &bytes[(lo - first) as usize..(hi - first) as usize];
            self.store_of_contents(m, map, lo, b);
        }
    }

    /// A store of `b` at `at` in the mapping, of contents no fault took.
    fn store_of_contents(&mut self, m: &Mapped, map: Mapping, at: u64, b: &[u8]) {
        let cmd = Command {
            t_ns: m.start_ns,
            op: crate::event::Op::named(crate::event::MAPPED_OPS[1]),
            slot: Some(map.slot),
            path: Some(map.node),
            offset: at as i64,
            len: b.len() as u64,
            buf: Some(self.buffer(b)),
            ..Default::default()
        };
        let path = self.strings[map.node as usize].clone();
        self.initial.mapped(&path, map.file_off + at, map.shared);
        let keys = [
            (Key::Slot(map.slot), Access::Read),
            (Key::Path(map.node), Access::Write),
        ];
        self.emit_mapped(m, cmd, &keys);
    }

    /// [`Compiler::emit`] for a mapped access (emit takes a call).
    fn emit_mapped(&mut self, m: &Mapped, cmd: Command, keys: &[(Key, Access)]) {
        let call = Call {
            start_ns: m.start_ns,
            end_ns: m.end_ns,
            pid: m.pid,
            tid: m.tid,
            ..Default::default()
        };
        self.emit(&call, cmd, keys);
    }

    /// `msync(addr, len, flags)` (a range of a mapping) or `munmap(addr,
    /// len)` (a whole mapping: a partial unmap is not replayed).
    fn on_mapping(&mut self, c: &Call, unmap: bool) {
        let addr = c.arg.unwrap_or(0) as u64;
        let len = c.len.unwrap_or(0);
        let Some((start, m)) = self.mapping_at(c.pid, addr) else {
            return self.skip("msync or munmap of a mapping the trace did not see made");
        };
        if unmap && (addr != start || len.div_ceil(PAGE) * PAGE < m.len) {
            return self.skip("munmap of part of a mapping");
        }
        let cmd = Command {
            t_ns: c.start_ns,
            dur_ns: c.duration_ns(),
            op: c.op,
            slot: Some(m.slot),
            flags: c.flags.unwrap_or(0),
            offset: (addr - start) as i64,
            len,
            ret: c.ret,
            errno: c.errno,
            ..Default::default()
        };
        let keys = [
            (Key::Slot(m.slot), Access::Write),
            (Key::Path(m.node), Access::Write),
        ];
        if unmap {
            self.maps.get_mut(&c.pid).map(|t| t.remove(&start));
            // Another process (a fork) may still hold it: the slot is
            // freed with the last.
            if !self
                .maps
                .values()
                .any(|t| t.values().any(|x| x.slot == m.slot))
            {
                self.slots[m.slot as usize] = None;
                self.free_slots.push(std::cmp::Reverse(m.slot));
                // Stores whose bytes never came stay stores of the bytes
                // that are there; the slot's next mapping is another.
                self.pending_stores.retain(|k, _| k.0 != m.slot);
            }
        }
        self.emit(c, cmd, &keys);
    }

    /// A new process image: a fork inherits its parent's mappings, an exec
    /// (an image of a pid that had one) has none.
    pub(super) fn maps_of_new_image(&mut self, pid: i32, ppid: i32, from_exec: bool) {
        let inherited = if from_exec {
            Maps::new()
        } else {
            self.maps.get(&ppid).cloned().unwrap_or_default()
        };
        self.maps.insert(pid, inherited);
    }
}
