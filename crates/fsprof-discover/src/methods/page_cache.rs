//! Page-cache capacity (fsdisco §3.3.3, Fig 5): read a file larger than
//! the cache backwards, so that its start is what stays cached, then read
//! it forwards; the offset where 1 MiB reads jump from memory-copy to
//! device latency is how much of the file the cache held.
//!
//! As root the cache is bounded by a memory cgroup of a known limit that
//! fsprof creates (see [`crate::cgroup`]): the measurement is quick and
//! the limit is the value to compare with. Otherwise the bound is the
//! machine's available memory, which needs a file larger than it; fsprof
//! refuses when that does not fit the file system or 4 GiB.
//!
//! Both passes read with `POSIX_FADV_RANDOM`, so read-ahead neither fills
//! the cache beyond what was read nor hides the device behind the
//! forward pass.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::cgroup::{CgroupError, MemCgroup};
use crate::classify::{grade, step_up, two_levels, Confidence};
use crate::cold::{is_root, Cooler};
use crate::exposed::{self, Exposed};
use crate::finding::{Curve, Finding, Mark, Parameter};
use crate::methods::{bytes, fadvise, readahead};
use crate::series::{Series, Summary};
use crate::target::{Scratch, Target};
use crate::timing;
use crate::{Ctx, DiscoverError};

/// Bytes per read.
pub const CHUNK: u64 = 1 << 20;
/// The largest test file fsprof writes without a cgroup.
pub const MAX_FILE: u64 = 4 << 30;
/// The default cgroup limit (less on a small file system).
pub const DEFAULT_LIMIT: u64 = 256 << 20;

pub const METHOD: &str = "a file 1.5 times the cache read backwards in 1 MiB reads, then forwards; the offset where reads jump to device latency (fsdisco §3.3.3)";

/// How the cache is bounded.
enum Bound {
    Cgroup(MemCgroup),
    FreeMemory,
}

/// Reads the file backwards (filling the cache with its start), then
/// forwards, timing the forward reads.
fn one(
    path: &Path,
    size: u64,
    buf: &mut [u8],
    cg: Option<&mut MemCgroup>,
) -> Result<Vec<u64>, DiscoverError> {
    let io = |w: &str| DiscoverError::io(format!("{w} {}", path.display()));
    let f = File::open(path).map_err(io("open"))?;
    fadvise(&f, libc::POSIX_FADV_RANDOM).map_err(io("fadvise"))?;
    let mut inside = cg;
    if let Some(cg) = inside.as_deref_mut() {
        cg.enter()
            .map_err(DiscoverError::io(format!("enter {}", cg.path.display())))?;
    }
    let chunks = size / CHUNK;
    let result = (|| {
        for k in (0..chunks).rev() {
            f.read_exact_at(buf, k * CHUNK).map_err(io("read"))?;
        }
        timing::run(chunks as usize, |k| f.read_exact_at(buf, k as u64 * CHUNK)).map_err(io("read"))
    })();
    if let Some(cg) = inside {
        cg.leave().map_err(DiscoverError::io("leave the cgroup"))?;
    }
    result
}

#[derive(Clone, Debug, PartialEq)]
pub struct Inference {
    pub capacity: Option<u64>,
    pub confidence: Confidence,
    pub threshold: Option<f64>,
}

