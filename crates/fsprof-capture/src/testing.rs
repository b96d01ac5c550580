//! A source that needs neither root nor a shim, so that the capture loop
//! (and code built on it) can be tested anywhere: every snapshot counts
//! one more call of one op, and every call into the source is logged.

use std::ffi::OsString;

use fsprof_core::histogram::OpStats;
use fsprof_core::profile::{Clock, Layer, Meta};

use crate::source::{Caps, Ended, Finish, Source, SourceError};

/// Latency each counted call is recorded with.
pub const CALL_NS: u64 = 1000;

#[derive(Debug, Default)]
pub struct CountingSource {
    pub caps: Caps,
    /// Added to the command's environment.
    pub env: Vec<(OsString, OsString)>,
    /// Calls counted so far (one per snapshot, one more at the finish).
    pub calls: u64,
    /// `ended()` turns true after this many snapshots.
    pub end_after: Option<u64>,
    /// `start` fails with this message.
    pub fail_start: Option<String>,
    /// What the loop called, in order: `start(true|false)` (with a
    /// command or not), `snapshot`, `upkeep`, `finish`, `amend_meta`.
    pub log: Vec<String>,
    /// The `Ended` the finish was given.
    pub ended_with: Option<Ended>,
    /// `amend_meta` records this as the host.
    pub host: Option<String>,
}

impl CountingSource {
    fn layers(&self) -> Vec<Layer> {
        let mut op = OpStats::new("tick");
        for _ in 0..self.calls {
            op.merge(&one_call());
        }
        let mut l = Layer::new("test");
        l.ops.push(op);
        vec![l]
    }
}

fn one_call() -> OpStats {
    let mut op = OpStats::new("tick");
    op.pre = 1;
    op.post = 1;
    op.total_ns = CALL_NS;
    op.min_ns = Some(CALL_NS);
    op.max_ns = Some(CALL_NS);
    op.histogram.add_to(Some(10), 1);
    op
}

impl Source for CountingSource {
    fn caps(&self) -> Caps {
        self.caps
    }

    fn command_env(&self) -> Vec<(OsString, OsString)> {
        self.env.clone()
    }

    fn start(&mut self, command: Option<i32>) -> Result<String, SourceError> {
        self.log.push(format!("start({})", command.is_some()));
        match &self.fail_start {
            Some(why) => Err(why.clone().into()),
            None => Ok("ticks".into()),
        }
    }

    fn snapshot(&mut self) -> Result<Vec<Layer>, SourceError> {
        self.log.push("snapshot".into());
        self.calls += 1;
        Ok(self.layers())
    }

    fn upkeep(&mut self) {
        self.log.push("upkeep".into());
    }

    fn ended(&mut self) -> bool {
        self.end_after
            .is_some_and(|n| self.log.iter().filter(|l| *l == "snapshot").count() as u64 >= n)
    }

    fn finish(&mut self, how: &Ended) -> Result<Finish, SourceError> {
        self.log.push("finish".into());
        self.ended_with = Some(how.clone());
        self.calls += 1;
        Ok(Finish {
            layers: self.layers(),
            clock: Clock {
                source: "monotonic".into(),
                tsc_hz: None,
            },
            notes: vec![format!("{} calls", self.calls)],
            ..Default::default()
        })
    }

    fn amend_meta(&mut self, meta: &mut Meta) {
        self.log.push("amend_meta".into());
        if let Some(h) = &self.host {
            meta.run.host = h.clone();
        }
    }
}
