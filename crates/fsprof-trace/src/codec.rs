//! The byte encoding of records inside a trace block (before zstd):
//! LEB128 varints, zigzag for signed values, start times as deltas. Every
//! read is bounds-checked: a corrupt block is an error, never a panic or a
//! huge allocation. Layout in `docs/trace-format.md`.

use crate::event::{Access, Call, Data, Descriptor, FdInfo, Mapped, Op, ProcessInfo, Record};

/// Strings and data longer than this are refused when decoding (no
/// honest trace has a 1 GiB path).
const MAX_BYTES: u64 = 1 << 30;
const MAX_LIST: u64 = 1 << 20;

const KIND_CALL: u8 = 1;
const KIND_PROCESS: u8 = 2;
/// Version 3 on.
const KIND_MAPPED: u8 = 3;
/// Version 4 on.
const KIND_DESCRIPTOR: u8 = 4;

// Presence bits of a mapped record's optional fields.
const M_AROUND: u32 = 1 << 0;
const M_RESOLVED: u32 = 1 << 1;
const M_OFFSET: u32 = 1 << 2;
const M_DATA: u32 = 1 << 3;
const M_DIGEST: u32 = 1 << 4;
const M_KNOWN: u32 = M_AROUND | M_RESOLVED | M_OFFSET | M_DATA | M_DIGEST;
// Its flags.
const MF_MAJOR: u64 = 1 << 0;
const MF_IN_KERNEL: u64 = 1 << 1;
const MF_SUPERSET: u64 = 1 << 2;
const MF_KNOWN: u64 = (1 << 3) - 1;

// Presence bits of a call's optional fields.
const F_FD: u32 = 1 << 0;
const F_FD2: u32 = 1 << 1;
const F_PATH: u32 = 1 << 2;
const F_PATH2: u32 = 1 << 3;
const F_RESOLVED: u32 = 1 << 4;
const F_RESOLVED2: u32 = 1 << 5;
const F_FLAGS: u32 = 1 << 6;
const F_MODE: u32 = 1 << 7;
const F_OFFSET: u32 = 1 << 8;
const F_LEN: u32 = 1 << 9;
const F_WHENCE: u32 = 1 << 10;
const F_SIZE: u32 = 1 << 11;
const F_STMODE: u32 = 1 << 12;
const F_DIGEST: u32 = 1 << 13;
const F_DATA: u32 = 1 << 14;
const F_RESULT: u32 = 1 << 15;
const F_NAME: u32 = 1 << 16;
const F_ARG: u32 = 1 << 17;
const F_KNOWN: u32 = (1 << 18) - 1;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(pub String);

fn bad(what: &str) -> DecodeError {
    DecodeError(what.to_string())
}

pub fn put_u64(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub fn put_i64(out: &mut Vec<u8>, v: i64) {
    put_u64(out, ((v << 1) ^ (v >> 63)) as u64);
}

pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u64(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A cursor over a block's bytes.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        let b = *self
            .buf
            .get(self.pos)
            .ok_or_else(|| bad("record cut short"))?;
        self.pos += 1;
        Ok(b)
    }

    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                if shift == 63 && b > 1 {
                    return Err(bad("varint overflows 64 bits"));
                }
                return Ok(v);
            }
        }
        Err(bad("varint longer than 10 bytes"))
    }

    pub fn i64(&mut self) -> Result<i64, DecodeError> {
        let u = self.u64()?;
        Ok(((u >> 1) as i64) ^ -((u & 1) as i64))
    }

    pub fn i32(&mut self) -> Result<i32, DecodeError> {
        i32::try_from(self.i64()?).map_err(|_| bad("value out of range for a 32-bit field"))
    }

    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        u32::try_from(self.u64()?).map_err(|_| bad("value out of range for a 32-bit field"))
    }

    pub fn bytes(&mut self) -> Result<Vec<u8>, DecodeError> {
        let n = self.u64()?;
        if n > MAX_BYTES || n as usize > self.buf.len() - self.pos {
            return Err(bad("string or data longer than its block"));
        }
        let v = self.buf[self.pos..self.pos + n as usize].to_vec();
        self.pos += n as usize;
        Ok(v)
    }
}

