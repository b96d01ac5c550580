//! Merging profiles of several processes, runs or hosts by adding buckets.

use crate::buckets::Resolution;
use crate::profile::{merge_layers, Interval, Layer, Meta, Profile, Source};

/// Merges `profiles` into one. Histograms of finer resolution are expressed
/// at the coarsest resolution present (exact: boundaries nest). Intervals are
/// kept, aligned by slice number, only when every input has the same
/// interval length; otherwise the merged profile has none and `warnings`
/// says why.
pub fn merge_profiles(profiles: &[Profile], meta_base: Meta) -> (Profile, Vec<String>) {
    let mut warnings = Vec::new();
    let res = profiles
        .iter()
        .map(Profile::resolution)
        .min()
        .unwrap_or_default();
    if profiles.iter().any(|p| p.resolution() != res) {
        warnings.push(format!(
            "inputs have different resolutions; merged at the coarsest, {res} bucket(s) per power of two"
        ));
    }
    let mut out = Profile::new(merged_meta(profiles, meta_base, res));
    for p in profiles {
        add_layers(&mut out.layers, &p.layers, p.resolution(), res);
        out.processes
            .extend(p.processes.iter().cloned().map(|mut pr| {
                for l in &mut pr.layers {
                    downscale_layer(l, p.resolution(), res);
                }
                pr
            }));
    }
    if let Err(w) = merge_intervals(&mut out, profiles, res) {
        warnings.push(w.into());
    }
    (out, warnings)
}

/// The merged profile's facts: the longest duration, the earliest start,
/// every input (or the inputs it was merged from) as a source, and each
/// distinct note once.
fn merged_meta(profiles: &[Profile], meta_base: Meta, res: Resolution) -> Meta {
    let mut meta = meta_base;
    meta.resolution = res;
    meta.duration_ns = profiles
        .iter()
        .map(|p| p.meta.duration_ns)
        .max()
        .unwrap_or(0);
    meta.run.start_unix_ns = profiles
        .iter()
        .map(|p| p.meta.run.start_unix_ns)
        .min()
        .unwrap_or(0);
    meta.merged_from = profiles
        .iter()
        .flat_map(|p| {
            if p.meta.merged_from.is_empty() {
                vec![Source {
                    tool: p.meta.tool.clone(),
                    command: p.meta.command.clone(),
                    host: p.meta.run.host.clone(),
                    start_time: p.meta.run.start_time.clone(),
                    duration_ns: p.meta.duration_ns,
                }]
            } else {
                p.meta.merged_from.clone()
            }
        })
        .collect();
    // A set, not `Vec::contains`: a fleet of 1,000 profiles with notes of
    // their own would make that quadratic.
    let mut seen: std::collections::HashSet<&str> = meta.notes.iter().map(|n| &n[..]).collect();
    let mut notes = Vec::new();
    for n in profiles.iter().flat_map(|p| &p.meta.notes) {
        if seen.insert(n) {
            notes.push(n.clone());
        }
    }
    meta.notes.extend(notes);
    meta
}

/// Adds the inputs' intervals slice by slice when they all have the same
/// length; otherwise `out` gets none, and the warning says why when any
/// input had some.
fn merge_intervals(
    out: &mut Profile,
    profiles: &[Profile],
    res: Resolution,
) -> Result<(), &'static str> {
    let interval_lengths: Vec<Option<u64>> = profiles.iter().map(|p| p.meta.interval_ns).collect();
    let same = interval_lengths.windows(2).all(|w| w[0] == w[1]);
    let Some(len) = interval_lengths.first().copied().flatten().filter(|_| same) else {
        out.meta.interval_ns = None;
        if interval_lengths.iter().any(Option::is_some) {
            return Err("inputs have different interval lengths (or some none); the merged profile has no intervals");
        }
        return Ok(());
    };
    out.meta.interval_ns = Some(len);
    for p in profiles {
        for (k, iv) in p.intervals.iter().enumerate() {
            if out.intervals.len() <= k {
                out.intervals.push(Interval {
                    start_ns: k as u64 * len,
                    end_ns: (k as u64 + 1) * len,
                    layers: Vec::new(),
                });
            }
            add_layers(
                &mut out.intervals[k].layers,
                &iv.layers,
                p.resolution(),
                res,
            );
        }
    }
    Ok(())
}

fn add_layers(into: &mut Vec<Layer>, from: &[Layer], from_res: Resolution, to_res: Resolution) {
    merge_layers(
        into,
        from.iter().map(|l| {
            let mut l = l.clone();
            downscale_layer(&mut l, from_res, to_res);
            l
        }),
    );
}

fn downscale_layer(l: &mut Layer, from: Resolution, to: Resolution) {
    for op in &mut l.ops {
        op.downscale(from, to);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Clock;
    use crate::OpStats;

    fn profile(r: u32, latencies: &[u64]) -> Profile {
        let res = Resolution::new(r).unwrap();
        let layout = crate::BucketLayout::new(res);
        let mut p = Profile::new(Meta {
            tool: "t".into(),
            resolution: res,
            clock: Clock::default(),
            ..Default::default()
        });
        let mut op = OpStats::new("read");
        for &l in latencies {
            op.pre += 1;
            op.post += 1;
            op.total_ns += l;
            op.histogram.add_to(layout.index(l), 1);
        }
        op.min_ns = latencies.iter().min().copied();
        op.max_ns = latencies.iter().max().copied();
        p.layer_mut("user").ops.push(op);
        p
    }

    #[test]
    fn merge_adds_counts_and_keeps_extremes() {
        let (m, w) = merge_profiles(
            &[profile(1, &[10, 20]), profile(1, &[3000])],
            Meta::default(),
        );
        assert!(w.is_empty());
        let op = m.layer("user").unwrap().op("read").unwrap();
        assert_eq!((op.pre, op.post, op.total_ns), (3, 3, 3030));
        assert_eq!((op.min_ns, op.max_ns), (Some(10), Some(3000)));
        assert_eq!(op.histogram.total(), 3);
        assert_eq!(m.meta.merged_from.len(), 2);
    }

    #[test]
    fn merge_of_mixed_resolutions_uses_the_coarsest_exactly() {
        let lat = [7, 100, 1000, 123_456];
        let (m, w) = merge_profiles(&[profile(16, &lat), profile(4, &lat)], Meta::default());
        assert_eq!(w.len(), 1);
        assert_eq!(m.resolution().get(), 4);
        let expect = profile(4, &[7, 7, 100, 100, 1000, 1000, 123_456, 123_456]);
        assert_eq!(
            m.layer("user").unwrap().op("read").unwrap().histogram,
            expect.layer("user").unwrap().op("read").unwrap().histogram
        );
    }
}
