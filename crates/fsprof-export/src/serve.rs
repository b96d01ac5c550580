//! A minimal HTTP/1.1 endpoint serving Prometheus text from a profile that
//! another thread keeps current. Loopback-only unless the caller allows
//! more: these metrics name the commands a host runs.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

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

/// Renders the current exposition text for each scrape.
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;

pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    pub fn start(addrs: &[SocketAddr], render: Render) -> Result<Self, ServeError> {
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
                    // One slow client must not hold up the next scrape for long.
                    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                    let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
                    let _ = handle(s, &render);
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
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn handle(mut s: TcpStream, render: &Render) -> std::io::Result<()> {
    let mut reader = BufReader::new(s.try_clone()?);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    // Drain the headers; requests we answer carry no body.
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
    }
    let mut parts = request.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (status, ctype, body) = match (method, path.split('?').next().unwrap_or("")) {
        ("GET", "/metrics") => ("200 OK", crate::prometheus::CONTENT_TYPE, render()),
        ("GET", "/") => (
            "200 OK",
            "text/plain; charset=utf-8",
            "fsprof live metrics: GET /metrics\n".to_string(),
        ),
        ("GET", _) => (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "not found; try /metrics\n".into(),
        ),
        _ => (
            "405 Method Not Allowed",
            "text/plain; charset=utf-8",
            "only GET\n".into(),
        ),
    };
    write!(
        s,
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
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
        let render: Render = Arc::new(|| "# TYPE x counter\nx 1\n".to_string());
        let srv = MetricsServer::start(&resolve("127.0.0.1:0", false).unwrap(), render).unwrap();
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
        assert!(r.ends_with("\r\n\r\n# TYPE x counter\nx 1\n"), "{r}");
        assert!(get("/nope").starts_with("HTTP/1.1 404"));
        drop(srv);
    }
}
