//! The live metrics endpoint: HTTP/1.1 `GET /metrics` serving Prometheus
//! text (or protobuf) from a profile another thread keeps current.
//! Loopback-only unless the caller allows more: these metrics name the
//! commands a host runs.
//!
//! Any local user can connect, so the server is bounded in everything a
//! client controls: at most [`MAX_CLIENTS`] connections are served at once
//! (more wait in the kernel's backlog), a request head must arrive whole
//! within [`HEAD_DEADLINE`] and fit in [`MAX_HEAD`] bytes, an answer must
//! be taken within [`WRITE_DEADLINE`], and stopping the server never waits
//! for a client. Hand-written rather than a crate: tiny_http has neither a
//! header-size limit nor a per-request deadline, and hyper would bring an
//! async runtime into the CLI for one loopback endpoint.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Connections served at once.
pub const MAX_CLIENTS: usize = 32;
/// Bytes of request line and headers accepted (requests have no body).
pub const MAX_HEAD: usize = 8192;
/// Time a client has to send its whole request head.
pub const HEAD_DEADLINE: Duration = Duration::from_secs(2);
/// Time a client has to take the whole answer.
pub const WRITE_DEADLINE: Duration = Duration::from_secs(5);
/// How often the accept loop looks at the stop flag.
const TICK: Duration = Duration::from_millis(20);

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("--serve-metrics {addr:?}: {detail}")]
    Address { addr: String, detail: String },
    #[error("--serve-metrics {addr}: {detail} is not a loopback address; metrics name the commands this host runs, so pass --metrics-allow-remote to serve them beyond this machine")]
    NotLoopback { addr: String, detail: String },
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
}

/// Resolves `addr` (`127.0.0.1:9464`, `[::1]:9464`, `localhost:9464`, or a
/// bare port meaning 127.0.0.1) and checks every address it names.
pub fn resolve(addr: &str, allow_remote: bool) -> Result<Vec<SocketAddr>, ServeError> {
    let spec = if addr.parse::<u16>().is_ok() {
        format!("127.0.0.1:{addr}")
    } else {
        addr.to_string()
    };
    let addrs: Vec<SocketAddr> = spec
        .to_socket_addrs()
        .map_err(|e| ServeError::Address {
            addr: addr.into(),
            detail: format!("{e} (expected HOST:PORT, e.g. 127.0.0.1:9464)"),
        })?
        .collect();
    if addrs.is_empty() {
        return Err(ServeError::Address {
            addr: addr.into(),
            detail: "names no address".into(),
        });
    }
    if !allow_remote {
        if let Some(a) = addrs.iter().find(|a| !a.ip().is_loopback()) {
            return Err(ServeError::NotLoopback {
                addr: addr.into(),
                detail: a.ip().to_string(),
            });
        }
    }
    Ok(addrs)
}

/// The current profile, asked for at each scrape.
pub type Source = Arc<dyn Fn() -> fsprof_core::Profile + Send + Sync>;

pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl MetricsServer {
    pub fn start(addrs: &[SocketAddr], source: Source) -> Result<Self, ServeError> {
        let bind_err = |source| ServeError::Bind {
            addr: addrs[0].to_string(),
            source,
        };
        let listener = TcpListener::bind(addrs).map_err(bind_err)?;
        let addr = listener.local_addr().map_err(bind_err)?;
        // Non-blocking, so the accept loop sees the stop flag within a tick.
        listener.set_nonblocking(true).map_err(bind_err)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let acceptor = std::thread::Builder::new()
            .name("fsprof-metrics".into())
            .spawn(move || accept_loop(&listener, &flag, &source))
            .map_err(bind_err)?;
        Ok(MetricsServer {
            addr,
            stop,
            acceptor: Some(acceptor),
        })
    }

    /// The address actually bound (port 0 picks a free one).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    /// Stops accepting (within a tick) and returns: clients being served
    /// finish on their own threads, within their deadlines, or are cut off
    /// when the process exits.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.acceptor.take() {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, stop: &AtomicBool, source: &Source) {
    let busy = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::Acquire) {
        if busy.load(Ordering::Acquire) >= MAX_CLIENTS {
            // Full: new clients wait in the backlog until one is done.
            std::thread::sleep(TICK);
            continue;
        }
        match listener.accept() {
            Ok((s, _)) => {
                busy.fetch_add(1, Ordering::AcqRel);
                let (done, source) = (busy.clone(), source.clone());
                let spawned = std::thread::Builder::new()
                    .name("fsprof-metrics-client".into())
                    .stack_size(256 * 1024)
                    .spawn(move || {
                        let _ = serve_client(s, &source);
                        done.fetch_sub(1, Ordering::AcqRel);
                    });
                if spawned.is_err() {
                    busy.fetch_sub(1, Ordering::AcqRel);
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(TICK),
            // A connection reset before we took it, out of descriptors...:
            // wait a moment, keep serving.
            Err(_) => std::thread::sleep(TICK),
        }
    }
}

/// What a request asked for.
#[derive(Debug, PartialEq, Eq)]
struct Request {
    method: String,
    path: String,
    /// The client accepts the protobuf exposition (Prometheus with native
    /// histograms asks for it).
    protobuf: bool,
}

/// Why a request head was not read.
#[derive(Debug, PartialEq, Eq)]
enum HeadError {
    TooLarge,
    TooSlow,
    Closed,
}

/// Reads a request head: at most `MAX_HEAD` bytes, all within
/// `HEAD_DEADLINE` (the whole head, not each read).
fn read_head(s: &mut TcpStream) -> Result<Vec<u8>, HeadError> {
    let deadline = Instant::now() + HEAD_DEADLINE;
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(HeadError::TooSlow);
        }
        s.set_read_timeout(Some(left))
            .map_err(|_| HeadError::Closed)?;
        let n = match s.read(&mut buf) {
            Ok(0) => return Err(HeadError::Closed),
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(HeadError::TooSlow)
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return Err(HeadError::Closed),
        };
        head.extend_from_slice(&buf[..n]);
        if let Some(end) = head_end(&head) {
            head.truncate(end);
            return Ok(head);
        }
        if head.len() > MAX_HEAD {
            return Err(HeadError::TooLarge);
        }
    }
}

