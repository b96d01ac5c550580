//! Memory mappings in a compiled trace: `mmap` of a traced file becomes a
//! command that fills a resource slot with the mapping (the replayer maps
//! the same range of its own file there), `msync` and `munmap` commands
//! name that slot. The trace gives a mapping by its address, which is the
//! traced process's: a table per process keeps address → slot, copied on
//! fork and dropped on exec, as the kernel does with the mappings.

use std::collections::BTreeMap;

use super::{Access, Compiler, Key};
use crate::event::Call;
use crate::replayfile::Command;

/// A mapping the trace made: its slot, length, and the file (string id).
#[derive(Clone, Copy, Debug)]
pub(super) struct Mapping {
    slot: u32,
    len: u64,
    node: u32,
}

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
            },
        );
        let keys = [
            (Key::Slot(fd_slot), Access::Read),
            (Key::Path(node), Access::Read),
            (Key::Slot(slot), Access::Write),
        ];
        self.emit(c, cmd, &keys);
    }

    /// `msync(addr, len, flags)` (a range of a mapping) or `munmap(addr,
    /// len)` (a whole mapping: a partial unmap is not replayed).
    fn on_mapping(&mut self, c: &Call, unmap: bool) {
        let addr = c.arg.unwrap_or(0) as u64;
        let len = c.len.unwrap_or(0);
        let found = self
            .maps
            .get(&c.pid)
            .and_then(|m| m.range(..=addr).next_back())
            .map(|(&start, &m)| (start, m))
            .filter(|(start, m)| addr - start < m.len);
        let Some((start, m)) = found else {
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
