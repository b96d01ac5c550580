use serde_json::json;

use fsprof_core::Profile;

use crate::summary::Summary;

pub fn render(p: &Profile, s: &Summary) -> String {
    let layers: Vec<_> = s
        .layers
        .iter()
        .map(|l| {
            let ops: Vec<_> = l
                .rows
                .iter()
                .map(|r| {
                    json!({
                        "op": r.op.name,
                        "count": r.op.post,
                        "errors": r.op.errors,
                        "unfinished": r.op.unfinished(),
                        "total_ns": r.op.total_ns,
                        "mean_ns": r.op.mean_ns(),
                        "min_ns": r.op.min_ns,
                        "max_ns": r.op.max_ns,
                        "p50_ns": r.p50_ns,
                        "p99_ns": r.p99_ns,
                        "share": r.share,
                    })
                })
                .collect();
            json!({
                "layer": l.name,
                "calls": l.calls,
                "errors": l.errors,
                "total_ns": l.total_ns,
                "ops": ops,
            })
        })
        .collect();
    let doc = json!({
        "report": "fsprof-report",
        "meta": p.meta,
        "layers": layers,
    });
    serde_json::to_string_pretty(&doc).expect("serializable") + "\n"
}