/// The step from cached to device reads along the forward pass.
pub fn infer(s: &Series) -> Inference {
    let v = s.summary(Summary::Min);
    let low = |statement: String| Inference {
        capacity: None,
        confidence: Confidence {
            level: crate::classify::Level::Low,
            statement,
        },
        threshold: None,
    };
    let Some(levels) = two_levels(&v) else {
        return low("too few reads".into());
    };
    if levels.ratio() < 2.0 {
        return low(format!(
            "forward reads did not split into cached and device reads (the two levels are {:.1}x apart)",
            levels.ratio()
        ));
    }
    let high: Vec<bool> = v.iter().map(|x| levels.is_high(*x)).collect();
    let step = step_up(&high);
    if step.at == 0 || step.at == v.len() {
        return low(if step.at == 0 {
            "even the first forward reads went to the device: nothing stayed cached".into()
        } else {
            "every forward read was cached: the file fit in the cache".into()
        });
    }
    let capacity = s.offsets[step.at];
    let statement = format!(
        "forward reads of 1 MiB took {} up to {} and {} after it ({:.1}x, Ashman's D {:.1}); {} of {} reads disagree with the step",
        fsprof_core::units::format_ns(levels.low_ns),
        bytes(capacity),
        fsprof_core::units::format_ns(levels.high_ns),
        levels.ratio(),
        levels.separation,
        step.errors,
        v.len()
    );
    Inference {
        capacity: Some(capacity),
        confidence: Confidence {
            level: grade(&levels, step.errors, v.len(), 2.0),
            statement,
        },
        threshold: Some(levels.threshold_ns),
    }
}

