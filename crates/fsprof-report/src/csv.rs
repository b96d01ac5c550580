//! The profile summary as CSV: one row per op. The `*_ns` columns hold
//! the layer's unit, named in the last column (`ns`, or `bytes` for a
//! byte-valued layer such as `block-size`).

use crate::fmt::field;
use crate::summary::Summary;

pub const HEADER: &str =
    "layer,op,calls,errors,total_ns,mean_ns,min_ns,max_ns,p50_ns,p99_ns,share,unit";

pub fn render(s: &Summary) -> String {
    let mut out = String::from(HEADER);
    out.push('\n');
    for l in &s.layers {
        for r in &l.rows {
            let o = r.op;
            out.push_str(&format!(
                "{},{},{},{},{},{:.1},{},{},{:.1},{:.1},{:.6},{}\n",
                field(r.layer),
                field(&o.name),
                o.post,
                o.errors,
                o.total_ns,
                o.mean_ns(),
                o.min_ns.map(|v| v.to_string()).unwrap_or_default(),
                o.max_ns.map(|v| v.to_string()).unwrap_or_default(),
                r.p50_ns,
                r.p99_ns,
                r.share,
                fsprof_core::layer::Unit::of(r.layer).symbol()
            ));
        }
    }
    out
}
