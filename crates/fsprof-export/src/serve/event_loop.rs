//! The server's one thread: a `poll(2)` loop over the listener and every
//! open connection, all non-blocking.
//!
//! A thread per connection let ~32 idle clients take every handler while
//! they waited out their head deadline, and scrapes failed for seconds.
//! Here an idle connection costs a descriptor and a slot in the poll set,
//! nothing a scrape waits for: each turn of the loop reads whatever
//! arrived on any connection, answers every head that is complete, and
//! writes as much of each answer as its socket takes. When
//! [`MAX_CONNECTIONS`] are open, the oldest one still sending its head is
//! dropped to make room, so a flood of idle clients delays a scrape by no
//! more than one turn.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{answer, head_end, parse_head, Render, HEAD_DEADLINE, MAX_HEAD, WRITE_DEADLINE};

/// Connections open at once; past it the oldest still sending its head
/// is dropped. Well under the default 1,024 descriptors of a process.
pub const MAX_CONNECTIONS: usize = 256;
/// The longest the loop sleeps: how soon it sees the stop flag.
const TICK: Duration = Duration::from_millis(50);

/// Where a connection is.
enum State {
    /// Reading the request head (bytes so far).
    Head(Vec<u8>),
    /// Writing the answer: bytes, how many went out, and by when.
    Answer {
        bytes: Vec<u8>,
        at: usize,
        deadline: Instant,
    },
}

struct Conn {
    s: TcpStream,
    accepted: Instant,
    state: State,
}

impl Conn {
    fn deadline(&self) -> Instant {
        match &self.state {
            State::Head(_) => self.accepted + HEAD_DEADLINE,
            State::Answer { deadline, .. } => *deadline,
        }
    }

    fn answering(&mut self, status: &str, ctype: &str, body: &[u8], now: Instant) {
        let mut out = format!(
            "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        out.extend_from_slice(body);
        self.state = State::Answer {
            bytes: out,
            at: 0,
            deadline: now + WRITE_DEADLINE,
        };
    }
}

/// What became of a connection in one turn.
enum Next {
    Keep(Conn),
    Close,
}

/// Serves until `stop` is set; then returns, closing every connection.
pub fn run(listener: &TcpListener, stop: &AtomicBool, render: &Render) {
    let mut conns: Vec<Conn> = Vec::new();
    let mut fds: Vec<libc::pollfd> = Vec::new();
    while !stop.load(Ordering::Acquire) {
        fds.clear();
        fds.push(pollfd(listener.as_raw_fd(), libc::POLLIN));
        for c in &conns {
            let ev = match c.state {
                State::Head(_) => libc::POLLIN,
                State::Answer { .. } => libc::POLLOUT,
            };
            fds.push(pollfd(c.s.as_raw_fd(), ev));
        }
        let now = Instant::now();
        let wake = conns.iter().map(Conn::deadline).min();
        let wait = wake.map_or(TICK, |d| d.saturating_duration_since(now).min(TICK));
        // SAFETY: fds is a live array of fds.len() pollfd structs.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, millis(wait)) };
        if n < 0 {
            // EINTR, or ENOMEM: try again next turn.
            continue;
        }
        let now = Instant::now();
        let mut kept = Vec::with_capacity(conns.len() + 1);
        for (c, fd) in conns.drain(..).zip(&fds[1..]) {
            if let Next::Keep(c) = step(c, fd.revents, now, render) {
                kept.push(c);
            }
        }
        conns = kept;
        if fds[0].revents & libc::POLLIN != 0 {
            accept_all(listener, &mut conns, now);
        }
    }
}

fn pollfd(fd: i32, events: i16) -> libc::pollfd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

/// Rounded up, so that a deadline 0.4 ms away is not a busy turn.
fn millis(d: Duration) -> i32 {
    d.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32
}

/// Takes every pending connection, making room by dropping the oldest
/// connections still sending their heads.
fn accept_all(listener: &TcpListener, conns: &mut Vec<Conn>, now: Instant) {
    loop {
        if conns.len() >= MAX_CONNECTIONS && !drop_oldest_idle(conns) {
            return; // every slot is answering: the rest wait in the backlog
        }
        match listener.accept() {
            Ok((s, _)) => {
                if s.set_nonblocking(true).is_err() {
                    continue;
                }
                let _ = s.set_nodelay(true);
                conns.push(Conn {
                    s,
                    accepted: now,
                    state: State::Head(Vec::new()),
                });
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            // Out of descriptors: an idle client gives its up.
            Err(e) if e.raw_os_error() == Some(libc::EMFILE) => {
                if !drop_oldest_idle(conns) {
                    return;
                }
            }
            // WouldBlock: none left; a connection reset before we took it...
            Err(_) => return,
        }
    }
}

/// Closes the connection that has been sending its head the longest;
/// false if none is.
fn drop_oldest_idle(conns: &mut Vec<Conn>) -> bool {
    let oldest = conns
        .iter()
        .enumerate()
        .filter(|(_, c)| matches!(c.state, State::Head(_)))
        .min_by_key(|(_, c)| c.accepted)
        .map(|(i, _)| i);
    match oldest {
        Some(i) => {
            conns.swap_remove(i);
            true
        }
        None => false,
    }
}

/// One turn of one connection: read what arrived, answer a complete head,
/// write what the socket takes, and enforce the deadlines.
fn step(mut c: Conn, revents: i16, now: Instant, render: &Render) -> Next {
    if let State::Head(buf) = &mut c.state {
        if revents != 0 {
            match read_some(&mut c.s, buf) {
                Ok(()) => {}
                Err(()) => return Next::Close,
            }
        }
        if let Some(end) = head_end(buf) {
            let req = parse_head(&buf[..end]);
            let (status, ctype, body) = answer(&req, render);
            c.answering(status, ctype, &body, now);
        } else if buf.len() > MAX_HEAD {
            c.answering(
                "431 Request Header Fields Too Large",
                super::TEXT,
                b"request head too large\n",
                now,
            );
        } else if now >= c.accepted + HEAD_DEADLINE {
            c.answering(
                "408 Request Timeout",
                super::TEXT,
                b"request not received in time\n",
                now,
            );
        } else {
            return Next::Keep(c);
        }
    }
    let State::Answer {
        bytes,
        at,
        deadline,
    } = &mut c.state
    else {
        unreachable!("the head was answered above");
    };
    loop {
        if *at == bytes.len() {
            let _ = c.s.shutdown(Shutdown::Write);
            return Next::Close;
        }
        match c.s.write(&bytes[*at..]) {
            Ok(0) => return Next::Close,
            Ok(n) => *at += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(_) => return Next::Close,
        }
    }
    if now >= *deadline {
        return Next::Close; // a client that does not take its answer
    }
    Next::Keep(c)
}

/// Reads what is there into `buf` (never past MAX_HEAD + 1 bytes); Err
/// when the client closed or failed.
fn read_some(s: &mut TcpStream, buf: &mut Vec<u8>) -> Result<(), ()> {
    let mut chunk = [0u8; 2048];
    while buf.len() <= MAX_HEAD {
        match s.read(&mut chunk) {
            Ok(0) => return Err(()),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if head_end(buf).is_some() {
                    break;
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(_) => return Err(()),
        }
    }
    Ok(())
}