/// A call's fields borrowed from where they are: a [`Call`], or a shim
/// record a capture encodes without making a `Call` of it first
/// (`chunks::parse`). One encoder for both, so both write the same bytes.
#[derive(Clone, Copy, Debug, Default)]
pub struct CallRef<'a> {
    pub start_ns: u64,
    pub end_ns: u64,
    pub pid: i32,
    pub tid: i32,
    pub op: Op,
    pub ret: i64,
    pub errno: i32,
    pub fd: Option<i32>,
    pub fd2: Option<i32>,
    pub path: Option<&'a [u8]>,
    pub path2: Option<&'a [u8]>,
    pub resolved: Option<&'a [u8]>,
    pub resolved2: Option<&'a [u8]>,
    pub flags: Option<i64>,
    pub mode: Option<u32>,
    pub offset: Option<i64>,
    pub len: Option<u64>,
    pub whence: Option<i32>,
    pub arg: Option<i64>,
    pub name: Option<&'a [u8]>,
    pub size: Option<u64>,
    pub st_mode: Option<u32>,
    pub result: Option<&'a [u8]>,
    pub digest: Option<u64>,
    pub data: Option<&'a [u8]>,
}

impl<'a> From<&'a Call> for CallRef<'a> {
    fn from(c: &'a Call) -> Self {
        CallRef {
            start_ns: c.start_ns,
            end_ns: c.end_ns,
            pid: c.pid,
            tid: c.tid,
            op: c.op,
            ret: c.ret,
            errno: c.errno,
            fd: c.fd,
            fd2: c.fd2,
            path: c.path.as_deref(),
            path2: c.path2.as_deref(),
            resolved: c.resolved.as_deref(),
            resolved2: c.resolved2.as_deref(),
            flags: c.flags,
            mode: c.mode,
            offset: c.offset,
            len: c.len,
            whence: c.whence,
            arg: c.arg,
            name: c.name.as_deref(),
            size: c.size,
            st_mode: c.st_mode,
            result: c.result.as_deref(),
            digest: match c.data {
                Data::Digest(d) => Some(d),
                _ => None,
            },
            data: match &c.data {
                Data::Full(b) => Some(b),
                _ => None,
            },
        }
    }
}

impl CallRef<'_> {
    pub fn to_call(&self) -> Call {
        let own = |b: Option<&[u8]>| b.map(<[u8]>::to_vec);
        Call {
            start_ns: self.start_ns,
            end_ns: self.end_ns,
            pid: self.pid,
            tid: self.tid,
            op: self.op,
            ret: self.ret,
            errno: self.errno,
            fd: self.fd,
            fd2: self.fd2,
            path: own(self.path),
            path2: own(self.path2),
            resolved: own(self.resolved),
            resolved2: own(self.resolved2),
            flags: self.flags,
            mode: self.mode,
            offset: self.offset,
            len: self.len,
            whence: self.whence,
            arg: self.arg,
            name: own(self.name),
            size: self.size,
            st_mode: self.st_mode,
            result: own(self.result),
            data: match (self.data, self.digest) {
                (Some(b), _) => Data::Full(b.to_vec()),
                (None, Some(d)) => Data::Digest(d),
                (None, None) => Data::None,
            },
        }
    }
}

