//! Block size from the period of write latency (fsdisco §3.3.1, Fig 2):
//! small sequential writes to a fresh file are cheap while they land in a
//! block already allocated and dearer where they start a new one, so the
//! dear offsets recur with the block size.
//!
//! Offsets are grouped by *level*: level B holds the offsets that are
//! multiples of B but not of 2B. With block size b, levels below b are
//! inside a block and levels from b up start one, so the block size is the
//! smallest level whose latencies jump clear above the level below it.
//! Page-cache pages are allocated at page-size offsets too; a jump at the
//! page size is therefore the block size only if no level above the page
//! size jumps again (a block larger than a page).

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::classify::{Confidence, Level};
use crate::methods::{bytes, create_new};
use crate::series::{median, quantile, Series, Summary};
use crate::timing;
use crate::{Ctx, DiscoverError};

/// Bytes per write: small enough to see blocks of 512 B.
pub const UNIT: u64 = 256;
/// File size per iteration.
pub const FILE: u64 = 1 << 20;
/// The largest block size looked for.
pub const MAX_LEVEL: u64 = 64 << 10;

/// Writes `FILE` bytes in `UNIT` pieces to a fresh file at `path`, timing
/// each write, `iterations` times.
pub fn measure(path: &Path, iterations: u32, ctx: &mut Ctx) -> Result<Series, DiscoverError> {
    let offsets: Vec<u64> = (0..FILE / UNIT).map(|i| i * UNIT).collect();
    let mut series = Series::new(offsets);
    let buf = [b'w'; UNIT as usize];
    for _ in 0..iterations {
        ctx.check()?;
        let _ = std::fs::remove_file(path);
        let mut f =
            create_new(path).map_err(DiscoverError::io(format!("create {}", path.display())))?;
        let run = timing::run(series.len(), |_| write_whole(&mut f, &buf))
            .map_err(DiscoverError::io(format!("write {}", path.display())))?;
        drop(f);
        std::fs::remove_file(path)
            .map_err(DiscoverError::io(format!("remove {}", path.display())))?;
        series.push_run(run);
        ctx.progress.advance(1);
    }
    Ok(series)
}

/// One write(2) that must write all of `buf` (a short write to a fresh
/// file means the file system is full).
pub(crate) fn write_whole(f: &mut std::fs::File, buf: &[u8]) -> std::io::Result<()> {
    match f.write(buf)? {
        n if n == buf.len() => Ok(()),
        _ => Err(std::io::ErrorKind::WriteZero.into()),
    }
}

/// The latencies of one level.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LevelStat {
    /// Offsets that are multiples of this but not of twice this.
    pub size: u64,
    pub count: usize,
    pub median_ns: f64,
    pub q25_ns: f64,
    pub q75_ns: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Inference {
    pub block: Option<u64>,
    pub levels: Vec<LevelStat>,
    /// Levels whose latencies jump clear above the level below.
    pub jumps: Vec<u64>,
    pub confidence: Confidence,
    /// The period found is the page size, where page allocation also costs.
    pub at_page: bool,
}

fn level_of(offset: u64) -> u64 {
    1u64 << offset.trailing_zeros()
}

fn levels(s: &Series, summary: &[f64]) -> Vec<LevelStat> {
    let mut out = Vec::new();
    let mut size = UNIT;
    while size <= MAX_LEVEL {
        let v: Vec<f64> = s
            .offsets
            .iter()
            .zip(summary)
            .filter(|(o, _)| **o != 0 && level_of(**o) == size)
            .map(|(_, v)| *v)
            .collect();
        if v.len() >= 4 {
            out.push(LevelStat {
                size,
                count: v.len(),
                median_ns: median(&v),
                q25_ns: quantile(&v, 0.25),
                q75_ns: quantile(&v, 0.75),
            });
        }
        size *= 2;
    }
    out
}

/// A jump: the lower quartile of a level above the upper quartile of the
/// level below, and the medians at least 15% apart.
fn jumps(levels: &[LevelStat]) -> Vec<u64> {
    levels
        .windows(2)
        .filter(|w| w[1].q25_ns > w[0].q75_ns && w[1].median_ns >= 1.15 * w[0].median_ns)
        .map(|w| w[1].size)
        .collect()
}