/// Why the page-cache method cannot run here; each says what would let it.
#[derive(Debug, thiserror::Error)]
enum NoBound {
    #[error("{} free: the page-cache method needs room for a file of at least 24 MiB", bytes(*free))]
    NoRoom { free: u64 },
    #[error("a {} cgroup limit needs a {} test file, but the file system has {} free; lower --cgroup-limit", bytes(*limit), bytes(*size), bytes(*free))]
    LimitTooLarge { limit: u64, size: u64, free: u64 },
    #[error("memory cgroup: {0}")]
    Cgroup(#[from] CgroupError),
    #[error("without root (no memory cgroup) the cache is bounded only by free memory, which needs a {} test file; that is more than {}: run as root", bytes(*size), if *free < MAX_FILE { format!("the {} free on the file system", bytes(*free)) } else { format!("fsprof writes ({})", bytes(MAX_FILE)) })]
    MemoryTooLarge { size: u64, free: u64 },
}

/// The cache's bound and the test file's size, or why the method cannot
/// run here. The cgroup's limit goes into `f.kernel`.
fn choose_bound(t: &Target, limit: Option<u64>, f: &mut Finding) -> Result<(Bound, u64), NoBound> {
    if is_root() {
        let limit =
            limit.unwrap_or_else(|| DEFAULT_LIMIT.min(t.free_bytes / 3 / (16 << 20) * (16 << 20)));
        if limit < 16 << 20 {
            return Err(NoBound::NoRoom { free: t.free_bytes });
        }
        let size = (limit + limit / 2).div_ceil(CHUNK) * CHUNK;
        if size > t.free_bytes {
            return Err(NoBound::LimitTooLarge {
                limit,
                size,
                free: t.free_bytes,
            });
        }
        let cg = MemCgroup::create(limit)?;
        f.kernel.push(Exposed {
            value: cg.stated_limit().unwrap_or(limit),
            source: cg.limit_file().display().to_string(),
        });
        return Ok((Bound::Cgroup(cg), size));
    }
    let avail = exposed::available_memory().value;
    let size = (avail + avail / 4).div_ceil(CHUNK) * CHUNK;
    if size > t.free_bytes.min(MAX_FILE) {
        return Err(NoBound::MemoryTooLarge {
            size,
            free: t.free_bytes,
        });
    }
    if limit.is_some() {
        f.notes
            .push("--cgroup-limit needs root; the cache is bounded by free memory instead".into());
    }
    Ok((Bound::FreeMemory, size))
}

/// The forward pass with the capacity (and the cgroup limit) marked.
fn curve(series: &Series, inf: &Inference, limit: Option<&Exposed>) -> Curve {
    let mut c = Curve::from_series(
        "Forward 1 MiB reads after a backward pass",
        "file offset",
        true,
        series,
    );
    c.threshold = inf.threshold;
    if let Some(cap) = inf.capacity {
        c.marks.push(Mark {
            at: cap as f64,
            label: format!("cached: {}", bytes(cap)),
        });
    }
    if let Some(k) = limit {
        c.marks.push(Mark {
            at: k.value as f64,
            label: "cgroup limit".into(),
        });
    }
    c
}

pub fn discover(
    t: &Target,
    scratch: &Scratch,
    limit: Option<u64>,
    cooler: &Cooler,
    iterations: u32,
    ctx: &mut Ctx,
) -> Result<Finding, DiscoverError> {
    let start = fsprof_sys::clock::mono_ns();
    let mut f = Finding::new(Parameter::PageCache, METHOD, Summary::Min);
    f.iterations = iterations;
    let avail = exposed::available_memory();
    if t.memory_only() {
        return Ok(f.not_applicable(format!(
            "{} keeps file pages only in memory: there is no device latency to tell cached from uncached pages",
            t.fs_type
        )));
    }
    let (mut bound, size) = match choose_bound(t, limit, &mut f) {
        Ok(b) => b,
        Err(why) => {
            f.kernel.push(avail);
            return Ok(f.not_applicable(why.to_string()));
        }
    };
    f.kernel.push(avail);
    let path = scratch.file("page-cache");
    ctx.progress.phase("page cache: writing the test file", 1);
    readahead::prepare(&path, size)?;
    ctx.progress.advance(1);
    ctx.progress.phase(
        "page cache: backward then forward reads",
        u64::from(iterations),
    );
    let mut series = Series::new((0..size / CHUNK).map(|k| k * CHUNK).collect());
    let mut buf = vec![0u8; CHUNK as usize];
    let before = cooler.tally();
    for _ in 0..iterations {
        ctx.check()?;
        cooler.cool(&[&path], ctx)?;
        let cg = match &mut bound {
            Bound::Cgroup(cg) => Some(cg),
            Bound::FreeMemory => None,
        };
        series.push_run(one(&path, size, &mut buf, cg)?);
        ctx.progress.advance(1);
    }
    let _ = std::fs::remove_file(&path);
    f.notes.extend(cooler.tally().since(&before));
    if let Bound::Cgroup(cg) = &bound {
        if let Some(peak) = cg.peak() {
            f.notes.push(format!(
                "the cgroup held at most {} (its peak usage)",
                bytes(peak)
            ));
        }
        f.notes.push(format!(
            "cache bounded by a memory cgroup of {} that fsprof created and removed; {} test file",
            bytes(cg.limit),
            bytes(size)
        ));
    } else {
        f.notes.push(format!(
            "cache bounded by free memory; {} test file",
            bytes(size)
        ));
    }
    drop(bound);
    let inf = infer(&series);
    f.curves
        .push(curve(&series, &inf, f.kernel.first().filter(|_| is_root())));
    f.samples.push(("page-cache.read".into(), series));
    Ok(f.concluded(inf.capacity, inf.confidence, start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_step_is_the_capacity() {
        let n = 96;
        let mut s = Series::new((0..n).map(|k| k * CHUNK).collect());
        for it in 0..3 {
            s.push_run(
                (0..n)
                    .map(|k| {
                        let noisy = k == 20 && it == 0;
                        if k < 61 && !noisy {
                            250_000 + k * 100
                        } else {
                            3_000_000 + k * 1000
                        }
                    })
                    .collect(),
            );
        }
        let inf = infer(&s);
        assert_eq!(inf.capacity, Some(61 * CHUNK), "{inf:?}");
        assert_eq!(inf.confidence.level, crate::classify::Level::High);
    }

    #[test]
    fn all_cached_or_none_cached_is_inconclusive() {
        let mut s = Series::new((0..10).map(|k| k * CHUNK).collect());
        s.push_run((0..10).map(|k| if k < 10 { 200_000 } else { 0 }).collect());
        assert_eq!(infer(&s).capacity, None);
    }
}