/// Appends one call; `prev_start` is the previous record's start in this
/// block (0 for the first), updated.
pub fn encode_call(out: &mut Vec<u8>, c: &CallRef, prev_start: &mut u64) {
    out.push(KIND_CALL);
    let bit = |b: u32, on: bool| if on { b } else { 0 };
    let bits = bit(F_FD, c.fd.is_some())
        | bit(F_FD2, c.fd2.is_some())
        | bit(F_PATH, c.path.is_some())
        | bit(F_PATH2, c.path2.is_some())
        | bit(F_RESOLVED, c.resolved.is_some())
        | bit(F_RESOLVED2, c.resolved2.is_some())
        | bit(F_FLAGS, c.flags.is_some())
        | bit(F_MODE, c.mode.is_some())
        | bit(F_OFFSET, c.offset.is_some())
        | bit(F_LEN, c.len.is_some())
        | bit(F_WHENCE, c.whence.is_some())
        | bit(F_SIZE, c.size.is_some())
        | bit(F_STMODE, c.st_mode.is_some())
        | bit(F_DIGEST, c.data.is_none() && c.digest.is_some())
        | bit(F_DATA, c.data.is_some())
        | bit(F_RESULT, c.result.is_some())
        | bit(F_NAME, c.name.is_some())
        | bit(F_ARG, c.arg.is_some());
    put_u64(out, bits as u64);
    put_i64(out, c.start_ns as i64 - *prev_start as i64);
    *prev_start = c.start_ns;
    put_u64(out, c.end_ns.saturating_sub(c.start_ns));
    put_i64(out, c.pid as i64);
    put_i64(out, c.tid as i64);
    put_u64(out, c.op.0 as u64);
    put_i64(out, c.ret);
    put_i64(out, c.errno as i64);
    let opt_i = |out: &mut Vec<u8>, v: Option<i64>| {
        if let Some(v) = v {
            put_i64(out, v)
        }
    };
    let opt_u = |out: &mut Vec<u8>, v: Option<u64>| {
        if let Some(v) = v {
            put_u64(out, v)
        }
    };
    let opt_b = |out: &mut Vec<u8>, v: Option<&[u8]>| {
        if let Some(v) = v {
            put_bytes(out, v)
        }
    };
    opt_i(out, c.fd.map(i64::from));
    opt_i(out, c.fd2.map(i64::from));
    opt_b(out, c.path);
    opt_b(out, c.path2);
    opt_b(out, c.resolved);
    opt_b(out, c.resolved2);
    opt_i(out, c.flags);
    opt_u(out, c.mode.map(u64::from));
    opt_i(out, c.offset);
    opt_u(out, c.len);
    opt_i(out, c.whence.map(i64::from));
    opt_u(out, c.size);
    opt_u(out, c.st_mode.map(u64::from));
    match (c.data, c.digest) {
        (Some(b), _) => put_bytes(out, b),
        (None, Some(d)) => out.extend_from_slice(&d.to_le_bytes()),
        (None, None) => {}
    }
    opt_b(out, c.result);
    opt_b(out, c.name);
    opt_i(out, c.arg);
}

/// Appends one record; `prev_start` is the previous record's start in this
/// block (0 for the first), updated.
pub fn encode(out: &mut Vec<u8>, r: &Record, prev_start: &mut u64) {
    match r {
        Record::Call(c) => encode_call(out, &CallRef::from(c), prev_start),
        Record::Process(p) => encode_process(out, p, prev_start),
        Record::Mapped(m) => encode_mapped(out, m, prev_start),
        Record::Descriptor(d) => encode_descriptor(out, d, prev_start),
    }
}

fn encode_descriptor(out: &mut Vec<u8>, d: &Descriptor, prev_start: &mut u64) {
    out.push(KIND_DESCRIPTOR);
    put_i64(out, d.start_ns as i64 - *prev_start as i64);
    *prev_start = d.start_ns;
    put_i64(out, d.pid as i64);
    put_i64(out, d.tid as i64);
    put_i64(out, d.fd.fd as i64);
    put_bytes(out, &d.fd.path);
    put_i64(out, d.fd.flags);
    put_i64(out, d.fd.pos);
}

fn decode_descriptor(r: &mut Reader, prev_start: &mut u64) -> Result<Record, DecodeError> {
    let start_ns = start_from(*prev_start, r.i64()?)?;
    *prev_start = start_ns;
    Ok(Record::Descriptor(Descriptor {
        start_ns,
        pid: r.i32()?,
        tid: r.i32()?,
        fd: FdInfo {
            fd: r.i32()?,
            path: r.bytes()?,
            flags: r.i64()?,
            pos: r.i64()?,
        },
    }))
}