pub fn infer(s: &Series, page: u64) -> Inference {
    let summary = s.summary(Summary::Min);
    let levels = levels(s, &summary);
    let jumps = jumps(&levels);
    let first = jumps.first().copied();
    let above_page = jumps.iter().copied().find(|&j| j > page);
    let block = match first {
        Some(j) if j == page => Some(above_page.unwrap_or(j)),
        other => other,
    };
    let Some(b) = block else {
        return Inference {
            block: None,
            levels,
            jumps,
            confidence: Confidence {
                level: Level::Low,
                statement: "no level of write offsets cost clearly more than the level below it"
                    .into(),
            },
            at_page: false,
        };
    };
    let stat = |size: u64| levels.iter().find(|l| l.size == size);
    let (hi, lo) = (stat(b), stat(b / 2));
    let (hi_ns, lo_ns) = (
        hi.map_or(0.0, |l| l.median_ns),
        lo.map_or(0.0, |l| l.median_ns),
    );
    let threshold = (hi_ns * lo_ns).sqrt();
    // Offsets that contradict "dear from level b up, cheap below" (page
    // starts are dear for another reason when b is above the page size).
    let mut errors = 0;
    let mut n = 0;
    for (o, v) in s.offsets.iter().zip(&summary) {
        if *o == 0 {
            continue;
        }
        let lvl = level_of(*o);
        if b > page && lvl == page {
            continue;
        }
        n += 1;
        if (lvl >= b) != (*v >= threshold) {
            errors += 1;
        }
    }
    let ratio = hi_ns / lo_ns.max(1.0);
    let level = if ratio >= 1.5 && errors * 20 <= n {
        Level::High
    } else if ratio >= 1.15 && errors * 10 <= n {
        Level::Medium
    } else {
        Level::Low
    };
    let statement = format!(
        "writes that start a new {} block took {} (median of per-offset minima), writes inside a block {} ({ratio:.1}x); {errors} of {n} offsets disagree",
        bytes(b),
        fsprof_core::units::format_ns(hi_ns),
        fsprof_core::units::format_ns(lo_ns),
    );
    Inference {
        block,
        levels,
        jumps,
        confidence: Confidence { level, statement },
        at_page: b == page,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A series shaped like the real thing: `alloc` extra ns at each block
    /// start, `page_cost` at each page start, a little deterministic noise.
    fn synthetic(block: u64, page: u64, alloc: u64, page_cost: u64) -> Series {
        let offsets: Vec<u64> = (0..FILE / UNIT).map(|i| i * UNIT).collect();
        let mut s = Series::new(offsets.clone());
        for it in 0..3u64 {
            s.push_run(
                offsets
                    .iter()
                    .map(|o| {
                        let mut v = 500 + (o / UNIT * 7 + it * 13) % 40;
                        if o % block == 0 {
                            v += alloc;
                        }
                        if o % page == 0 {
                            v += page_cost;
                        }
                        v
                    })
                    .collect(),
            );
        }
        s
    }

    #[test]
    fn each_block_size_is_the_first_jump() {
        for b in [512, 1024, 2048, 4096] {
            let inf = infer(&synthetic(b, 4096, 1500, 2000), 4096);
            assert_eq!(inf.block, Some(b), "{inf:?}");
            assert_eq!(inf.confidence.level, Level::High, "{inf:?}");
        }
    }

    #[test]
    fn a_block_larger_than_a_page_shows_as_a_second_jump() {
        let inf = infer(&synthetic(16384, 4096, 1500, 2000), 4096);
        assert_eq!(inf.block, Some(16384), "{inf:?}");
        assert!(!inf.at_page);
    }

    #[test]
    fn the_page_period_alone_is_flagged() {
        let inf = infer(&synthetic(4096, 4096, 0, 2000), 4096);
        assert_eq!(inf.block, Some(4096));
        assert!(inf.at_page);
    }

    #[test]
    fn flat_latencies_give_no_block() {
        let inf = infer(&synthetic(1 << 30, 1 << 30, 0, 0), 4096);
        assert_eq!(inf.block, None);
        assert_eq!(inf.confidence.level, Level::Low);
    }
}
