//! fio iolog (versions 2 and 3) to a trace. Version 2 lines are
//! `FILE ACTION [OFFSET LENGTH]`; version 3 puts a timestamp (µs since the
//! job started) first. Actions: add, open, close, read, write, sync,
//! datasync, trim, wait. fio's iolog has no results, threads or times of
//! return: every call is taken to have succeeded with its full length, on
//! one thread, taking no time (v2 calls are 1 µs apart).

use std::collections::HashMap;

use crate::event::{Call, Op, ProcessInfo, Record};
use crate::import::{ImportError, Sink};

pub fn import(text: &str, lenient: bool, sink: &mut dyn Sink) -> Result<(), ImportError> {
    let mut lines = text.lines().enumerate();
    let version = match lines.next() {
        Some((_, "fio version 2 iolog")) => 2,
        Some((_, "fio version 3 iolog")) => 3,
        _ => {
            return Err(ImportError::line(
                1,
                "not a fio iolog (expected `fio version 2 iolog` or `fio version 3 iolog`)",
            ))
        }
    };
    let mut started = false;
    let mut fds: HashMap<String, i32> = HashMap::new();
    let mut next_fd = 3;
    let mut t_us = 0u64;
    for (k, line) in lines {
        let n = k + 1;
        if line.trim().is_empty() {
            continue;
        }
        let parsed = parse_line(version, n, line, &mut t_us, &mut fds, &mut next_fd);
        match parsed {
            Ok(Some(c)) => {
                if !started {
                    // The job starts with its first call.
                    started = true;
                    sink.record(Record::Process(ProcessInfo {
                        start_ns: c.start_ns,
                        pid: 1,
                        cwd: b"/".to_vec(),
                        ..Default::default()
                    }))?;
                }
                sink.record(Record::Call(c))?
            }
            Ok(None) => {}
            Err(e) if lenient => sink.skipped(&e.to_string()),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// One iolog line as a call (`None` for `add` and `wait`).
fn parse_line(
    version: u32,
    n: usize,
    line: &str,
    t_us: &mut u64,
    fds: &mut HashMap<String, i32>,
    next_fd: &mut i32,
) -> Result<Option<Call>, ImportError> {
    let bad = |what: &str| ImportError::line(n, &format!("{what}: {}", super::excerpt(line)));
    let (w, t_ns) = timed_words(version, line, t_us, &bad)?;
    let (file, action) = match (w.first(), w.get(1)) {
        (Some(f), Some(a)) => (f.to_string(), *a),
        _ => return Err(bad("expected FILE ACTION")),
    };
    let num = |i: usize| -> Result<u64, ImportError> {
        w.get(i)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| bad("expected OFFSET LENGTH"))
    };
    let mut c = Call {
        start_ns: t_ns,
        end_ns: t_ns,
        pid: 1,
        tid: 1,
        path: None,
        ..Default::default()
    };
    let fd_of = |fds: &HashMap<String, i32>| {
        fds.get(&file)
            .copied()
            .ok_or_else(|| bad("file not opened"))
    };
    match action {
        "add" | "wait" => return Ok(None),
        "open" => {
            let fd = *next_fd;
            *next_fd += 1;
            fds.insert(file.clone(), fd);
            c.op = Op::named("openat");
            c.fd = Some(crate::event::AT_FDCWD);
            c.path = Some(file.clone().into_bytes());
            c.flags = Some((libc::O_RDWR | libc::O_CREAT) as i64);
            c.mode = Some(0o644);
            c.ret = fd as i64;
        }
        "close" => {
            c.op = Op::named("close");
            c.fd = Some(fd_of(fds)?);
            fds.remove(&file);
        }
        "read" | "write" | "trim" => {
            let (off, len) = (num(2)?, num(3)?);
            c.fd = Some(fd_of(fds)?);
            data_call(&mut c, action, off, len);
        }
        "sync" | "datasync" => {
            c.op = Op::named(if action == "sync" {
                "fsync"
            } else {
                "fdatasync"
            });
            c.fd = Some(fd_of(fds)?);
        }
        other => return Err(bad(&format!("unknown action {other:?}"))),
    }
    Ok(Some(c))
}

/// The line's words after its timestamp, and its time in ns. Version 3
/// logs start each line with a µs timestamp; version 2 logs have none, so
/// each line is taken as 1 µs after the one before.
fn timed_words<'l>(
    version: u32,
    line: &'l str,
    t_us: &mut u64,
    bad: &dyn Fn(&str) -> ImportError,
) -> Result<(Vec<&'l str>, u64), ImportError> {
    let mut w: Vec<&str> = line.split_whitespace().collect();
    if version == 3 {
        let ts = w
            .first()
            .and_then(|t| t.parse::<u64>().ok())
            .ok_or_else(|| bad("no timestamp"))?;
        *t_us = ts;
        w.remove(0);
    } else {
        *t_us += 1;
    }
    let t_ns = t_us
        .checked_mul(1000)
        .ok_or_else(|| bad("timestamp out of range"))?;
    Ok((w, t_ns))
}

/// A read, write or trim of `len` bytes at `off`: pread, pwrite, or a
/// fallocate that punches the hole.
fn data_call(c: &mut Call, action: &str, off: u64, len: u64) {
    c.op = Op::named(match action {
        "read" => "pread",
        "write" => "pwrite",
        _ => "fallocate",
    });
    c.offset = Some(off as i64);
    c.len = Some(len);
    if action == "trim" {
        // FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
        c.mode = Some(3);
        c.ret = 0;
    } else {
        c.ret = len as i64;
    }
}
