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
use crate::finding::{Curve, Finding, Mark, Parameter};
use crate::methods::write_period::write_whole;
use crate::methods::{bytes, create_new};
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

/// Writes [`BLOCKS`] blocks of `block` bytes to a fresh file, timing each.
/// Also returns [`first_extra`] of the first iteration.
pub fn measure(
    path: &Path,
    block: u64,
    iterations: u32,
    ctx: &mut Ctx,
) -> Result<(Series, Option<u64>), DiscoverError> {
    let io = |w: &str| DiscoverError::io(format!("{w} {}", path.display()));
    let mut series = Series::new((0..BLOCKS).collect());
    let buf = vec![b'd'; block as usize];
    let extra = allocation(path, &buf)?;
    for _ in 0..iterations {
        ctx.check()?;
        let _ = std::fs::remove_file(path);
        let mut f = create_new(path).map_err(io("create"))?;
        let run =
            timing::run(BLOCKS as usize, |_| write_whole(&mut f, &buf)).map_err(io("write"))?;
        drop(f);
        std::fs::remove_file(path).map_err(io("remove"))?;
        series.push_run(run);
        ctx.progress.advance(1);
    }
    Ok((series, extra))
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
    f.iterations = iterations;
    let path = scratch.file("direct-blocks");
    let probe =
        create_new(&path).map_err(DiscoverError::io(format!("create {}", path.display())))?;
    let why = not_applicable(t, &probe);
    drop(probe);
    let _ = std::fs::remove_file(&path);
    if let Some(why) = why {
        return Ok(f.not_applicable(why));
    }
    let block = match found_block {
        Some(b) => b,
        None => {
            f.notes.push(format!(
                "block size {} taken from statfs (block-size was not discovered in this run)",
                bytes(t.statfs_block)
            ));
            t.statfs_block
        }
    };
    ctx.progress.phase(
        "direct blocks: timing whole-block writes",
        u64::from(iterations),
    );
    let (series, extra) = measure(&path, block, iterations, ctx)?;
    let inf = infer(&series, block, t.page_size);
    if let Some(k) = extra {
        f.kernel.push(Exposed {
            value: k,
            source: format!(
                "stat st_blocks: writing block {k} allocated a second block (the indirect block)"
            ),
        });
    }
    let mut c = Curve::from_series("Write latency per block", "block", false, &series);
    if let Some(n) = inf.count {
        c.marks.push(Mark {
            at: n as f64,
            label: format!("block {n}: first indirect"),
        });
    }
    f.curves.push(c);
    f.samples.push(("direct-blocks.write".into(), series));
    f.notes.push(format!(
        "{} blocks of {} per iteration",
        BLOCKS,
        bytes(block)
    ));
    Ok(f.concluded(inf.count, inf.confidence, start))
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

    #[test]
    fn the_first_block_that_allocates_two_is_found() {
        // 1 KiB blocks: 2 sectors per block, 4 when an indirect block comes too.
        let mut a: Vec<u64> = (0..=12).map(|k| 2 * k).collect();
        a.extend((13..=20).map(|k| 2 * k + 2));
        assert_eq!(first_extra(&a, 1024), Some(12));
        assert_eq!(first_extra(&a[..12], 1024), None);
    }
}
