//! Text for the `block-size` layer, whose histograms count bytes: the
//! generic report labels buckets as times, so `fsprof kernel` prints this
//! layer itself.

use std::fmt::Write;

use fsprof_core::Profile;

use fsprof_core::layer::BLOCK_SIZE as BLOCK_SIZE_LAYER;

/// `4096` → `4KiB`, `1536` → `1.5KiB`.
pub fn format_bytes(b: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = b;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if (v - v.round()).abs() < 0.05 {
        format!("{}{}", v.round(), units[u])
    } else {
        format!("{v:.1}{}", units[u])
    }
}

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
            let bar = "*".repeat(((c as f64 / max as f64) * 40.0).ceil() as usize);
            let _ = writeln!(
                s,
                "  {:>9} -> {:<9} : {:<7} |{:<40}|",
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
    use super::*;

    #[test]
    fn byte_units() {
        assert_eq!(format_bytes(512.0), "512B");
        assert_eq!(format_bytes(4096.0), "4KiB");
        assert_eq!(format_bytes(65536.0), "64KiB");
        assert_eq!(format_bytes(1536.0), "1.5KiB");
        assert_eq!(format_bytes(1048576.0), "1MiB");
    }
}
