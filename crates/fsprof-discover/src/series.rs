//! Latency samples per file offset across iterations, and their summaries
//! per offset: the minimum (fsdisco's `-W min`: what the operation costs
//! when nothing else on the machine gets in the way) or the median (`-W
//! med`: robust to one slow iteration, for effects the minimum would hide).

use serde::{Deserialize, Serialize};

/// How the iterations of one offset are summarised.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Summary {
    Min,
    Median,
}

impl Summary {
    pub fn name(self) -> &'static str {
        match self {
            Summary::Min => "min",
            Summary::Median => "median",
        }
    }
}

/// A cell an iteration did not measure.
pub const MISSING: u64 = u64::MAX;

/// Latencies (ns) of one operation at each offset, one row per iteration
/// ([`MISSING`] where an iteration skipped the offset).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    pub offsets: Vec<u64>,
    pub runs: Vec<Vec<u64>>,
}

impl Series {
    pub fn new(offsets: Vec<u64>) -> Series {
        Series {
            offsets,
            runs: Vec::new(),
        }
    }

    /// Adds one iteration; its latencies are in the order of `offsets`.
    pub fn push_run(&mut self, run: Vec<u64>) {
        debug_assert_eq!(run.len(), self.offsets.len());
        self.runs.push(run);
    }

    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// The samples of offset `i` across iterations.
    pub fn column(&self, i: usize) -> Vec<u64> {
        self.runs.iter().map(|r| r[i]).collect()
    }

    /// Per offset, the summary of the iterations that measured it.
    pub fn summary(&self, s: Summary) -> Vec<f64> {
        (0..self.len())
            .map(|i| {
                let c: Vec<u64> = self
                    .column(i)
                    .into_iter()
                    .filter(|&v| v != MISSING)
                    .collect();
                match s {
                    Summary::Min => c.iter().copied().min().unwrap_or(0) as f64,
                    Summary::Median => median_u64(&c),
                }
            })
            .collect()
    }

    /// Drops the offsets no iteration measured.
    pub fn compact(&mut self) {
        let keep: Vec<bool> = (0..self.len())
            .map(|i| self.runs.iter().any(|r| r[i] != MISSING))
            .collect();
        let pick = |v: &[u64]| -> Vec<u64> {
            v.iter()
                .zip(&keep)
                .filter(|(_, k)| **k)
                .map(|(x, _)| *x)
                .collect()
        };
        self.offsets = pick(&self.offsets);
        self.runs = self.runs.iter().map(|r| pick(r)).collect();
    }

    /// Every sample, for histograms.
    pub fn all_samples(&self) -> impl Iterator<Item = u64> + '_ {
        self.runs
            .iter()
            .flatten()
            .copied()
            .filter(|&v| v != MISSING)
    }
}

/// The median of integer samples (the mean of the middle two for an even
/// count); 0 for none.
pub fn median_u64(v: &[u64]) -> f64 {
    let xs: Vec<f64> = v.iter().map(|&x| x as f64).collect();
    median(&xs)
}

/// fsprof_core::stats's quantile, 0 for an empty sample.
pub fn quantile(v: &[f64], q: f64) -> f64 {
    fsprof_core::stats::quantile(v, q).unwrap_or(0.0)
}

/// fsprof_core::stats's median, 0 for an empty sample.
pub fn median(v: &[f64]) -> f64 {
    fsprof_core::stats::median(v).unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_are_per_offset_across_iterations() {
        let mut s = Series::new(vec![0, 512, 1024]);
        s.push_run(vec![10, 50, 7]);
        s.push_run(vec![12, 5, 9]);
        s.push_run(vec![900, 6, 8]);
        assert_eq!(s.summary(Summary::Min), vec![10.0, 5.0, 7.0]);
        assert_eq!(s.summary(Summary::Median), vec![12.0, 6.0, 8.0]);
        assert_eq!(s.all_samples().count(), 9);
    }

    #[test]
    fn missing_cells_are_skipped_and_compacted_away() {
        let mut s = Series::new(vec![0, 1, 2]);
        s.push_run(vec![5, MISSING, MISSING]);
        s.push_run(vec![7, 3, MISSING]);
        assert_eq!(s.summary(Summary::Min), vec![5.0, 3.0, 0.0]);
        assert_eq!(s.summary(Summary::Median), vec![6.0, 3.0, 0.0]);
        s.compact();
        assert_eq!(s.offsets, vec![0, 1]);
        assert_eq!(s.all_samples().count(), 3);
    }

    #[test]
    fn quantiles_interpolate() {
        let v = [4.0, 1.0, 3.0, 2.0];
        assert_eq!(quantile(&v, 0.0), 1.0);
        assert_eq!(quantile(&v, 1.0), 4.0);
        assert_eq!(median(&v), 2.5);
        assert_eq!(median_u64(&[5, 1, 3]), 3.0);
    }
}
