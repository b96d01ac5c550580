//! Any local user can connect to `fsprof run --serve-metrics`: a client
//! that trickles bytes or sends an endless request must neither keep the
//! run alive after its command exits nor keep the profile from being
//! written.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStderr, Stdio};
use std::time::{Duration, Instant};

use fsprof_testkit::fsprof;

/// `fsprof run --serve-metrics` of `sleep SECS` in `dir`, writing
/// `p.json`: the child, its standard error past the line that says where
/// it serves, and that address.
fn serving_sleep(dir: &std::path::Path, secs: &str) -> (Child, BufReader<ChildStderr>, String) {
    let mut child = fsprof()
        .args(["run", "-q", "-f", "-o", "p.json"])
        .args(["--serve-metrics", "127.0.0.1:0", "--", "sleep", secs])
        .current_dir(dir)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let addr = fsprof_testkit::metrics_addr(&line);
    (child, err, addr)
}

#[test]
fn a_trickling_client_does_not_keep_the_run_alive() {
    let dir = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let (mut child, mut err, addr) = serving_sleep(dir.path(), "1");
    // One client trickles a request (a byte every 300 ms), another sends
    // an endless one.
    let trickle = {
        let addr = addr.clone();
        std::thread::spawn(move || {
            let mut c = TcpStream::connect(&addr).unwrap();
            for b in b"GET /metrics HTTP/1.1\r\nX: ".iter().cycle().take(100) {
                if c.write_all(&[*b]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(300));
            }
        })
    };
    let flood = std::thread::spawn(move || {
        let mut c = TcpStream::connect(&addr).unwrap();
        let junk = vec![b'x'; 1 << 16];
        let mut sent = 0usize;
        while sent < 256 << 20 && c.write(&junk).map(|n| sent += n).is_ok() {}
        sent
    });
    let st = child.wait().unwrap();
    let took = t0.elapsed();
    let _ = std::io::copy(&mut err, &mut std::io::sink());
    assert!(st.success());
    assert!(
        took < Duration::from_secs(5),
        "the run ended {took:?} after it started (a 1 s command)"
    );
    assert!(dir.path().join("p.json").exists(), "the profile is written");
    let sent = flood.join().unwrap();
    assert!(sent < 256 << 20, "the server read an endless request");
    trickle.join().unwrap();
}

/// Issue 23 §4: about 32 idle connections took every handler of the
/// server and scrapes failed for 1–3 s. Scrapes must be answered while
/// the idle clients wait to be dropped (their head deadline is 2 s).
#[test]
fn scrapes_are_answered_while_idle_clients_wait_to_be_dropped() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let (mut child, mut err, addr) = serving_sleep(dir.path(), "3");
    let t0 = Instant::now();
    let idle: Vec<TcpStream> = (0..64)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    let mut answered = 0;
    for _ in 0..5 {
        let mut c = TcpStream::connect(&addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        write!(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut s = String::new();
        let _ = c.read_to_string(&mut s);
        answered += usize::from(s.starts_with("HTTP/1.1 200"));
    }
    let took = t0.elapsed();
    drop(idle);
    let st = child.wait().unwrap();
    let _ = std::io::copy(&mut err, &mut std::io::sink());
    assert!(st.success());
    assert_eq!(answered, 5);
    assert!(
        took < Duration::from_millis(1500),
        "5 scrapes took {took:?} beside 64 idle connections: they waited for the idle ones"
    );
}