fn encode_mapped(out: &mut Vec<u8>, m: &Mapped, prev_start: &mut u64) {
    out.push(KIND_MAPPED);
    let bit = |b: u32, on: bool| if on { b } else { 0 };
    let bits = bit(M_AROUND, m.around.is_some())
        | bit(M_RESOLVED, m.resolved.is_some())
        | bit(M_OFFSET, m.offset.is_some())
        | bit(M_DATA, matches!(m.data, Data::Full(_)))
        | bit(M_DIGEST, matches!(m.data, Data::Digest(_)));
    put_u64(out, bits as u64);
    put_i64(out, m.start_ns as i64 - *prev_start as i64);
    *prev_start = m.start_ns;
    put_u64(out, m.end_ns.saturating_sub(m.start_ns));
    put_i64(out, m.pid as i64);
    put_i64(out, m.tid as i64);
    put_u64(out, m.access as u64);
    let flag = |f: u64, on: bool| if on { f } else { 0 };
    put_u64(
        out,
        flag(MF_MAJOR, m.major) | flag(MF_IN_KERNEL, m.in_kernel) | flag(MF_SUPERSET, m.superset),
    );
    put_u64(out, m.addr);
    if let Some((a, b)) = m.around {
        put_u64(out, a);
        put_u64(out, b);
    }
    if let Some(r) = &m.resolved {
        put_bytes(out, r);
    }
    if let Some(o) = m.offset {
        put_u64(out, o);
    }
    match &m.data {
        Data::Full(b) => put_bytes(out, b),
        Data::Digest(d) => out.extend_from_slice(&d.to_le_bytes()),
        Data::None => {}
    }
}

fn encode_process(out: &mut Vec<u8>, p: &ProcessInfo, prev_start: &mut u64) {
    out.push(KIND_PROCESS);
    put_i64(out, p.start_ns as i64 - *prev_start as i64);
    *prev_start = p.start_ns;
    put_i64(out, p.pid as i64);
    put_i64(out, p.ppid as i64);
    put_u64(out, p.seq);
    put_bytes(out, &p.exe);
    put_u64(out, p.argv.len() as u64);
    for a in &p.argv {
        put_bytes(out, a);
    }
    put_bytes(out, &p.cwd);
    put_u64(out, p.fds.len() as u64);
    for f in &p.fds {
        put_i64(out, f.fd as i64);
        put_bytes(out, &f.path);
        put_i64(out, f.flags);
        put_i64(out, f.pos);
    }
}

fn start_from(prev: u64, delta: i64) -> Result<u64, DecodeError> {
    prev.checked_add_signed(delta)
        .ok_or_else(|| bad("a start time before the trace's start"))
}

/// Reads one record; `nops` is the size of the file's op table.
pub fn decode(r: &mut Reader, prev_start: &mut u64, nops: usize) -> Result<Record, DecodeError> {
    match r.u8()? {
        KIND_CALL => decode_call(r, prev_start, nops),
        KIND_PROCESS => decode_process(r, prev_start),
        KIND_MAPPED => decode_mapped(r, prev_start),
        KIND_DESCRIPTOR => decode_descriptor(r, prev_start),
        k => Err(DecodeError(format!("unknown record kind {k}"))),
    }
}

/// A call record after its kind, each field checked where it is read.
fn decode_call(r: &mut Reader, prev_start: &mut u64, nops: usize) -> Result<Record, DecodeError> {
    let bits = r.u32()?;
    if bits & !F_KNOWN != 0 {
        return Err(bad("unknown fields in a call record"));
    }
    let start_ns = start_from(*prev_start, r.i64()?)?;
    *prev_start = start_ns;
    let dur = r.u64()?;
    let end_ns = start_ns
        .checked_add(dur)
        .ok_or_else(|| bad("a call that ends after the end of time"))?;
    let pid = r.i32()?;
    let tid = r.i32()?;
    let op = r.u64()?;
    if op >= nops as u64 {
        return Err(bad("op number outside the file's op table"));
    }
    let mut c = Call {
        start_ns,
        end_ns,
        pid,
        tid,
        op: Op(op as u16),
        ret: r.i64()?,
        errno: r.i32()?,
        ..Default::default()
    };
    read_operands(r, bits, &mut c)?;
    read_payload(r, bits, &mut c)?;
    Ok(Record::Call(c))
}

