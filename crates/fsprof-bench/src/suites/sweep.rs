//! Sprite over file sizes across the CPU caches and memory (`fsprof bench
//! sweep`): the five phases at every power of two from `--min-size` to
//! `--max-size`, so that the paper's anomalies — a working set that
//! leaves the L2 or the last-level cache, a file larger than memory — show
//! as steps against file size (`--plot`).

use std::io;

use serde::Deserialize;

use super::sprite::{self, Io, ALIGN, FILES, IO_SIZE, PAD_SYSCALLS};
use super::{Description, Ctx, PhaseRun, Suite};
use crate::params::{invalid, Kind, Opt, ParamError, Params};

pub struct Sweep;

const MIN_SIZE: Opt = Opt {
    name: "min-size",
    help: "Smallest file size",
    value_name: "SIZE",
    kind: Kind::Size,
    default: "4k",
};
const MAX_SIZE: Opt = Opt {
    name: "max-size",
    help: "Largest file size",
    value_name: "SIZE",
    kind: Kind::Size,
    default: "64M",
};

#[derive(Deserialize)]
struct Range {
    min_size: u64,
    max_size: u64,
}

impl Range {
    /// Powers of two from `min_size` to `max_size`.
    fn sizes(&self) -> Vec<u64> {
        let mut v = Vec::new();
        let mut s = self.min_size.max(1).next_power_of_two();
        while s <= self.max_size {
            v.push(s);
            s = match s.checked_mul(2) {
                Some(n) => n,
                None => break,
            };
        }
        v
    }
}

const DESCRIPTION: Description = Description {
    name: "sweep",
    about: "Sprite over file sizes spanning the CPU caches and memory",
    options: &[FILES, IO_SIZE, ALIGN, PAD_SYSCALLS, MIN_SIZE, MAX_SIZE],
};

impl Suite for Sweep {
    fn description(&self) -> &'static Description {
        &DESCRIPTION
    }

    fn validate(&self, p: &Params) -> Result<(), ParamError> {
        let r = p.options_as::<Range>()?;
        p.options_as::<Io>()?.check(r.min_size, "--min-size")?;
        if r.sizes().is_empty() {
            return invalid("--min-size", "is larger than --max-size: no size to sweep");
        }
        Ok(())
    }

    fn working_set(&self, p: &Params) -> u64 {
        match (p.options_as::<Io>(), p.options_as::<Range>()) {
            (Ok(io), Ok(r)) => (io.files as u64).saturating_mul(r.max_size),
            _ => 0,
        }
    }

    fn sweep(&self, p: &Params) -> Option<Vec<u64>> {
        Some(p.options_as::<Range>().map(|r| r.sizes()).unwrap_or_default())
    }

    fn run_once(&self, ctx: &Ctx, size: u64) -> io::Result<Vec<PhaseRun>> {
        sprite::run_phases(ctx, &ctx.options()?, size)
    }

    fn figures_note(&self, p: &Params) -> Option<String> {
        p.options_as::<Io>().ok().map(|io| io.note())
    }

    fn summary(&self, p: &Params) -> String {
        p.options_as::<Io>().map(|io| io.summary()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_sizes_are_the_powers_of_two_in_range() {
        let mut p = Params::defaults("sweep", "/tmp".into());
        p.set("min_size", 3000).set("max_size", 40000);
        assert_eq!(Sweep.sweep(&p), Some(vec![4096, 8192, 16384, 32768]));
        p.set("max_size", 2000);
        assert_eq!(Sweep.sweep(&p), Some(vec![]));
    }
}
