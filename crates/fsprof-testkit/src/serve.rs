//! `--serve-metrics` as the tests drive it: where fsprof says it serves,
//! and a live run whose command keeps working until the test has scraped.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The `host:port` in fsprof's "serving live metrics on http://…/metrics"
/// line, wherever it stands in `text`; fails the test if there is none.
#[track_caller]
pub fn metrics_addr(text: &str) -> String {
    text.split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no address in {text:?}"))
        .to_string()
}

/// A running `fsprof run --serve-metrics 127.0.0.1:0` (see [`serve_live`]).
pub struct Live {
    pub child: Child,
    /// Where it serves, `127.0.0.1:port`.
    pub addr: String,
    /// The profile it writes when the command ends.
    pub profile: PathBuf,
    done: PathBuf,
}

/// `fsprof run -q [extra] --serve-metrics 127.0.0.1:0 -o dir/live.json --
/// sh -c LOOP`, where LOOP runs `work` every 50 ms until the test calls
/// [`Live::finish`] (or `max` times), so a scrape happens during the run,
/// not after it. Returns once fsprof has said where it serves.
pub fn serve_live(dir: &Path, extra: &[&str], work: &str, max: u32) -> Live {
    let done = dir.join("done");
    let profile = dir.join("live.json");
    let script = format!(
        "i=0; while [ ! -e '{}' ] && [ $i -lt {max} ]; do {work}; i=$((i+1)); sleep 0.05; done",
        done.display()
    );
    let mut child = crate::fsprof()
        .args(["run", "-q"])
        .args(extra)
        .args(["--serve-metrics", "127.0.0.1:0", "-o"])
        .arg(&profile)
        .args(["--", "sh", "-c", &script])
        .stderr(Stdio::piped())
        .spawn()
        .expect("running fsprof");
    let (tx, rx) = mpsc::channel();
    let err = child.stderr.take().expect("a piped stderr");
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut lines = Vec::new();
    let addr = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("no serving line; stderr: {lines:?}"));
        if let Some(rest) = line.strip_prefix("fsprof: serving live metrics on http://") {
            break rest.trim_end_matches("/metrics").to_string();
        }
        lines.push(line);
    };
    Live {
        child,
        addr,
        profile,
        done,
    }
}

impl Live {
    /// Lets the command's loop end; waits for fsprof.
    pub fn finish(mut self) -> ExitStatus {
        std::fs::write(&self.done, "").expect("writing the stop file");
        self.child.wait().expect("waiting for fsprof")
    }
}