/// The call's optional operands, in the order the encoder writes them:
/// descriptors, paths, flags, mode, offset, length, whence, stat results.
fn read_operands(r: &mut Reader, bits: u32, c: &mut Call) -> Result<(), DecodeError> {
    let has = |b: u32| bits & b != 0;
    if has(F_FD) {
        c.fd = Some(r.i32()?);
    }
    if has(F_FD2) {
        c.fd2 = Some(r.i32()?);
    }
    if has(F_PATH) {
        c.path = Some(r.bytes()?);
    }
    if has(F_PATH2) {
        c.path2 = Some(r.bytes()?);
    }
    if has(F_RESOLVED) {
        c.resolved = Some(r.bytes()?);
    }
    if has(F_RESOLVED2) {
        c.resolved2 = Some(r.bytes()?);
    }
    if has(F_FLAGS) {
        c.flags = Some(r.i64()?);
    }
    if has(F_MODE) {
        c.mode = Some(r.u32()?);
    }
    if has(F_OFFSET) {
        c.offset = Some(r.i64()?);
    }
    if has(F_LEN) {
        c.len = Some(r.u64()?);
    }
    if has(F_WHENCE) {
        c.whence = Some(r.i32()?);
    }
    if has(F_SIZE) {
        c.size = Some(r.u64()?);
    }
    if has(F_STMODE) {
        c.st_mode = Some(r.u32()?);
    }
    Ok(())
}

/// What the call moved or returned: a digest or the bytes of its data
/// (never both), a result buffer, a name, an extra argument.
fn read_payload(r: &mut Reader, bits: u32, c: &mut Call) -> Result<(), DecodeError> {
    let has = |b: u32| bits & b != 0;
    if has(F_DIGEST) && has(F_DATA) {
        return Err(bad("a call with both a digest and data"));
    }
    if has(F_DIGEST) {
        let mut d = [0u8; 8];
        for b in &mut d {
            *b = r.u8()?;
        }
        c.data = Data::Digest(u64::from_le_bytes(d));
    }
    if has(F_DATA) {
        c.data = Data::Full(r.bytes()?);
    }
    if has(F_RESULT) {
        c.result = Some(r.bytes()?);
    }
    if has(F_NAME) {
        c.name = Some(r.bytes()?);
    }
    if has(F_ARG) {
        c.arg = Some(r.i64()?);
    }
    Ok(())
}

fn decode_mapped(r: &mut Reader, prev_start: &mut u64) -> Result<Record, DecodeError> {
    let bits = r.u32()?;
    if bits & !M_KNOWN != 0 {
        return Err(bad("unknown fields in a mapped record"));
    }
    if bits & M_DATA != 0 && bits & M_DIGEST != 0 {
        return Err(bad("a mapped record with both a digest and data"));
    }
    let has = |b: u32| bits & b != 0;
    let start_ns = start_from(*prev_start, r.i64()?)?;
    *prev_start = start_ns;
    let end_ns = start_ns
        .checked_add(r.u64()?)
        .ok_or_else(|| bad("a fault that ends after the end of time"))?;
    let pid = r.i32()?;
    let tid = r.i32()?;
    let access = match r.u64()? {
        0 => Access::Read,
        1 => Access::Write,
        2 => Access::Contents,
        _ => return Err(bad("unknown access in a mapped record")),
    };
    let flags = r.u64()?;
    if flags & !MF_KNOWN != 0 {
        return Err(bad("unknown flags in a mapped record"));
    }
    let mut m = Mapped {
        start_ns,
        end_ns,
        pid,
        tid,
        access,
        major: flags & MF_MAJOR != 0,
        in_kernel: flags & MF_IN_KERNEL != 0,
        superset: flags & MF_SUPERSET != 0,
        addr: r.u64()?,
        ..Default::default()
    };
    if has(M_AROUND) {
        m.around = Some((r.u64()?, r.u64()?));
    }
    if has(M_RESOLVED) {
        m.resolved = Some(r.bytes()?);
    }
    if has(M_OFFSET) {
        m.offset = Some(r.u64()?);
    }
    if has(M_DATA) {
        m.data = Data::Full(r.bytes()?);
    }
    if has(M_DIGEST) {
        let mut d = [0u8; 8];
        for b in &mut d {
            *b = r.u8()?;
        }
        m.data = Data::Digest(u64::from_le_bytes(d));
    }
    Ok(Record::Mapped(m))
}

