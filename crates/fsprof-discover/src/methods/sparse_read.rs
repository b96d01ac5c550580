//! Block size from reads of a sparse file (fsdisco §4's suggestion, made
//! exact with direct I/O): one byte is written in the middle of an
//! otherwise empty file, which allocates exactly the block that holds it.
//! Direct reads (`O_DIRECT`, no page cache) of a hole are answered with
//! zeros by the file system, of the allocated block by the device. Read
//! around the byte in small steps, the slow offsets are that one block.
//!
//! Reads go in a shuffled order each iteration: the first read after one
//! that waited for the device runs on cold CPU caches and is a few µs
//! slower, which in a fixed order would always hit the same offset.

use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use crate::classify::{grade, two_levels, Confidence, Level, Levels};
use crate::methods::{bytes, create_new, dio_align, AlignedBuf};
use crate::series::{Series, Summary};
use crate::timing::{Clock, TimingLoop};
use crate::{Ctx, DiscoverError};

/// Where the byte is written: a multiple of any block size looked for.
pub const ISLAND: u64 = 256 << 10;
/// How far on each side of it reads go: the largest block found.
pub const SPAN: u64 = 64 << 10;

/// Why the method cannot run here.
#[derive(Debug)]
pub enum Unusable {
    NoDirectIo(String),
}

/// Creates the sparse file and times direct reads around its one byte.
/// `Ok(Err(..))` when the file system takes no direct I/O.
pub fn measure(
    path: &Path,
    iterations: u32,
    ctx: &mut Ctx,
) -> Result<Result<(Series, u64), Unusable>, DiscoverError> {
    let io = |what: &str| DiscoverError::io(format!("{what} {}", path.display()));
    let _ = std::fs::remove_file(path);
    let mut f = create_new(path).map_err(io("create"))?;
    f.set_len(2 * ISLAND).map_err(io("truncate"))?;
    f.write_all_at(b"x", ISLAND).map_err(io("write"))?;
    f.flush().map_err(io("write"))?;
    f.sync_all().map_err(io("fsync"))?;
    drop(f);
    // Where the file system does not state its alignment (btrfs), a page
    // is safe: an unaligned direct read may silently become a cached one.
    let page = fsprof_sys::host::page_size() as u32;
    let (mem_align, off_align) = dio_align(path).unwrap_or((page, page));
    let step = u64::from(off_align).max(512);
    let direct = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            return Ok(Err(Unusable::NoDirectIo(format!(
                "open with O_DIRECT: {e}"
            ))))
        }
        Err(e) => return Err(io("open")(e)),
    };
    let offsets: Vec<u64> = (0..2 * SPAN / step)
        .map(|i| ISLAND - SPAN + i * step)
        .collect();
    let mut series = Series::new(offsets.clone());
    let mut buf = AlignedBuf::new(step as usize, (mem_align as usize).max(4096));
    let mut rng = fastrand::Rng::with_seed(0x5ba75e);
    for _ in 0..iterations {
        ctx.check()?;
        let mut order: Vec<usize> = (0..offsets.len()).collect();
        rng.shuffle(&mut order);
        let mut run = vec![0u64; offsets.len()];
        // One untimed read first: the first read after opening is slower.
        let ns = TimingLoop::new(Clock::process())
            .warmup(1)
            .run(order.len(), |k| {
                direct.read_at(buf.as_mut(), offsets[order[k]]).map(|_| ())
            })
            .map_err(io("direct read"))?
            .ns;
        for (k, &i) in order.iter().enumerate() {
            run[i] = ns[k];
        }
        series.push_run(run);
        ctx.progress.advance(1);
    }
    drop(direct);
    std::fs::remove_file(path).map_err(io("remove"))?;
    Ok(Ok((series, step)))
}

#[derive(Clone, Debug, PartialEq)]
pub struct Inference {
    pub block: Option<u64>,
    pub levels: Option<Levels>,
    pub confidence: Confidence,
    /// The read step: no block smaller than this can be seen.
    pub step: u64,
}

/// The run of slow offsets that starts at the written byte.
pub fn infer(s: &Series, step: u64) -> Inference {
    let v = s.summary(Summary::Min);
    let low = |statement: String| Inference {
        block: None,
        levels: None,
        confidence: Confidence {
            level: Level::Low,
            statement,
        },
        step,
    };
    let Some(levels) = two_levels(&v) else {
        return low("too few reads".into());
    };
    let Some(start) = s.offsets.iter().position(|&o| o == ISLAND) else {
        return low("no read at the written byte".into());
    };
    let high: Vec<bool> = v.iter().map(|x| levels.is_high(*x)).collect();
    if !high[start] || levels.ratio() < 2.0 {
        return low(format!(
            "direct reads of the written block ({}) were not clearly slower than reads of holes ({}): the file system may answer direct reads from a cache or fill holes",
            fsprof_core::units::format_ns(v[start]),
            fsprof_core::units::format_ns(levels.low_ns)
        ));
    }
    let run = high[start..].iter().take_while(|h| **h).count();
    let end = start + run;
    let errors =
        high[..start].iter().filter(|h| **h).count() + high[end..].iter().filter(|h| **h).count();
    let block = run as u64 * step;
    let mut level = grade(&levels, errors, v.len(), 5.0);
    let mut statement = format!(
        "direct reads of the allocated block took {} (per-offset minimum), of holes {} ({:.0}x, Ashman's D {:.1}); {errors} of {} offsets outside the block were slow",
        fsprof_core::units::format_ns(levels.high_ns),
        fsprof_core::units::format_ns(levels.low_ns),
        levels.ratio(),
        levels.separation,
        v.len() - run
    );
    if end == v.len() {
        level = Level::Low;
        statement.push_str(&format!(
            "; the slow run reaches the end of the reads, so the block is at least {}",
            bytes(block)
        ));
    }
    Inference {
        block: Some(block),
        levels: Some(levels),
        confidence: Confidence { level, statement },
        step,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn synthetic(block: u64, step: u64, noisy_hole: Option<u64>) -> Series {
        let offsets: Vec<u64> = (0..2 * SPAN / step)
            .map(|i| ISLAND - SPAN + i * step)
            .collect();
        let mut s = Series::new(offsets.clone());
        for it in 0..3 {
            s.push_run(
                offsets
                    .iter()
                    .map(|&o| {
                        if (ISLAND..ISLAND + block).contains(&o) {
                            60_000 + it * 5000
                        } else if Some(o) == noisy_hole && it == 0 {
                            90_000
                        } else {
                            450 + (o / step % 17)
                        }
                    })
                    .collect(),
            );
        }
        s
    }

    #[test]
    fn the_slow_run_at_the_byte_is_the_block() {
        for b in [1024, 2048, 4096, 16384] {
            let inf = infer(&synthetic(b, 512, Some(ISLAND + 3 * SPAN / 4)), 512);
            assert_eq!(inf.block, Some(b), "{inf:?}");
            assert_eq!(inf.confidence.level, Level::High, "{inf:?}");
        }
    }

    #[test]
    fn a_coarse_step_rounds_up_to_it() {
        let inf = infer(&synthetic(4096, 4096, None), 4096);
        assert_eq!(inf.block, Some(4096));
    }

    #[test]
    fn no_slow_block_is_inconclusive() {
        let inf = infer(&synthetic(0, 512, None), 512);
        assert_eq!(inf.block, None);
        assert!(
            inf.confidence.statement.contains("not clearly slower"),
            "{inf:?}"
        );
    }
}
