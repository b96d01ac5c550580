//! Direct block pointers of a block-mapped inode (fsdisco §3.3.4, Fig 6):
//! writing whole blocks to a fresh file, the first block past the direct
//! pointers also allocates and initialises an indirect block, so its write
//! costs about twice as much; its index is the number of direct pointers.
//!
//! Only file systems that map a file through pointers in the inode
//! (ext2, ext3, ext4 without extents) have direct pointers; extent-based
//! ones are refused. Whether a file is block-mapped is asked of the file
//! itself (its inode's `EXTENT_FL`), not guessed from the type name.
//!
//! The kernel's view next to the inference is its block accounting: a
//! file's `st_blocks` counts the indirect block too, so the write that
//! raises it by two blocks is the one that allocated the indirect block.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::classify::{Confidence, Level};
use crate::exposed::Exposed;
use crate::finding::{Candidate, CrossCheck, Curve, Finding, Mark, Parameter};
use crate::methods::write_period::write_whole;
use crate::methods::{bytes, create_new, sparse_write};
use crate::series::{median, Series, Summary};
use crate::target::{magic, Scratch, Target};
use crate::timing;
use crate::{Ctx, DiscoverError};

/// Blocks written per iteration: past ext2's 12 with room on both sides.
pub const BLOCKS: u64 = 48;

pub const METHOD: &str = "whole-block sequential writes to a fresh file; the block whose write costs about twice its peers' (fsdisco §3.3.4)";

/// The inode flag of an extent-mapped ext4 file.
const FS_EXTENT_FL: libc::c_long = 0x0008_0000;

/// Why the method does not apply to files on `t` (checked on `f`, a file
/// there), or `None` when it does.
pub fn not_applicable(t: &Target, f: &File) -> Option<String> {
    match t.magic {
        magic::EXT => {
            let mut flags: libc::c_long = 0;
            // SAFETY: FS_IOC_GETFLAGS writes one long into `flags`.
            let r = unsafe { libc::ioctl(f.as_raw_fd(), libc::FS_IOC_GETFLAGS, &mut flags) };
            if r != 0 {
                return Some(format!(
                    "cannot read the inode flags: {}",
                    std::io::Error::last_os_error()
                ));
            }
            (flags & FS_EXTENT_FL != 0).then(|| {
                format!(
                    "extents ({} maps this file with an extent tree, not block pointers)",
                    t.fs_type
                )
            })
        }
        magic::XFS | magic::BTRFS => {
            Some(format!("extents ({} maps files with extents)", t.fs_type))
        }
        magic::TMPFS | magic::RAMFS => Some(format!(
            "{} keeps files in memory, without block pointers",
            t.fs_type
        )),
        _ => Some(format!(
            "{} is not a block-mapped (ext2/ext3-style) file system",
            t.fs_type
        )),
    }
}

/// The sequential writes of several iterations, and how the estimate moved
/// as they came in.
pub struct Sequential {
    pub series: Series,
    /// [`first_extra`] of an untimed pass: the kernel's own answer.
    pub extra: Option<u64>,
    /// The estimate after each batch of iterations (all iterations so far).
    pub estimates: Vec<Option<u64>>,
    /// The last two estimates are the same block.
    pub stable: bool,
}

/// Writes [`BLOCKS`] blocks of `block` bytes to a fresh file, timing each,
/// in batches of a third of `iterations`: at least `iterations` of them,
/// and on (up to three times as many) until the estimate from all
/// iterations so far is the same after two batches in a row. An estimate
/// that keeps moving is what contention does to a single dear block; the
/// finding then says it was not stable.
pub fn measure(
    path: &Path,
    (block, page): (u64, u64),
    iterations: u32,
    ctx: &mut Ctx,
) -> Result<Sequential, DiscoverError> {
    let buf = vec![b'd'; block as usize];
    let extra = allocation(path, &buf)?;
    let mut series = Series::new((0..BLOCKS).collect());
    let batch = iterations.div_ceil(3).max(1);
    let most = iterations.saturating_mul(3);
    let (mut done, mut estimates) = (0, Vec::new());
    let stable = |e: &[Option<u64>]| matches!(e, [.., Some(a), Some(b)] if a == b);
    while done < most {
        let n = batch.min(most - done);
        write_runs(path, &buf, n, &mut series, ctx)?;
        done += n;
        estimates.push(infer(&series, block, page).count);
        if done >= iterations && stable(&estimates) {
            break;
        }
    }
    Ok(Sequential {
        series,
        extra,
        stable: stable(&estimates),
        estimates,
    })
}