fn decode_process(r: &mut Reader, prev_start: &mut u64) -> Result<Record, DecodeError> {
    let start_ns = start_from(*prev_start, r.i64()?)?;
    *prev_start = start_ns;
    let mut p = ProcessInfo {
        start_ns,
        pid: r.i32()?,
        ppid: r.i32()?,
        seq: r.u64()?,
        exe: r.bytes()?,
        ..Default::default()
    };
    let n = r.u64()?;
    if n > MAX_LIST {
        return Err(bad("too many arguments in a process record"));
    }
    for _ in 0..n {
        p.argv.push(r.bytes()?);
    }
    p.cwd = r.bytes()?;
    let n = r.u64()?;
    if n > MAX_LIST {
        return Err(bad("too many fds in a process record"));
    }
    for _ in 0..n {
        p.fds.push(FdInfo {
            fd: r.i32()?,
            path: r.bytes()?,
            flags: r.i64()?,
            pos: r.i64()?,
        });
    }
    Ok(Record::Process(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Vec<Record> {
        vec![
            Record::Process(ProcessInfo {
                start_ns: 5,
                pid: 10,
                ppid: 1,
                seq: 3,
                exe: b"/bin/x".to_vec(),
                argv: vec![b"x".to_vec(), b"-y".to_vec()],
                cwd: b"/w".to_vec(),
                fds: vec![FdInfo {
                    fd: 1,
                    path: b"pipe:[1]".to_vec(),
                    flags: 1,
                    pos: -1,
                }],
            }),
            Record::Call(Call {
                start_ns: 9,
                end_ns: 20,
                pid: 10,
                tid: 11,
                op: Op::named("openat"),
                ret: 3,
                fd: Some(-100),
                path: Some(b"a".to_vec()),
                resolved: Some(b"/w/a".to_vec()),
                flags: Some(0o101),
                mode: Some(0o644),
                ..Default::default()
            }),
            Record::Call(Call {
                start_ns: 7,
                end_ns: 8,
                pid: 10,
                tid: 12,
                op: Op::named("pwrite"),
                ret: -1,
                errno: 28,
                fd: Some(3),
                offset: Some(-5),
                len: Some(u64::MAX),
                size: Some(1),
                st_mode: Some(0o100644),
                data: Data::Full(vec![0, 1, 2]),
                whence: Some(2),
                arg: Some(i64::MIN),
                name: Some(vec![]),
                result: Some(b"t".to_vec()),
                ..Default::default()
            }),
            Record::Mapped(Mapped {
                start_ns: 30,
                end_ns: 42,
                pid: 10,
                tid: 12,
                access: Access::Read,
                major: true,
                addr: 0x7f00_0000_1234,
                around: Some((3, 18)),
                resolved: Some(b"/w/a".to_vec()),
                offset: Some(4096),
                ..Default::default()
            }),
            Record::Mapped(Mapped {
                start_ns: 31,
                end_ns: 31,
                pid: 10,
                tid: 11,
                access: Access::Contents,
                in_kernel: true,
                superset: true,
                addr: 0x7f00_0000_2000,
                data: Data::Full(vec![7; 20]),
                ..Default::default()
            }),
            Record::Descriptor(Descriptor {
                start_ns: 29,
                pid: 10,
                tid: 12,
                fd: FdInfo {
                    fd: 1,
                    path: b"pipe:[77]".to_vec(),
                    flags: 1,
                    pos: -1,
                },
            }),
        ]
    }

    #[test]
    fn records_round_trip() {
        let mut buf = Vec::new();
        let mut prev = 0;
        for r in sample() {
            encode(&mut buf, &r, &mut prev);
        }
        let mut rd = Reader::new(&buf);
        let mut prev = 0;
        for want in sample() {
            assert_eq!(decode(&mut rd, &mut prev, 200).unwrap(), want);
        }
        assert!(rd.is_empty());
    }

    proptest! {
        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let mut rd = Reader::new(&bytes);
            let mut prev = 0;
            while !rd.is_empty() {
                if decode(&mut rd, &mut prev, 200).is_err() {
                    break;
                }
            }
        }

        #[test]
        fn truncated_records_are_errors(cut in 0usize..200) {
            let mut buf = Vec::new();
            let mut prev = 0;
            for r in sample() {
                encode(&mut buf, &r, &mut prev);
            }
            let cut = cut.min(buf.len() - 1);
            let mut rd = Reader::new(&buf[..cut]);
            let mut prev = 0;
            let mut ok = 0;
            while !rd.is_empty() {
                match decode(&mut rd, &mut prev, 200) {
                    Ok(_) => ok += 1,
                    Err(_) => break,
                }
            }
            prop_assert!(ok < sample().len());
        }
    }
}
