//! The live metrics endpoint: HTTP/1.1 `GET /metrics` serving Prometheus
//! text (or protobuf) from a profile another thread keeps current.
//! Loopback-only unless the caller allows more: these metrics name the
//! commands a host runs.
//!
//! Any local user can connect, so the server is bounded in everything a
//! client controls: at most [`MAX_CONNECTIONS`] are open at once (past
//! that the oldest idle one is dropped), a request head must arrive whole
//! within [`HEAD_DEADLINE`] and fit in [`MAX_HEAD`] bytes, an answer must
//! be taken within [`WRITE_DEADLINE`], idle clients never hold up a scrape
//! (one non-blocking loop serves them all: [`event_loop`]), and stopping
//! the server never waits for a client. Hand-written rather than a crate: tiny_http has neither a
//! header-size limit nor a per-request deadline, and hyper would bring an
//! async runtime into the CLI for one loopback endpoint.

use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::LabelOptions;

mod event_loop;

pub use event_loop::MAX_CONNECTIONS;

/// Bytes of request line and headers accepted (requests have no body).
pub const MAX_HEAD: usize = 8192;
/// Time a client has to send its whole request head.
pub const HEAD_DEADLINE: Duration = Duration::from_secs(2);
/// Time a client has to take the whole answer.
pub const WRITE_DEADLINE: Duration = Duration::from_secs(5);

const TEXT: &str = "text/plain; charset=utf-8";

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

/// Which exposition a scrape asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Text 0.0.4: classic histograms.
    Text,
    /// Delimited protobuf: native histograms too.
    Protobuf,
}

/// The body of `/metrics` in a format, made at each scrape; an error is
/// answered with 500 and its text.
pub type Render = Arc<dyn Fn(Format) -> Result<Vec<u8>, String> + Send + Sync>;

/// A profile's exposition, labelled as `opts` says.
pub fn profile_render(source: Source, opts: LabelOptions) -> Render {
    Arc::new(move |f| {
        let p = source();
        Ok(match f {
            Format::Text => crate::prometheus::render(&p, &opts).into_bytes(),
            Format::Protobuf => crate::protobuf::render(&p, &opts),
        })
    })
}

pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Serves `render` on the first of `addrs` that binds.
    pub fn start(addrs: &[SocketAddr], render: Render) -> Result<Self, ServeError> {
        let bind_err = |source| ServeError::Bind {
            addr: addrs[0].to_string(),
            source,
        };
        let listener = TcpListener::bind(addrs).map_err(bind_err)?;
        let addr = listener.local_addr().map_err(bind_err)?;
        listener.set_nonblocking(true).map_err(bind_err)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("fsprof-metrics".into())
            .spawn(move || event_loop::run(&listener, &flag, &render))
            .map_err(bind_err)?;
        Ok(MetricsServer {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// The address actually bound (port 0 picks a free one).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    /// Stops the loop (within its tick, 50 ms) and closes every
    /// connection: nothing waits for a client.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
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

/// Status, content type and body for a request.
fn answer(r: &Request, render: &Render) -> (&'static str, &'static str, Vec<u8>) {
    match (r.method.as_str(), r.path.split('?').next().unwrap_or("")) {
        ("GET", "/metrics") => {
            let (format, ctype) = match r.protobuf {
                true => (Format::Protobuf, crate::protobuf::CONTENT_TYPE),
                false => (Format::Text, crate::prometheus::CONTENT_TYPE),
            };
            match render(format) {
                Ok(body) => ("200 OK", ctype, body),
                Err(e) => (
                    "500 Internal Server Error",
                    TEXT,
                    format!("{e}\n").into_bytes(),
                ),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{ErrorKind, Write};
    use std::net::TcpStream;
    use std::time::Instant;

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
        assert!(
            r.contains(r#"layer="user",op="read",le="0.000000016"} 1"#),
            "{r}"
        );
        assert!(get(srv.local_addr(), "/nope").starts_with("HTTP/1.1 404"));
        drop(srv);
    }

    /// A server on a free loopback port whose profile holds one `read`.
    fn serve_one_op() -> MetricsServer {
        let render = profile_render(one_op_source(), LabelOptions::default());
        MetricsServer::start(&resolve("127.0.0.1:0", false).unwrap(), render).unwrap()
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
                r.starts_with("HTTP/1.1 200 OK") && r.contains("le=\"0.000000016\"} 1"),
                "{r}"
            );
        }
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    }

    /// Idle connections, more than the server keeps open, do not hold up
    /// a scrape: every scrape is answered while the idle clients are
    /// still waiting to be dropped (before their head deadline), and
    /// stopping the server does not wait for them.
    #[test]
    fn scrapes_are_answered_while_idle_clients_wait() {
        use std::io::Read;
        let srv = serve_one_op();
        let addr = srv.local_addr();
        let idle: Vec<TcpStream> = (0..MAX_CONNECTIONS + 40)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        // Connecting can wait for the listen queue; the idle clients'
        // deadline runs from when the server took them, after that.
        let t0 = Instant::now();
        for _ in 0..10 {
            assert!(scrape(addr).starts_with("HTTP/1.1 200 OK"));
        }
        let took = t0.elapsed();
        assert!(
            took < HEAD_DEADLINE,
            "10 scrapes took {took:?}: they waited for idle clients to be dropped"
        );
        // The newest idle clients are still connected, waiting.
        let last = idle.last().unwrap();
        last.set_nonblocking(true).unwrap();
        let mut b = [0u8; 1];
        let r = (&*last).read(&mut b);
        assert!(
            matches!(&r, Err(e) if e.kind() == ErrorKind::WouldBlock),
            "{r:?}"
        );
        let t = Instant::now();
        drop(srv);
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "{:?}",
            t.elapsed()
        );
        drop(idle);
    }

    /// An idle client is answered 408 once its head deadline passes.
    #[test]
    fn an_idle_client_is_dropped_at_its_deadline() {
        use std::io::Read;
        let srv = serve_one_op();
        let mut c = TcpStream::connect(srv.local_addr()).unwrap();
        c.set_read_timeout(Some(HEAD_DEADLINE * 3)).unwrap();
        let t = Instant::now();
        let mut s = String::new();
        let _ = c.read_to_string(&mut s);
        assert!(s.starts_with("HTTP/1.1 408"), "{s:?}");
        assert!(t.elapsed() >= HEAD_DEADLINE - Duration::from_millis(100));
    }
}