/// `n` iterations of the timed sequential writes, added to `series`.
fn write_runs(
    path: &Path,
    buf: &[u8],
    n: u32,
    series: &mut Series,
    ctx: &mut Ctx,
) -> Result<(), DiscoverError> {
    let io = |w: &str| DiscoverError::io(format!("{w} {}", path.display()));
    for _ in 0..n {
        ctx.check()?;
        let _ = std::fs::remove_file(path);
        let mut f = create_new(path).map_err(io("create"))?;
        let run =
            timing::run(BLOCKS as usize, |_| write_whole(&mut f, buf)).map_err(io("write"))?;
        drop(f);
        std::fs::remove_file(path).map_err(io("remove"))?;
        series.push_run(run);
        ctx.progress.advance(1);
    }
    Ok(())
}

/// The same writes, untimed, with the file's `st_blocks` after each:
/// [`first_extra`] of them.
fn allocation(path: &Path, buf: &[u8]) -> Result<Option<u64>, DiscoverError> {
    let io = |w: &str| DiscoverError::io(format!("{w} {}", path.display()));
    let _ = std::fs::remove_file(path);
    let mut f = create_new(path).map_err(io("create"))?;
    let mut allocated = vec![0u64];
    for _ in 0..BLOCKS {
        write_whole(&mut f, buf).map_err(io("write"))?;
        allocated.push(f.metadata().map_err(io("stat"))?.blocks());
    }
    drop(f);
    std::fs::remove_file(path).map_err(io("remove"))?;
    Ok(first_extra(&allocated, buf.len() as u64))
}

/// The first block whose write raised the file's allocated size
/// (`st_blocks`, which counts metadata blocks too) by more than the block
/// itself: where the kernel allocated an indirect block.
fn first_extra(allocated: &[u64], block: u64) -> Option<u64> {
    let per = block / 512;
    allocated
        .windows(2)
        .position(|w| w[1] - w[0] > per)
        .map(|k| k as u64)
}

#[derive(Clone, Debug, PartialEq)]
pub struct Inference {
    pub count: Option<u64>,
    /// The next dearest block: a count that is not clear of it (not high)
    /// could as well be this one.
    pub runner_up: Option<u64>,
    /// Per block: its median latency over its page-phase peers'.
    pub ratios: Vec<f64>,
    pub confidence: Confidence,
}

/// The block that stands out most against blocks at the same position in
/// a page (page-cache allocation makes page starts dearer too), by the
/// minimum across iterations. fsdisco took the median; but the indirect
/// block is allocated in every iteration, so its cost is in the minimum,
/// while other writes that are dear only in some iterations (on ext2 with
/// 4 KiB blocks, block 30 in over half of them) reach the median and not
/// the minimum.
pub fn infer(s: &Series, block: u64, page: u64) -> Inference {
    let med = s.summary(Summary::Min);
    let phases = (page / block).max(1) as usize;
    let ratios: Vec<f64> = (0..med.len())
        .map(|k| {
            if k == 0 {
                return 1.0;
            }
            let peers: Vec<f64> = (1..med.len())
                .filter(|&j| j != k && j % phases == k % phases)
                .map(|j| med[j])
                .collect();
            med[k] / median(&peers).max(1.0)
        })
        .collect();
    let mut order: Vec<usize> = (1..ratios.len()).collect();
    order.sort_by(|a, b| ratios[*b].total_cmp(&ratios[*a]));
    let (Some(&best), Some(&second)) = (order.first(), order.get(1)) else {
        return Inference {
            count: None,
            runner_up: None,
            ratios,
            confidence: Confidence {
                level: Level::Low,
                statement: "too few blocks".into(),
            },
        };
    };
    let (r, r2) = (ratios[best], ratios[second]);
    let statement = format!(
        "the write of block {best} took {r:.2}x the median of its peers ({}, minimum across iterations); the next dearest, block {second}, {r2:.2}x",
        fsprof_core::units::format_ns(med[best])
    );
    if r < 1.3 {
        return Inference {
            count: None,
            runner_up: None,
            ratios,
            confidence: Confidence {
                level: Level::Low,
                statement: format!("no block write stood out: {statement}"),
            },
        };
    }
    let level = if r >= 1.4 && r - 1.0 >= 1.5 * (r2 - 1.0) {
        Level::High
    } else if r - 1.0 >= 1.2 * (r2 - 1.0) {
        Level::Medium
    } else {
        Level::Low
    };
    Inference {
        count: Some(best as u64),
        runner_up: Some(second as u64),
        ratios,
        confidence: Confidence { level, statement },
    }
}