/// Length of the head up to its blank line, if it is complete.
fn head_end(b: &[u8]) -> Option<usize> {
    let crlf = b.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4);
    let lf = b.windows(2).position(|w| w == b"\n\n").map(|p| p + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn parse_head(head: &[u8]) -> Request {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.lines();
    let mut first = lines.next().unwrap_or("").split_whitespace();
    let method = first.next().unwrap_or("").to_string();
    let path = first.next().unwrap_or("").to_string();
    let protobuf = lines.any(|line| {
        line.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("accept")
                && v.contains("application/vnd.google.protobuf")
                && v.contains("io.prometheus.client.MetricFamily")
        })
    });
    Request {
        method,
        path,
        protobuf,
    }
}

fn serve_client(mut s: TcpStream, source: &Source) -> std::io::Result<()> {
    const TEXT: &str = "text/plain; charset=utf-8";
    let (status, ctype, body): (&str, &str, Vec<u8>) = match read_head(&mut s) {
        Err(HeadError::Closed) => return Ok(()),
        Err(HeadError::TooSlow) => (
            "408 Request Timeout",
            TEXT,
            b"request not received in time\n".to_vec(),
        ),
        Err(HeadError::TooLarge) => (
            "431 Request Header Fields Too Large",
            TEXT,
            b"request head too large\n".to_vec(),
        ),
        Ok(head) => answer(&parse_head(&head), source),
    };
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(&body);
    write_within(&mut s, &out, WRITE_DEADLINE)
}

fn answer(r: &Request, source: &Source) -> (&'static str, &'static str, Vec<u8>) {
    const TEXT: &str = "text/plain; charset=utf-8";
    match (r.method.as_str(), r.path.split('?').next().unwrap_or("")) {
        ("GET", "/metrics") => {
            let p = source();
            if r.protobuf {
                (
                    "200 OK",
                    crate::protobuf::CONTENT_TYPE,
                    crate::protobuf::render(&p),
                )
            } else {
                let text = crate::prometheus::render(&p).into_bytes();
                ("200 OK", crate::prometheus::CONTENT_TYPE, text)
            }
        }
        ("GET", "/") => (
            "200 OK",
            TEXT,
            b"fsprof live metrics: GET /metrics\n".to_vec(),
        ),
        ("GET", _) => ("404 Not Found", TEXT, b"not found; try /metrics\n".to_vec()),
        _ => ("405 Method Not Allowed", TEXT, b"only GET\n".to_vec()),
    }
}

