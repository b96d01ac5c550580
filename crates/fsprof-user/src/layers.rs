//! The user layers, built once from the processes' flat counters
//! (reader.rs): the run's, summed by counter index, and each process's.
//!
//! Summed op by op through [`Layer::op_mut`] and [`OpStats::merge`], every
//! op of every process was looked up by name, and each value cell inserted
//! into the run's sorted cells one at a time (shifting the cells after
//! it). Here each counter's sums are dense (buckets by slot, cells
//! gathered), and the profile's types are made once a counter.

use fsprof_core::buckets::MIN_INDEX;
use fsprof_core::profile::{layer, Layer, Process};
use fsprof_core::{Correlations, Histogram, JointHistogram, OpStats};

use crate::reader::{Cell, Counted, ProcessCounters};

/// One counter's calls over processes.
#[derive(Default)]
struct Sum {
    name: &'static str,
    file: bool,
    pre: u64,
    post: u64,
    errors: u64,
    total_ns: u64,
    min_ns: Option<u64>,
    max_ns: Option<u64>,
    zero: u64,
    /// Bucket slot `j` holds bucket index `j + MIN_INDEX`.
    slots: Vec<u64>,
    /// Whether any process had value cells.
    correlated: bool,
    size: Vec<Cell>,
    seek: Vec<Cell>,
}

impl Sum {
    /// Adds `c`, a counter of `p` (as [`OpStats::merge`] adds an op).
    fn add(&mut self, p: &ProcessCounters, c: &Counted) {
        self.name = c.name();
        self.file = c.is_file();
        self.pre = self.pre.saturating_add(c.pre);
        self.post = self.post.saturating_add(c.post);
        self.errors = self.errors.saturating_add(c.errors);
        self.total_ns = self.total_ns.saturating_add(c.total_ns);
        if let Some((min, max)) = c.extremes() {
            self.min_ns = Some(self.min_ns.map_or(min, |m| m.min(min)));
            self.max_ns = Some(self.max_ns.map_or(max, |m| m.max(max)));
        }
        self.zero = self.zero.saturating_add(c.zero);
        let counts = c.buckets(p);
        if !counts.is_empty() {
            // The reader's offsets are the shim's slots: at least MIN_INDEX.
            let first = (c.offset() - MIN_INDEX).max(0) as usize;
            let end = first + counts.len();
            if self.slots.len() < end {
                self.slots.resize(end, 0);
            }
            for (s, &n) in self.slots[first..end].iter_mut().zip(counts) {
                *s = s.saturating_add(n);
            }
        }
        let [size, seek] = c.cells(p);
        self.correlated |= !size.is_empty() || !seek.is_empty();
        self.size.extend_from_slice(size);
        self.seek.extend_from_slice(seek);
    }

    fn into_op(self) -> OpStats {
        OpStats {
            name: self.name.to_string(),
            pre: self.pre,
            post: self.post,
            errors: self.errors,
            total_ns: self.total_ns,
            min_ns: self.min_ns,
            max_ns: self.max_ns,
            histogram: Histogram::from_slots(self.zero, &self.slots),
            correlations: self.correlated.then(|| Correlations {
                size: joint(self.size),
                seek: joint(self.seek),
            }),
        }
    }
}

/// The joint histogram of `cells` in any order: sorted, each cell's calls
/// summed (saturating), cells of no calls left out; what adding them one
/// by one ([`JointHistogram::add`]) gives, in one sort.
fn joint(mut cells: Vec<Cell>) -> JointHistogram {
    cells.sort_unstable_by_key(|c| (c.0, c.1));
    cells.dedup_by(|later, kept| {
        let same = (later.0, later.1) == (kept.0, kept.1);
        if same {
            kept.2 = kept.2.saturating_add(later.2);
        }
        same
    });
    cells.retain(|c| c.2 != 0);
    JointHistogram { cells }
}

/// The user layer (file-system ops) and, when there were any, the calls on
/// non-files in a layer of their own.
pub fn merged<'a>(procs: impl IntoIterator<Item = &'a ProcessCounters>) -> Vec<Layer> {
    let mut sums: Vec<Option<Sum>> = Vec::new();
    for p in procs {
        for c in &p.counted {
            let k = c.counter as usize;
            if sums.len() <= k {
                sums.resize_with(k + 1, || None);
            }
            sums[k].get_or_insert_with(Sum::default).add(p, c);
        }
    }
    let mut user = Layer::new(layer::USER);
    let mut nonfile = Layer::new(layer::USER_NONFILE);
    for s in sums.into_iter().flatten() {
        match s.file {
            true => user.ops.push(s.into_op()),
            false => nonfile.ops.push(s.into_op()),
        }
    }
    layers_of(user, nonfile)
}

fn layers_of(mut user: Layer, mut nonfile: Layer) -> Vec<Layer> {
    user.normalize();
    nonfile.normalize();
    let mut out = vec![user];
    if !nonfile.ops.is_empty() {
        out.push(nonfile);
    }
    out
}

/// Process `p`'s own layers, its start relative to the capture's
/// (`start_mono`, CLOCK_MONOTONIC ns; `mono_ns` converts the run's clock).
pub fn process(p: &ProcessCounters, start_mono: u64, mono_ns: impl Fn(u64) -> u64) -> Process {
    let (ops, nonfile_ops) = p.ops();
    let mut user = Layer::new(layer::USER);
    user.ops = ops;
    let mut nonfile = Layer::new(layer::USER_NONFILE);
    nonfile.ops = nonfile_ops;
    Process {
        pid: p.pid,
        ppid: p.ppid,
        exe: p.exe(),
        argv: p.argv(),
        start_ns: mono_ns(p.start_ticks).saturating_sub(start_mono),
        layers: layers_of(user, nonfile),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Gathered cells come out as adding them one at a time makes them.
    #[test]
    fn gathered_cells_sum_as_added_one_by_one() {
        let cells = vec![
            (3, 4, 1),
            (1, 2, 5),
            (3, 4, u64::MAX),
            (-2, 7, 0),
            (1, -2, 2),
            (1, 2, 1),
        ];
        let mut one_by_one = JointHistogram::default();
        for &(l, v, n) in &cells {
            one_by_one.add(l, v, n);
        }
        assert_eq!(joint(cells), one_by_one);
        assert_eq!(one_by_one.cells, [(1, -2, 2), (1, 2, 6), (3, 4, u64::MAX)]);
    }
}