pub fn discover(
    t: &Target,
    scratch: &Scratch,
    found_block: Option<u64>,
    iterations: u32,
    ctx: &mut Ctx,
) -> Result<Finding, DiscoverError> {
    let start = fsprof_sys::clock::mono_ns();
    let mut f = Finding::new(Parameter::DirectBlocks, METHOD, Summary::Min);
    let path = scratch.file("direct-blocks");
    let probe =
        create_new(&path).map_err(DiscoverError::io(format!("create {}", path.display())))?;
    let why = not_applicable(t, &probe);
    drop(probe);
    let _ = std::fs::remove_file(&path);
    if let Some(why) = why {
        return Ok(f.not_applicable(why));
    }
    let block = found_block.unwrap_or_else(|| {
        f.notes.push(format!(
            "block size {} taken from statfs (block-size was not discovered in this run)",
            bytes(t.statfs_block)
        ));
        t.statfs_block
    });
    ctx.progress.phase(
        "direct blocks: timing whole-block writes",
        u64::from(iterations),
    );
    let seq = measure(&path, (block, t.page_size), iterations, ctx)?;
    let lone_iterations = iterations.min(LONE_ITERATIONS);
    ctx.progress.phase(
        "direct blocks: timing lone block writes",
        u64::from(lone_iterations),
    );
    let lone = sparse_write::measure(&path, block, BLOCKS, lone_iterations, ctx)?;
    let a = infer(&seq.series, block, t.page_size);
    let b = sparse_write::infer(&lone);
    f.iterations = seq.series.runs.len() as u32;
    if let Some(k) = seq.extra {
        f.kernel.push(Exposed {
            value: k,
            source: format!(
                "stat st_blocks: writing block {k} allocated a second block (the indirect block)"
            ),
        });
    }
    f.curves = curves(&seq.series, &lone, a.count, b.count);
    f.notes.push(format!(
        "{} blocks of {} per iteration; lone writes: {lone_iterations} iterations",
        BLOCKS,
        bytes(block)
    ));
    f.samples
        .push(("direct-blocks.write".into(), seq.series.clone()));
    f.samples.push(("direct-blocks.lone-write".into(), lone));
    let f = decide(f, (&a, &seq), &b);
    Ok(Finding {
        run_time_ns: fsprof_sys::clock::mono_ns() - start,
        ..f
    })
}

/// Iterations of the lone writes (each writes 48 fresh files).
pub const LONE_ITERATIONS: u32 = 10;

/// Both methods' latencies per block, each with its answer marked.
fn curves(seq: &Series, lone: &Series, a: Option<u64>, b: Option<u64>) -> Vec<Curve> {
    let mut c = Curve::from_series("Write latency per block", "block", false, seq);
    if let Some(n) = a {
        c.marks.push(Mark {
            at: n as f64,
            label: format!("block {n}: first indirect"),
        });
    }
    let mut l = Curve::from_series(
        "Latency of one block written alone into an empty file, per block index",
        "block",
        false,
        lone,
    );
    if let Some(n) = b {
        l.marks.push(Mark {
            at: n as f64,
            label: format!("from block {n}: an indirect block too"),
        });
    }
    vec![c, l]
}

