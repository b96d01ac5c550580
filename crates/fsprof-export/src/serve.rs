//! A minimal HTTP/1.1 endpoint serving Prometheus text from a profile that
//! another thread keeps current. Loopback-only unless the caller allows
//! more: these metrics name the commands a host runs.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long one client may take to send its request or read the reply:
/// a slow client must not hold up the next scrape for long.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long dropping the server waits to connect to its own socket, the
/// connection that wakes the accept loop.
const WAKE_TIMEOUT: Duration = Duration::from_secs(1);

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
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    pub fn start(addrs: &[SocketAddr], source: Source) -> Result<Self, ServeError> {
        let listener = TcpListener::bind(addrs).map_err(|source| ServeError::Bind {
            addr: addrs[0].to_string(),
            source,
        })?;
        let addr = listener.local_addr().map_err(|source| ServeError::Bind {
            addr: addrs[0].to_string(),
            source,
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if flag.load(Ordering::Acquire) {
                    break;
                }
                if let Ok(s) = conn {
                    let _ = s.set_read_timeout(Some(CLIENT_TIMEOUT));
                    let _ = s.set_write_timeout(Some(CLIENT_TIMEOUT));
                    let _ = handle(s, &source);
                }
            }
        });
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
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, WAKE_TIMEOUT);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn handle(mut s: TcpStream, source: &Source) -> std::io::Result<()> {
    let mut reader = BufReader::new(s.try_clone()?);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    // Read the headers (requests we answer carry no body) for the one that
    // matters: Prometheus asks for protobuf to get native histograms.
    let mut protobuf = false;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.trim().eq_ignore_ascii_case("accept")
                && v.contains("application/vnd.google.protobuf")
                && v.contains("io.prometheus.client.MetricFamily")
            {
                protobuf = true;
            }
        }
    }
    let mut parts = request.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    const TEXT: &str = "text/plain; charset=utf-8";
    let (status, ctype, body): (&str, &str, Vec<u8>) =
        match (method, path.split('?').next().unwrap_or("")) {
            ("GET", "/metrics") => {
                let p = source();
                if protobuf {
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
        };
    write!(
        s,
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    s.write_all(&body)?;
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
        use std::io::Read;
        let source: Source = Arc::new(|| {
            let mut p = fsprof_core::Profile::new(Default::default());
            let mut l = fsprof_core::Layer::new("user");
            let mut op = fsprof_core::OpStats::new("read");
            op.post = 1;
            op.pre = 1;
            op.histogram.add_to(Some(3), 1);
            l.ops.push(op);
            p.layers.push(l);
            p
        });
        let srv = MetricsServer::start(&resolve("127.0.0.1:0", false).unwrap(), source).unwrap();
        let get = |path: &str| {
            let mut c = TcpStream::connect(srv.local_addr()).unwrap();
            write!(c, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            let mut s = String::new();
            c.read_to_string(&mut s).unwrap();
            s
        };
        let r = get("/metrics");
        assert!(r.starts_with("HTTP/1.1 200 OK"), "{r}");
        assert!(r.contains("version=0.0.4"));
        assert!(r.contains(r#"op="read",command="",le="16"} 1"#), "{r}");
        assert!(get("/nope").starts_with("HTTP/1.1 404"));
        drop(srv);
    }
}
