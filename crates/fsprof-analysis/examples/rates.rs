//! Scratch: compare_rates.py's rates over an existing pool, in-process.
use fsprof_analysis::compare::{compare_runs, CompareOptions};
use fsprof_core::format::read_profile;
use fsprof_core::Profile;
use std::path::Path;

fn load(dir: &str, name: &str) -> Profile {
    read_profile(&Path::new(dir).join(format!("{name}.json"))).unwrap()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = &args[1];
    let n: usize = args.get(2).map_or(20, |s| s.parse().unwrap());
    let verbose = std::env::var("V").is_ok();
    let mut opts = CompareOptions::default();
    if let Ok(v) = std::env::var("SPREAD") { opts.spread = v.parse().unwrap(); }
    if let Ok(v) = std::env::var("SPREAD_DF") { opts.spread_df = v.parse().unwrap(); }
    if let Ok(v) = std::env::var("LAYER_SPREAD") { opts.layer_spread = v.parse().unwrap(); }
    if let Ok(v) = std::env::var("MIN_SHARE") { opts.min_share = v.parse().unwrap(); }
    // Single pairs: every disjoint pair of the pool when ALL is set.
    let all = std::env::var("ALL").is_ok();
    let mut tot = [0usize; 4];
    for (w, ops) in [("meta", ["readdir", "getxattr"]), ("read", ["open", "read"]), ("procs", ["close", "read"])] {
        let base: Vec<Profile> = (0..6 * n).map(|i| load(dir, &format!("{w}-base-{i}"))).collect();
        let mut fp1 = 0;
        let mut fp3 = 0;
        let n1 = if all { 3 * n } else { n };
        for i in 0..n1 {
            let c = compare_runs(&base[2 * i..2 * i + 1], &base[2 * i + 1..2 * i + 2], &opts);
            if c.exit_code() == 1 {
                fp1 += 1;
                if verbose {
                    for o in c.interesting() { eprintln!("FP1 {w} {i} {}/{} {:?}", o.layer, o.op, o.decided_by()); }
                    for s in c.layer_shifts.iter().filter(|s| s.decides()) { eprintln!("FP1 {w} {i} layer {} {:?}", s.layer, s.check); }
                }
            }
        }
        for i in 0..n {
            let c = compare_runs(&base[6 * i..6 * i + 3], &base[6 * i + 3..6 * i + 6], &opts);
            if c.exit_code() == 1 {
                fp3 += 1;
                if verbose {
                    for o in c.interesting() { eprintln!("FP3 {w} {i} {}/{} {:?}", o.layer, o.op, o.decided_by()); }
                }
            }
        }
        println!("{w} identical: single {fp1}/{n1}, 3v3 {fp3}/{n}");
        tot[0] += fp1;
        tot[1] += fp3;
        for op in ops {
            let slow: Vec<Profile> = (0..3 * n).map(|i| load(dir, &format!("{w}-{op}-{i}"))).collect();
            let (mut d1, mut d3) = (0, 0);
            for i in 0..n1 {
                let c = compare_runs(&base[2 * i..2 * i + 1], &slow[i..i + 1], &opts);
                let hit = c.interesting().any(|o| o.op == op);
                d1 += usize::from(hit);
                if verbose && !hit {
                    let o = c.ops.iter().find(|o| o.op == op && o.layer == "user");
                    eprintln!("MISS1 {w} {op} {i} {:?}", o.map(|o| (o.latency_share_a, o.checks.clone())));
                }
            }
            for i in 0..n {
                let c = compare_runs(&base[6 * i..6 * i + 3], &slow[3 * i..3 * i + 3], &opts);
                let hit = c.interesting().any(|o| o.op == op);
                d3 += usize::from(hit);
                if verbose && !hit {
                    let o = c.ops.iter().find(|o| o.op == op && o.layer == "user");
                    eprintln!("MISS3 {w} {op} {i} {:?}", o.map(|o| o.checks.clone()));
                }
            }
            println!("{w} {op} 2x: single {d1}/{n1}, 3v3 {d3}/{n}");
            tot[2] += d1;
            tot[3] += d3;
        }
    }
    println!("ALL fp single {} 3v3 {} | det single {} 3v3 {}", tot[0], tot[1], tot[2], tot[3]);
}
