//! Text for the `block-size` layer, whose histograms count bytes: the
//! generic report labels buckets as times, so this layer has its own table.

use std::fmt::Write;

use fsprof_core::layer::BLOCK_SIZE as BLOCK_SIZE_LAYER;
use fsprof_core::units::format_bytes;
use fsprof_core::Profile;

use crate::text::BAR;

/// The `block-size` layer, one byte histogram per device and kind; empty
/// when the profile has no such layer.
pub fn render_text(p: &Profile) -> String {
    let mut s = String::new();
    let Some(layer) = p.layer(BLOCK_SIZE_LAYER) else {
        return s;
    };
    let res = p.resolution();
    for op in &layer.ops {
        let mean = if op.post > 0 {
            op.total_ns as f64 / op.post as f64
        } else {
            0.0
        };
        let _ = writeln!(
            s,
            "\nblock request sizes {}: {} requests, {} in all, mean {}",
            op.name,
            op.post,
            format_bytes(op.total_ns as f64),
            format_bytes(mean)
        );
        let max = op.histogram.buckets().map(|(_, c)| c).max().unwrap_or(0);
        for (i, c) in op.histogram.buckets() {
            let bar = "*".repeat(((c as f64 / max as f64) * BAR as f64).ceil() as usize);
            let _ = writeln!(
                s,
                "  {:>9} -> {:<9} : {:<7} |{:<BAR$}|",
                format_bytes(res.lower_bound(i)),
                format_bytes(res.upper_bound(i)),
                c,
                bar
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use fsprof_core::histogram::OpStats;
    use fsprof_core::profile::{layer_in, Meta};
    use fsprof_core::{BucketLayout, Profile, Resolution};

    #[test]
    fn sizes_are_printed_in_bytes() {
        let res = Resolution::new(1).unwrap();
        let mut p = Profile::new(Meta {
            resolution: res,
            ..Default::default()
        });
        let mut w = OpStats::new("loop0:write");
        w.histogram.add_to(BucketLayout::new(res).index(65536), 16);
        w.post = 16;
        w.total_ns = 16 * 65536;
        layer_in(&mut p.layers, super::BLOCK_SIZE_LAYER).ops.push(w);
        let text = super::render_text(&p);
        assert!(
            text.contains("loop0:write: 16 requests, 1 MiB in all, mean 64 KiB"),
            "{text}"
        );
        assert!(text.contains("32 KiB -> 64 KiB"), "{text}");
    }
}