/// The two methods together. They agree: as sure as the surer (a
/// sequential estimate that kept moving counts as low). They disagree:
/// the lone writes' block if it is the sequential writes' near-tied runner
/// up (at most medium), else undetermined with both blocks as candidates.
/// One alone: the lone writes stand on their own; the sequential writes,
/// unconfirmed, are at most medium.
fn decide(
    mut f: Finding,
    (a, seq): (&Inference, &Sequential),
    b: &sparse_write::Inference,
) -> Finding {
    let shown: Vec<String> = seq
        .estimates
        .iter()
        .map(|e| e.map_or("-".into(), |v| v.to_string()))
        .collect();
    let history = format!(
        "the sequential estimate after each batch of iterations: {}",
        shown.join(", ")
    );
    let a_level = if seq.stable {
        a.confidence.level
    } else {
        Level::Low
    };
    if !seq.stable {
        f.notes.push(format!("{history}: not stable"));
    }
    f.cross_checks.push(CrossCheck {
        method: "one block written alone into an empty file at each index".into(),
        value: b.count,
        agrees: b.count.is_some() && b.count == a.count,
        statement: b.confidence.statement.clone(),
    });
    let statement = a.confidence.statement.clone();
    match (a.count, b.count) {
        (Some(x), Some(y)) if x == y => {
            let level = a_level.max(b.confidence.level);
            f.found(x, Confidence { level, statement })
        }
        // The sequential writes could not tell their count from the next
        // dearest block (not high), and that block is the lone writes':
        // the lone writes settle the tie, as disputed.
        (Some(x), Some(y)) if a_level < Level::High && a.runner_up == Some(y) => {
            f.notes.push(format!(
                "the sequential writes found block {x} barely dearer than block {y} ({statement}); the lone writes put the step at {y}, so {y} is reported"
            ));
            let level = b.confidence.level.min(Level::Medium);
            let statement = b.confidence.statement.clone();
            f.found(y, Confidence { level, statement })
        }
        (Some(x), Some(y)) => f.undetermined(
            "the sequential writes and the lone writes point at different blocks",
            vec![
                Candidate {
                    value: x,
                    evidence: format!("sequential writes: {statement}; {history}"),
                },
                Candidate {
                    value: y,
                    evidence: format!("lone writes: {}", b.confidence.statement),
                },
            ],
        ),
        (Some(x), None) => {
            let level = a_level.min(Level::Medium);
            f.found(x, Confidence { level, statement })
        }
        (None, Some(y)) => {
            f.method = format!(
                "{} (the sequential writes showed no dear block)",
                sparse_write::METHOD
            );
            f.found(y, b.confidence.clone())
        }
        (None, None) => f.inconclusive(format!(
            "no block write stood out: {statement}; {}",
            b.confidence.statement
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn synthetic(direct: usize, block: u64, page: u64) -> Series {
        let mut s = Series::new((0..BLOCKS).collect());
        let phases = (page / block) as usize;
        for it in 0..5u64 {
            s.push_run(
                (0..BLOCKS as usize)
                    .map(|k| {
                        let mut v = 2000 + (k as u64 * 31 + it * 17) % 200;
                        if k % phases == 0 {
                            v += 1500;
                        }
                        if k == direct {
                            v += 3000;
                        }
                        v
                    })
                    .collect(),
            );
        }
        s
    }

    #[test]
    fn the_dear_block_is_the_count_even_on_a_page_start() {
        for block in [1024, 2048, 4096] {
            let inf = infer(&synthetic(12, block, 4096), block, 4096);
            assert_eq!(inf.count, Some(12), "{block}: {inf:?}");
            assert_eq!(inf.confidence.level, Level::High);
        }
    }

    #[test]
    fn a_block_dear_in_most_iterations_but_not_all_does_not_win() {
        let mut s = synthetic(12, 4096, 4096);
        for (it, run) in s.runs.iter_mut().enumerate() {
            if it != 2 {
                run[30] += 4000;
            }
        }
        assert_eq!(infer(&s, 4096, 4096).count, Some(12));
    }

    #[test]
    fn no_dear_block_is_inconclusive() {
        let inf = infer(&synthetic(usize::MAX, 4096, 4096), 4096, 4096);
        assert_eq!(inf.count, None);
    }

    fn seq(count: Option<u64>, level: Level, estimates: &[Option<u64>]) -> (Inference, Sequential) {
        let stable = matches!(estimates, [.., Some(a), Some(b)] if a == b);
        (
            Inference {
                count,
                runner_up: None,
                ratios: Vec::new(),
                confidence: Confidence {
                    level,
                    statement: "sequential".into(),
                },
            },
            Sequential {
                series: Series::default(),
                extra: None,
                estimates: estimates.to_vec(),
                stable,
            },
        )
    }

    fn lone(count: Option<u64>, level: Level) -> sparse_write::Inference {
        sparse_write::Inference {
            count,
            confidence: Confidence {
                level,
                statement: "lone".into(),
            },
        }
    }

    fn decided(a: (Inference, Sequential), b: sparse_write::Inference) -> Finding {
        let f = Finding::new(Parameter::DirectBlocks, METHOD, Summary::Min);
        decide(f, (&a.0, &a.1), &b)
    }

    fn level(f: &Finding) -> Option<Level> {
        f.confidence.as_ref().map(|c| c.level)
    }

    /// Agreement takes the surer method; a sequential estimate that moved
    /// between batches counts as low, however clear it looked at the end.
    #[test]
    fn agreement_takes_the_surer_method_and_a_moving_estimate_counts_low() {
        let stable = [Some(12), Some(12), Some(12)];
        let f = decided(
            seq(Some(12), Level::High, &stable),
            lone(Some(12), Level::Low),
        );
        assert_eq!((f.value, level(&f)), (Some(12), Some(Level::High)));
        assert!(f.cross_checks[0].agrees);
        let f = decided(
            seq(Some(12), Level::Low, &stable),
            lone(Some(12), Level::Medium),
        );
        assert_eq!(level(&f), Some(Level::Medium));
        let moved = [Some(30), Some(12), Some(30), Some(12)];
        let f = decided(
            seq(Some(12), Level::High, &moved),
            lone(Some(12), Level::Low),
        );
        assert_eq!((f.value, level(&f)), (Some(12), Some(Level::Low)));
        assert!(
            f.notes
                .iter()
                .any(|n| n.contains("30, 12, 30, 12: not stable")),
            "{:?}",
            f.notes
        );
    }

    /// The failure under contention: sequential writes at 30, lone writes
    /// at 12. Neither is given a confidence; both are candidates.
    #[test]
    fn a_disagreement_is_undetermined_with_both_blocks() {
        let f = decided(
            seq(Some(30), Level::Medium, &[Some(30), Some(30)]),
            lone(Some(12), Level::High),
        );
        assert_eq!(f.status, crate::Status::Undetermined);
        assert_eq!((f.value, level(&f)), (None, None));
        let c: Vec<u64> = f.candidates.iter().map(|c| c.value).collect();
        assert_eq!(c, [30, 12]);
        assert!(
            f.candidates[0].evidence.contains("after each batch"),
            "{:?}",
            f.candidates
        );
    }

    /// Under a background writer on ext2 4 KiB: block 30 as dear as block
    /// 12 in the sequential writes (1.65x against 1.62x: low), the lone
    /// writes' step at 12. Twelve, disputed: medium at most. Had the
    /// sequential writes been sure of 30, it would stay undetermined.
    #[test]
    fn a_near_tie_is_settled_by_the_lone_writes() {
        let (mut a, s) = seq(Some(30), Level::Low, &[Some(30), Some(30)]);
        a.runner_up = Some(12);
        let f = decided((a.clone(), s), lone(Some(12), Level::High));
        assert_eq!((f.value, level(&f)), (Some(12), Some(Level::Medium)));
        assert!(
            f.notes.iter().any(|n| n.contains("barely dearer")),
            "{:?}",
            f.notes
        );
        a.confidence.level = Level::High;
        let (_, s) = seq(Some(30), Level::High, &[Some(30), Some(30)]);
        let f = decided((a, s), lone(Some(12), Level::High));
        assert_eq!(f.status, crate::Status::Undetermined);
    }

    /// One method alone: the lone writes keep their level; the sequential
    /// writes, unconfirmed, are at most medium (low if they moved).
    #[test]
    fn one_method_alone() {
        let f = decided(
            seq(None, Level::Low, &[None, None]),
            lone(Some(12), Level::High),
        );
        assert_eq!((f.value, level(&f)), (Some(12), Some(Level::High)));
        assert!(f.method.contains("alone"), "{}", f.method);
        let stable = [Some(12), Some(12)];
        let f = decided(seq(Some(12), Level::High, &stable), lone(None, Level::Low));
        assert_eq!((f.value, level(&f)), (Some(12), Some(Level::Medium)));
        let f = decided(
            seq(Some(12), Level::High, &[Some(11), Some(12)]),
            lone(None, Level::Low),
        );
        assert_eq!(level(&f), Some(Level::Low));
        let f = decided(seq(None, Level::Low, &[None]), lone(None, Level::Low));
        assert_eq!(f.status, crate::Status::Inconclusive);
    }

    #[test]
    fn the_first_block_that_allocates_two_is_found() {
        // 1 KiB blocks: 2 sectors per block, 4 when an indirect block comes too.
        let mut a: Vec<u64> = (0..=12).map(|k| 2 * k).collect();
        a.extend((13..=20).map(|k| 2 * k + 2));
        assert_eq!(first_extra(&a, 1024), Some(12));
        assert_eq!(first_extra(&a[..12], 1024), None);
    }
}
