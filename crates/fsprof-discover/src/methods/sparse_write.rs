//! Direct block pointers from single-block writes into empty files, the
//! cross-check of fsdisco's sequential writes ([`super::direct_blocks`]):
//! for each block index k, a fresh empty file gets one whole block written
//! at k·B (`pwrite` into a hole) and only that write is timed. Below the
//! number of direct pointers the write allocates the data block alone; from
//! there on it also allocates and zeroes the indirect block that maps it.
//! So the latency is a *step* over k, not one dear block among cheap ones:
//! a step fit across all 48 indices (the cut the fewest indices contradict,
//! [`crate::classify::step_up`]) is not moved by the few writes another
//! process's I/O slowed down, which is what made a single dear block of the
//! sequential method point at the wrong index under contention.

use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::classify::{step_up, two_levels, Confidence, Level};
use crate::methods::create_new;
use crate::series::{Series, Summary};
use crate::timing;
use crate::{Ctx, DiscoverError};

pub const METHOD: &str =
    "one whole block written alone into an empty file at each index; the index from which the write costs more (it allocates the indirect block too)";

#[derive(Clone, Debug, PartialEq)]
pub struct Inference {
    /// The first index whose lone write also allocated an indirect block.
    pub count: Option<u64>,
    pub confidence: Confidence,
}

/// Times, `iterations` times, a lone write of one `block`-byte block at
/// each of `blocks` indices, each into a fresh empty file at `path`. The
/// indices go in a shuffled order each iteration, so that nothing else
/// that recurs (a writeback every few writes) lands on the same index.
pub fn measure(
    path: &Path,
    block: u64,
    blocks: u64,
    iterations: u32,
    ctx: &mut Ctx,
) -> Result<Series, DiscoverError> {
    let io = |w: &str| DiscoverError::io(format!("{w} {}", path.display()));
    let mut series = Series::new((0..blocks).collect());
    let buf = vec![b's'; block as usize];
    let mut rng = fastrand::Rng::with_seed(0xd12ec7);
    for _ in 0..iterations {
        ctx.check()?;
        let mut order: Vec<u64> = (0..blocks).collect();
        rng.shuffle(&mut order);
        let mut run = vec![0u64; blocks as usize];
        for &k in &order {
            let _ = std::fs::remove_file(path);
            let f = create_new(path).map_err(io("create"))?;
            let ns = timing::run(1, |_| f.write_all_at(&buf, k * block)).map_err(io("write"))?;
            drop(f);
            std::fs::remove_file(path).map_err(io("remove"))?;
            run[k as usize] = ns[0];
        }
        series.push_run(run);
        ctx.progress.advance(1);
    }
    Ok(series)
}

/// The step from cheap lone writes to dear ones, on the per-index minimum
/// across iterations.
pub fn infer(s: &Series) -> Inference {
    let v = s.summary(Summary::Min);
    let low = |statement: String| Inference {
        count: None,
        confidence: Confidence {
            level: Level::Low,
            statement,
        },
    };
    let Some(levels) = two_levels(&v) else {
        return low("too few writes".into());
    };
    let high: Vec<bool> = v.iter().map(|x| levels.is_high(*x)).collect();
    let step = step_up(&high);
    if levels.ratio() < 1.3 || step.at == 0 || step.at == v.len() {
        return low(format!(
            "lone block writes did not step from one cost to another ({} against {}, {:.2}x)",
            fsprof_core::units::format_ns(levels.low_ns),
            fsprof_core::units::format_ns(levels.high_ns),
            levels.ratio()
        ));
    }
    let count = s.offsets[step.at];
    let statement = format!(
        "a lone block write took {} below block {count} and {} from it on ({:.2}x, Ashman's D {:.1}); {} of {} indices disagree with the step",
        fsprof_core::units::format_ns(levels.low_ns),
        fsprof_core::units::format_ns(levels.high_ns),
        levels.ratio(),
        levels.separation,
        step.errors,
        v.len()
    );
    // The indirect block roughly doubles a lone write: 1.5x apart, Ashman's
    // D over 3 and one index in 20 against the step is clear; 1.3x, D over
    // 2 and one in 10 is fair.
    let (r, d, bad) = (levels.ratio(), levels.separation, step.errors);
    let level = if r >= 1.5 && d >= 3.0 && bad * 20 <= v.len() {
        Level::High
    } else if d >= 2.0 && bad * 10 <= v.len() {
        Level::Medium
    } else {
        Level::Low
    };
    Inference {
        count: Some(count),
        confidence: Confidence { level, statement },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn synthetic(direct: u64, noisy: &[u64]) -> Series {
        let mut s = Series::new((0..48).collect());
        for it in 0..5u64 {
            s.push_run(
                (0..48u64)
                    .map(|k| {
                        let mut v = 9000 + (k * 37 + it * 11) % 500;
                        if k >= direct {
                            v += 7000;
                        }
                        if noisy.contains(&k) {
                            v += 30_000;
                        }
                        v
                    })
                    .collect(),
            );
        }
        s
    }

    #[test]
    fn the_step_is_the_count() {
        let inf = infer(&synthetic(12, &[]));
        assert_eq!(inf.count, Some(12), "{inf:?}");
        assert_eq!(inf.confidence.level, Level::High, "{inf:?}");
    }

    /// Indices slowed down in every iteration (another process's writeback
    /// always at the same moment) do not move the step: the sequential
    /// method's failure under contention.
    #[test]
    fn a_few_dear_indices_do_not_move_the_step() {
        let inf = infer(&synthetic(12, &[3, 30]));
        assert_eq!(inf.count, Some(12), "{inf:?}");
        // Index 3 is against the step; index 30 is dear anyway.
        assert!(inf.confidence.statement.contains("1 of 48"), "{inf:?}");
    }

    /// Each grade from its own evidence: a weaker step is medium, a step
    /// many indices contradict is low.
    #[test]
    fn grades_follow_the_contrast_and_the_contradictions() {
        let mut s = synthetic(12, &[]);
        for run in &mut s.runs {
            for v in run.iter_mut().skip(12) {
                *v -= 2500;
            }
        }
        assert_eq!(infer(&s).confidence.level, Level::Medium, "{:?}", infer(&s));
        // Five cheap indices as dear as the step's: contradicted too often.
        let mut s = synthetic(12, &[]);
        for run in &mut s.runs {
            for v in &mut run[1..6] {
                *v += 7000;
            }
        }
        let inf = infer(&s);
        assert_eq!(
            (inf.count, inf.confidence.level),
            (Some(12), Level::Low),
            "{inf:?}"
        );
    }

    #[test]
    fn no_step_is_no_count() {
        assert_eq!(infer(&synthetic(48, &[])).count, None);
        assert_eq!(infer(&synthetic(0, &[])).count, None);
    }
}
