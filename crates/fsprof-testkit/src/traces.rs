//! Traces written by hand, for the trace compiler and the replayer: one
//! process (pid 1), calls 1 µs apart, paths as traced and as resolved.

use std::path::Path;

use fsprof_trace::event::{
    Access, Call, Data, Descriptor, FdInfo, Mapped, Op, ProcessInfo, Record,
};
use fsprof_trace::file::{TraceHeader, TraceWriter};

pub struct HandTrace {
    w: TraceWriter,
    /// When the last call started, in ns.
    t: u64,
}

impl HandTrace {
    /// A trace at `path` (`data`: the data mode its header claims) of pid 1,
    /// working in `cwd`.
    pub fn create(path: &Path, data: &str, cwd: &str) -> HandTrace {
        let mut w = TraceWriter::create(path, &TraceHeader::new("test", data), true)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        w.push(&Record::Process(ProcessInfo {
            pid: 1,
            cwd: cwd.as_bytes().to_vec(),
            ..Default::default()
        }))
        .expect("writing the process record");
        HandTrace { w, t: 0 }
    }

    /// The next call, for the caller to complete and [`push`](Self::push):
    /// thread `tid` of pid 1 calls `op` on `path` (as traced and as
    /// resolved) and gets `ret`, 1 µs after the previous call, taking 10 ns.
    pub fn next(&mut self, tid: i32, op: &str, path: Option<&str>, ret: i64) -> Call {
        self.t += 1000;
        let bytes = path.map(|p| p.as_bytes().to_vec());
        Call {
            start_ns: self.t,
            end_ns: self.t + 10,
            pid: 1,
            tid,
            op: Op::named(op),
            ret,
            path: bytes.clone(),
            resolved: bytes,
            ..Default::default()
        }
    }

    pub fn push(&mut self, c: Call) {
        self.w.push(&Record::Call(c)).expect("writing a call");
    }

    /// An access of thread `tid` of pid 1 through a mapping at `addr`
    /// (a fault, or contents with their bytes), 1 µs after the previous.
    pub fn push_mapped(&mut self, tid: i32, access: Access, addr: u64, data: Data) {
        self.t += 1000;
        let m = Mapped {
            start_ns: self.t,
            end_ns: self.t + 10,
            pid: 1,
            tid,
            access,
            addr,
            data,
            ..Default::default()
        };
        self.w
            .push(&Record::Mapped(m))
            .expect("writing a mapped access");
    }

    /// A descriptor thread `tid` of pid 1 used before the trace saw it
    /// made: what `/proc/self/fd` named (`path`), its open flags and
    /// position, 1 µs after the previous record.
    pub fn push_descriptor(&mut self, tid: i32, fd: i32, path: &str, flags: i64, pos: i64) {
        self.t += 1000;
        let d = Descriptor {
            start_ns: self.t,
            pid: 1,
            tid,
            fd: FdInfo {
                fd,
                path: path.as_bytes().to_vec(),
                flags,
                pos,
            },
        };
        self.w
            .push(&Record::Descriptor(d))
            .expect("writing a descriptor");
    }

    /// Ends the trace (no calls dropped) when the last call started.
    pub fn finish(self) {
        self.w.finish(0, self.t).expect("finishing the trace");
    }
}
