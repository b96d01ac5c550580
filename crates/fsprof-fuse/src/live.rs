//! The profile as it stands while the mount is up: what the control file,
//! SIGUSR1 and the metrics endpoint hand out. The saved profile at the end
//! comes from the capture loop instead, with the same metadata.

use std::sync::Mutex;

use fsprof_core::profile::{Meta, Overhead};
use fsprof_core::Profile;
use fsprof_sys::clock::{mono_ns, wall_unix_ns};

use crate::poll::BusyPoll;
use crate::stats::Recorder;

pub struct Live {
    pub rec: Recorder,
    /// `--busy-poll`: its setting and counts go into the metadata.
    pub poll: BusyPoll,
    /// Everything but the times and counts (set up by the source).
    meta: Mutex<Meta>,
    overhead: Overhead,
    start_mono: u64,
    start_unix: u64,
}

impl Live {
    pub fn new(rec: Recorder, poll: BusyPoll, meta: Meta, overhead: Overhead) -> Live {
        Live {
            rec,
            poll,
            meta: Mutex::new(meta),
            overhead,
            start_mono: mono_ns(),
            start_unix: wall_unix_ns(),
        }
    }

    pub fn overhead(&self) -> &Overhead {
        &self.overhead
    }

    pub fn start_unix_ns(&self) -> u64 {
        self.start_unix
    }

    /// Changes the metadata (settings learnt after the start, e.g. whether
    /// the kernel granted passthrough).
    pub fn edit_meta(&self, f: impl FnOnce(&mut Meta)) {
        f(&mut self.meta.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// The metadata, with the busy poll's setting and counts of now.
    pub fn meta(&self) -> Meta {
        let mut m = self.meta.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for (k, v) in self.poll.describe() {
            m.settings.insert(k.into(), v);
        }
        m
    }

    /// The counts so far, with the metadata of a finished capture.
    pub fn profile(&self) -> Profile {
        let layer = self.rec.layer();
        let mut meta = fsprof_capture::meta::timed(
            self.meta(),
            self.start_unix,
            mono_ns().saturating_sub(self.start_mono),
        );
        meta.clock = self.rec.ticks().clock();
        let mut o = self.overhead.clone();
        o.estimated_total_ns = (o.per_call_ns * layer.total_calls() as f64) as u64;
        meta.overhead = Some(o);
        let mut p = Profile::new(meta);
        p.layers.push(layer);
        p
    }
}
