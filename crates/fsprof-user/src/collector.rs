//! Gathers the per-process counter files during and after a run.
//!
//! A file whose process can no longer write to it — the process is gone,
//! or the same pid has exec'd a newer image that has a file of its own — is
//! read once, kept in memory and deleted. A build that runs tens of
//! thousands of processes would otherwise hold tens of thousands of
//! counter files (~100 KB of tmpfs each) until the end.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use fsprof_shim::abi::ProcHeader;
use fsprof_sys::process::pid_exists;

use crate::reader::{read_process, ProcessCounters};
use crate::rundir::RunDir;

pub struct Collector {
    /// Owned, so the directory (and every file in it) goes with the run.
    dir: RunDir,
    nbuckets: u32,
    /// Processes whose counters are final, in no particular order.
    done: Vec<ProcessCounters>,
    pub notes: Vec<String>,
}

impl Collector {
    pub fn new(dir: RunDir, nbuckets: u32) -> Self {
        Collector {
            dir,
            nbuckets,
            done: Vec::new(),
            notes: Vec::new(),
        }
    }

    pub fn dir(&self) -> &RunDir {
        &self.dir
    }

    /// Moves the counters of processes that cannot write any more into
    /// memory and deletes their files.
    pub fn harvest(&mut self) {
        let files = self.dir.process_files().unwrap_or_default();
        let heads: Vec<(u64, &PathBuf, i32)> = files
            .iter()
            .filter_map(|(seq, path)| Some((*seq, path, peek_pid(path).ok()??)))
            .collect();
        let mut newest: HashMap<i32, u64> = HashMap::new();
        for &(seq, _, pid) in &heads {
            let e = newest.entry(pid).or_insert(seq);
            *e = (*e).max(seq);
        }
        for (seq, path, pid) in heads {
            // A pid runs one image at a time: an older file of a pid that
            // has a newer one belongs to an image that exec replaced.
            let replaced = newest[&pid] > seq;
            // A zombie counts as alive (harmless: it is harvested once
            // reaped); a pid reused by an unrelated process only delays
            // the harvest.
            if !replaced && pid_exists(pid) {
                continue;
            }
            match read_process(path, self.nbuckets) {
                Ok(Some(p)) => {
                    self.done.push(p);
                    let _ = std::fs::remove_file(path);
                }
                Ok(None) => {}
                Err(e) => {
                    self.notes
                        .push(format!("skipped a process's counters: {e}"));
                    let _ = std::fs::remove_file(path);
                }
            }
        }
    }

    /// Every process seen so far, in creation order: the harvested ones and
    /// the current counters of the others.
    pub fn snapshot(&mut self) -> Vec<ProcessCounters> {
        let mut all = self.done.clone();
        for (_, path) in self.dir.process_files().unwrap_or_default() {
            match read_process(&path, self.nbuckets) {
                Ok(Some(p)) => all.push(p),
                Ok(None) => {}
                Err(e) => self
                    .notes
                    .push(format!("skipped a process's counters: {e}")),
            }
        }
        all.sort_by_key(|p| p.seq);
        all
    }
}

/// The pid a counter file belongs to, once its header is complete.
fn peek_pid(path: &Path) -> io::Result<Option<i32>> {
    let mut head = [0u8; 128];
    let n = File::open(path)?.read_at(&mut head, 0)?;
    let ready = std::mem::offset_of!(ProcHeader, ready);
    let pid = std::mem::offset_of!(ProcHeader, pid);
    if n < ready + 4 || u32::from_ne_bytes(head[ready..ready + 4].try_into().unwrap()) != 1 {
        return Ok(None);
    }
    Ok(Some(i32::from_ne_bytes(
        head[pid..pid + 4].try_into().unwrap(),
    )))
}