/// Writes all of `bytes` within `limit` in total (a client that reads one
/// byte at a time is cut off).
fn write_within(s: &mut TcpStream, bytes: &[u8], limit: Duration) -> std::io::Result<()> {
    let deadline = Instant::now() + limit;
    let mut at = 0;
    while at < bytes.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ErrorKind::TimedOut.into());
        }
        s.set_write_timeout(Some(left))?;
        match s.write(&bytes[at..(at + 65536).min(bytes.len())]) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => at += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    s.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_remote_addresses_unless_allowed() {
        assert!(resolve("127.0.0.1:0", false).is_ok());
        assert!(resolve("[::1]:0", false).is_ok());
        assert!(resolve("9464", false).unwrap()[0].ip().is_loopback());
        let e = resolve("0.0.0.0:9464", false).unwrap_err().to_string();
        assert!(e.contains("not a loopback address"), "{e}");
        assert!(resolve("0.0.0.0:9464", true).is_ok());
        assert!(resolve("no port", false).is_err());
    }

    #[test]
    fn serves_metrics_and_404() {
        let srv = serve_one_op();
        let r = get(srv.local_addr(), "/metrics");
        assert!(r.starts_with("HTTP/1.1 200 OK"), "{r}");
        assert!(r.contains("version=0.0.4"));
        assert!(r.contains(r#"op="read",command="",le="16"} 1"#), "{r}");
        assert!(get(srv.local_addr(), "/nope").starts_with("HTTP/1.1 404"));
        drop(srv);
    }

    /// A server on a free loopback port whose profile holds one `read`.
    fn serve_one_op() -> MetricsServer {
        MetricsServer::start(&resolve("127.0.0.1:0", false).unwrap(), one_op_source()).unwrap()
    }

    fn one_op_source() -> Source {
        Arc::new(|| {
            let mut p = fsprof_core::Profile::new(Default::default());
            let mut l = fsprof_core::Layer::new("user");
            let mut op = fsprof_core::OpStats::new("read");
            op.post = 1;
            op.pre = 1;
            op.histogram.add_to(Some(3), 1);
            l.ops.push(op);
            p.layers.push(l);
            p
        })
    }

    /// The whole answer to a GET of `path`.
    fn get(addr: SocketAddr, path: &str) -> String {
        use std::io::Read;
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(c, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut s = String::new();
        c.read_to_string(&mut s).unwrap();
        s
    }

    fn scrape(addr: SocketAddr) -> String {
        get(addr, "/metrics")
    }

    /// A client sending one byte at a time is cut off when its head is
    /// not complete within HEAD_DEADLINE, and meanwhile others are served.
    #[test]
    fn a_slow_client_is_cut_off_and_does_not_hold_up_scrapes() {
        use std::io::Read;
        let srv = serve_one_op();
        let addr = srv.local_addr();
        let t0 = Instant::now();
        let slow = std::thread::spawn(move || {
            let mut c = TcpStream::connect(addr).unwrap();
            let mut answer = String::new();
            for b in b"GET /metrics HTTP/1.1\r\nHost: slow\r\n".iter().cycle() {
                if c.write_all(&[*b]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(300));
                if t0.elapsed() > Duration::from_secs(4) {
                    break;
                }
            }
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let _ = c.read_to_string(&mut answer);
            (answer, t0.elapsed())
        });
        std::thread::sleep(Duration::from_millis(200));
        let t = Instant::now();
        assert!(scrape(addr).starts_with("HTTP/1.1 200 OK"));
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
        let (answer, when) = slow.join().unwrap();
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer:?}");
        assert!(when < HEAD_DEADLINE + Duration::from_secs(1), "{when:?}");
    }

    /// A request head without an end is refused after MAX_HEAD bytes,
    /// whatever the client goes on sending.
    #[test]
    fn an_oversized_request_is_refused_without_reading_it_all() {
        use std::io::Read;
        let srv = serve_one_op();
        let mut c = TcpStream::connect(srv.local_addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let junk = vec![b'x'; 1 << 16];
        let mut sent = 0usize;
        // The server stops reading after MAX_HEAD: our writes fail (reset)
        // or block once the socket buffers are full.
        c.set_write_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        while sent < 64 << 20 {
            match c.write(&junk) {
                Ok(n) => sent += n,
                Err(_) => break,
            }
        }
        assert!(sent < 64 << 20, "the server read everything");
        let mut answer = String::new();
        let _ = c.read_to_string(&mut answer);
        assert!(answer.starts_with("HTTP/1.1 431"), "{answer:?}");
    }

    #[test]
    fn fifty_concurrent_scrapes_are_all_answered() {
        let srv = serve_one_op();
        let addr = srv.local_addr();
        let t = Instant::now();
        let all: Vec<_> = (0..50)
            .map(|_| std::thread::spawn(move || scrape(addr)))
            .collect();
        for a in all {
            let r = a.join().unwrap();
            assert!(
                r.starts_with("HTTP/1.1 200 OK") && r.contains("le=\"16\"} 1"),
                "{r}"
            );
        }
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    }

    /// Idle connections (as many as the server serves at once) delay a
    /// scrape by at most the head deadline, and stopping the server does
    /// not wait for them.
    #[test]
    fn idle_connections_neither_block_scrapes_nor_shutdown() {
        let srv = serve_one_op();
        let addr = srv.local_addr();
        let idle: Vec<TcpStream> = (0..MAX_CLIENTS + 6)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        std::thread::sleep(Duration::from_millis(100));
        let t = Instant::now();
        assert!(scrape(addr).starts_with("HTTP/1.1 200 OK"));
        assert!(
            t.elapsed() < HEAD_DEADLINE + Duration::from_secs(1),
            "{:?}",
            t.elapsed()
        );
        let more: Vec<TcpStream> = (0..6).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let t = Instant::now();
        drop(srv);
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "{:?}",
            t.elapsed()
        );
        drop((idle, more));
    }
}
