//! Pushing the series to an OpenTelemetry collector (OTLP/HTTP, protobuf
//! or JSON) every interval, on a thread of its own so that a slow or
//! absent collector never holds up a scrape.
//!
//! Each push is the cumulative state, so nothing is lost by dropping an
//! old one: while the collector is away the pushes wait in a buffer of
//! bounded length (the oldest dropped first, and counted), and are sent
//! oldest first, with a backoff from 1 s doubling up to the interval, once
//! it answers. A refusal (4xx other than 408 and 429) drops the push: the
//! same bytes would be refused again.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::collector::Collector;
use crate::config::{Otlp, OtlpFormat};

/// Time one push may take.
const TIMEOUT: Duration = Duration::from_secs(10);
/// The shortest wait before a retry.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);

/// The push thread; dropping it makes one last push (at most [`TIMEOUT`])
/// and stops.
pub struct Pusher {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

/// What became of one attempt.
#[derive(Debug, PartialEq, Eq)]
enum Sent {
    Ok,
    /// Refused for good: drop it.
    Refused(u16),
    /// Try again later.
    Failed(String),
}

impl Pusher {
    pub fn start(cfg: Otlp, collector: Arc<Mutex<Collector>>) -> std::io::Result<Pusher> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("fsprof-otlp".into())
            .spawn(move || run(&cfg, &collector, &flag))?;
        Ok(Pusher {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Pusher {
    fn drop(&mut self) {
        let (m, cv) = &*self.stop;
        *m.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The request body in the configured encoding, with its content type.
fn payload(c: &mut Collector, format: OtlpFormat) -> (Vec<u8>, &'static str) {
    // A failed read leaves the series as they were: push those.
    let _ = c.refresh();
    let e = c.exposition();
    match format {
        OtlpFormat::Protobuf => (
            fsprof_export::otlp_proto::encode(&e),
            fsprof_export::otlp_proto::CONTENT_TYPE,
        ),
        OtlpFormat::Json => (
            fsprof_export::otlp::json(&e).into_bytes(),
            "application/json",
        ),
    }
}

fn post(agent: &ureq::Agent, url: &str, ctype: &str, body: &[u8]) -> Sent {
    match agent.post(url).header("Content-Type", ctype).send(body) {
        Ok(_) => Sent::Ok,
        Err(ureq::Error::StatusCode(code))
            if (400..500).contains(&code) && code != 408 && code != 429 =>
        {
            Sent::Refused(code)
        }
        Err(e) => Sent::Failed(e.to_string()),
    }
}

fn run(cfg: &Otlp, collector: &Mutex<Collector>, stop: &(Mutex<bool>, Condvar)) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(TIMEOUT))
        .build()
        .into();
    let lock = || collector.lock().unwrap_or_else(|e| e.into_inner());
    let mut queue: VecDeque<Vec<u8>> = VecDeque::new();
    let mut ctype = "";
    let mut next = Instant::now() + cfg.interval;
    let mut backoff = FIRST_BACKOFF;
    let mut retry: Option<Instant> = None;
    loop {
        let wake = retry.map_or(next, |r| r.min(next));
        let stopping = wait_until(stop, wake);
        let now = Instant::now();
        if stopping || now >= next {
            let (body, t) = payload(&mut lock(), cfg.format);
            ctype = t;
            if enqueue(&mut queue, body, cfg.buffer) {
                lock().otlp_dropped += 1;
            }
            next = now + cfg.interval;
        }
        if stopping || retry.is_none_or(|r| now >= r) {
            retry = None;
            while let Some(body) = queue.front() {
                match post(&agent, &cfg.endpoint, ctype, body) {
                    Sent::Ok => {
                        queue.pop_front();
                        backoff = FIRST_BACKOFF;
                    }
                    Sent::Refused(_) => {
                        queue.pop_front();
                        lock().otlp_dropped += 1;
                    }
                    Sent::Failed(_) => {
                        lock().otlp_failures += 1;
                        retry = Some(Instant::now() + backoff);
                        backoff = (backoff * 2).min(cfg.interval);
                        break;
                    }
                }
                if stopping {
                    break; // one last push, not the whole backlog
                }
            }
        }
        if stopping {
            return;
        }
    }
}

/// Adds a push to the retry buffer of at most `cap`; true when the oldest
/// was dropped to make room (the newest is cumulative: it says all the
/// dropped one did).
fn enqueue(queue: &mut VecDeque<Vec<u8>>, body: Vec<u8>, cap: usize) -> bool {
    let full = queue.len() >= cap;
    if full {
        queue.pop_front();
    }
    queue.push_back(body);
    full
}

/// Sleeps until `t` or until stopped; true when stopped.
fn wait_until(stop: &(Mutex<bool>, Condvar), t: Instant) -> bool {
    let (m, cv) = stop;
    let mut stopped = m.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if *stopped {
            return true;
        }
        let left = t.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        stopped = cv
            .wait_timeout(stopped, left)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// A one-shot HTTP server answering `status` and returning the request.
    fn answer_once(status: u16) -> (String, JoinHandle<Vec<u8>>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1/metrics", l.local_addr().unwrap());
        let t = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut req = Vec::new();
            let mut b = [0u8; 4096];
            while let Ok(n) = s.read(&mut b) {
                req.extend_from_slice(&b[..n]);
                if n == 0 || req.ends_with(b"BODY") {
                    break;
                }
            }
            let _ = write!(s, "HTTP/1.1 {status} X\r\nContent-Length: 0\r\n\r\n");
            req
        });
        (url, t)
    }

    #[test]
    fn refusals_are_dropped_and_failures_retried() {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(5)))
            .build()
            .into();
        let (url, t) = answer_once(200);
        assert_eq!(
            post(&agent, &url, "application/x-protobuf", b"BODY"),
            Sent::Ok
        );
        let req = String::from_utf8_lossy(&t.join().unwrap()).to_lowercase();
        assert!(req.starts_with("post /v1/metrics http/1.1"), "{req}");
        assert!(
            req.contains("content-type: application/x-protobuf"),
            "{req}"
        );
        let (url, t) = answer_once(400);
        assert_eq!(post(&agent, &url, "x", b"BODY"), Sent::Refused(400));
        t.join().unwrap();
        let (url, t) = answer_once(503);
        assert!(matches!(post(&agent, &url, "x", b"BODY"), Sent::Failed(_)));
        t.join().unwrap();
        // Nobody listening.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let r = post(&agent, &format!("http://{port}/v1/metrics"), "x", b"BODY");
        assert!(matches!(r, Sent::Failed(_)), "{r:?}");
    }

    #[test]
    fn the_buffer_keeps_the_newest_pushes() {
        let mut q = VecDeque::new();
        let dropped: Vec<bool> = (0u8..5).map(|k| enqueue(&mut q, vec![k], 3)).collect();
        assert_eq!(dropped, [false, false, false, true, true]);
        assert_eq!(q, [vec![2], vec![3], vec![4]]);
    }

    #[test]
    fn a_stop_wakes_the_wait_at_once() {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let s2 = stop.clone();
        let t = std::thread::spawn(move || {
            let t0 = Instant::now();
            let stopped = wait_until(&s2, Instant::now() + Duration::from_secs(60));
            (stopped, t0.elapsed())
        });
        std::thread::sleep(Duration::from_millis(50));
        *stop.0.lock().unwrap() = true;
        stop.1.notify_all();
        let (stopped, took) = t.join().unwrap();
        assert!(stopped && took < Duration::from_secs(5), "{took:?}");
    }
}
