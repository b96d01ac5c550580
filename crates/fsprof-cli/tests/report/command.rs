//! `report` in its three formats, `merge` and `check` on real profiles.

use std::fs;

use fsprof_testkit::*;

fn real_profile(dir: &std::path::Path, name: &str, args: &[&str]) -> std::path::PathBuf {
    let (out, path) = run_profiled(dir, args);
    assert!(out.status.code().is_some());
    let dest = dir.join(name);
    fs::rename(path, &dest).unwrap();
    dest
}

fn stdout(args: &[&str], file: &std::path::Path) -> String {
    let out = succeeds(fsprof().args(&args[..1]).arg(file).args(&args[1..]));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn text_report_ranks_ops_by_total_latency() {
    let dir = tempfile::tempdir().unwrap();
    let p = real_profile(
        dir.path(),
        "g.json",
        &["grep", "-r", "-c", "x", "/usr/include/linux"],
    );
    let text = stdout(&["report", "--top", "2"], &p);
    let profile = load(&p);
    let mut ops: Vec<_> = profile.layer("user").unwrap().ops.iter().collect();
    ops.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then(b.post.cmp(&a.post))
            .then(a.name.cmp(&b.name))
    });
    let table_order: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("op "))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(
        table_order,
        ops.iter().map(|o| o.name.as_str()).collect::<Vec<_>>()
    );
    // --top 2: two histograms, each with the bcc-style bar column.
    assert_eq!(text.matches("distribution").count(), 2, "{text}");
    assert!(text.contains("self-overhead"), "{text}");
}

#[test]
fn csv_and_json_agree_with_the_profile() {
    let dir = tempfile::tempdir().unwrap();
    let p = real_profile(dir.path(), "c.json", &["cat", "/etc/passwd"]);
    let profile = load(&p);
    let csv = stdout(&["report", "--format", "csv"], &p);
    let mut lines = csv.lines();
    assert!(lines
        .next()
        .unwrap()
        .starts_with("layer,op,calls,errors,total_ns"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), profile.layer("user").unwrap().ops.len());
    for r in &rows {
        let op = user_op(&profile, r[1]).unwrap();
        assert_eq!(r[0], "user");
        assert_eq!(r[2].parse::<u64>().unwrap(), op.post);
        assert_eq!(r[3].parse::<u64>().unwrap(), op.errors);
        assert_eq!(r[4].parse::<u64>().unwrap(), op.total_ns);
    }
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&["report", "--format", "json"], &p)).unwrap();
    let ops = json["layers"][0]["ops"].as_array().unwrap();
    assert_eq!(ops.len(), rows.len());
    assert_eq!(
        ops[0]["op"].as_str().unwrap(),
        rows[0][1],
        "same ranking in both formats"
    );
    // Each op's histogram: its buckets hold every call, with bounds that
    // are fsprof's 2^i ns at resolution 1.
    for o in ops {
        let op = user_op(&profile, o["op"].as_str().unwrap()).unwrap();
        let buckets = o["buckets"].as_array().unwrap();
        let calls: u64 = buckets.iter().map(|b| b["calls"].as_u64().unwrap()).sum();
        assert_eq!(calls, op.post);
        assert_eq!(o["calls"].as_u64().unwrap(), op.post);
        for b in buckets
            .iter()
            .filter(|b| b["upper_ns"].as_f64().unwrap() > 0.0)
        {
            let (lo, hi) = (
                b["lower_ns"].as_f64().unwrap(),
                b["upper_ns"].as_f64().unwrap(),
            );
            assert_eq!(hi, 2.0 * lo, "{b}");
            assert_eq!(hi.log2().fract(), 0.0, "{b}");
        }
    }
}

#[test]
fn op_filter_and_unknown_op() {
    let dir = tempfile::tempdir().unwrap();
    let p = real_profile(dir.path(), "c.json", &["cat", "/etc/passwd"]);
    let csv = stdout(&["report", "--format", "csv", "--op", "read"], &p);
    assert_eq!(csv.lines().count(), 2);
    let out = fsprof()
        .arg("report")
        .arg(&p)
        .args(["--op", "frobnicate"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("frobnicate") && err.contains("read"), "{err}");
}

#[test]
fn merge_adds_runs_and_passes_check() {
    let dir = tempfile::tempdir().unwrap();
    let a = real_profile(dir.path(), "a.json", &["cat", "/etc/passwd"]);
    let b = real_profile(
        dir.path(),
        "b.json",
        &["cat", "/etc/passwd", "/etc/hostname"],
    );
    let m = dir.path().join("m.json");
    succeeds(fsprof().arg("merge").arg(&a).arg(&b).arg("-o").arg(&m));
    let (pa, pb, pm) = (load(&a), load(&b), load(&m));
    for op in ["read", "write", "close"] {
        assert_eq!(count(&pm, op), count(&pa, op) + count(&pb, op), "{op}");
    }
    assert_eq!(pm.meta.merged_from.len(), 2);
    assert_eq!(pm.processes.len(), pa.processes.len() + pb.processes.len());
    let out = fsprof().arg("check").arg(&m).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Merging into an existing file needs --force.
    let out = fsprof()
        .arg("merge")
        .arg(&a)
        .arg("-o")
        .arg(&m)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn check_catches_a_lost_sample() {
    let dir = tempfile::tempdir().unwrap();
    let p = real_profile(dir.path(), "c.json", &["cat", "/etc/passwd"]);
    let mut profile = load(&p);
    let out = fsprof().arg("check").arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    // One returned call whose latency never reached the histogram.
    let read = profile.layers[0]
        .ops
        .iter_mut()
        .find(|o| o.name == "read")
        .unwrap();
    read.post += 1;
    read.pre += 1;
    fsprof_core::format::write_profile(&p, &profile, true).unwrap();
    let out = fsprof().arg("check").arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("user/read"));
}

/// A hand-edited profile with an op listed twice, or whose shortest call
/// is longer than its longest, is not sound.
#[test]
fn check_catches_a_duplicate_op_and_min_above_max() {
    let dir = tempfile::tempdir().unwrap();
    let p = real_profile(dir.path(), "c.json", &["cat", "/etc/passwd"]);
    let clean = load(&p);
    let check = |profile: &fsprof_core::Profile| {
        fsprof_core::format::write_profile(&p, profile, true).unwrap();
        let out = fsprof().arg("check").arg(&p).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let read_at =
        |pr: &fsprof_core::Profile| pr.layers[0].ops.iter().position(|o| o.name == "read");
    let mut twice = clean.clone();
    let i = read_at(&twice).unwrap();
    let read = twice.layers[0].ops[i].clone();
    twice.layers[0].ops.push(read);
    let (code, err) = check(&twice);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("user/read: the op appears more than once"),
        "{err}"
    );

    let mut inverted = clean.clone();
    let read = &mut inverted.layers[0].ops[i];
    read.min_ns = Some(read.max_ns.unwrap() + 1);
    let (code, err) = check(&inverted);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("user/read: the shortest call"), "{err}");
}

/// Hand-set counts near u64::MAX: merging and reporting saturate at
/// u64::MAX instead of wrapping to a small, plausible number (or, in a
/// debug build, panicking).
#[test]
fn huge_counts_saturate_in_merge_and_report() {
    let dir = tempfile::tempdir().unwrap();
    let p = real_profile(dir.path(), "c.json", &["cat", "/etc/passwd"]);
    let mut huge = load(&p);
    let big = u64::MAX - 5;
    for l in &mut huge.layers {
        for o in &mut l.ops {
            o.pre = big;
            o.post = big;
            o.errors = 0;
            o.total_ns = big;
            o.histogram = Default::default();
            o.histogram.add_to(Some(10), big);
            o.correlations = None;
        }
    }
    for pr in &mut huge.processes {
        pr.layers = huge.layers.clone();
    }
    huge.processes.truncate(1);
    huge.intervals.clear();
    fsprof_core::format::write_profile(&p, &huge, true).unwrap();
    let merged = dir.path().join("m.json");
    let out = fsprof()
        .arg("merge")
        .args([&p, &p])
        .arg("-o")
        .arg(&merged)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m = load(&merged);
    let read = m.layer("user").unwrap().op("read").unwrap();
    assert_eq!(
        (read.pre, read.post, read.total_ns),
        (u64::MAX, u64::MAX, u64::MAX)
    );
    assert_eq!(read.histogram.total(), u64::MAX);
    for args in [
        &["report"][..],
        &["report", "--processes"],
        &["report", "--format", "csv"],
    ] {
        let out = fsprof().args(args).arg(&merged).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("18446744073709551615") || text.contains("18,446,744,073,709,551,615"),
            "{args:?}: the saturated count is shown\n{text}"
        );
    }
}

/// A `block-size` layer counts bytes: 16 requests of 64 KiB and 8 of
/// 128 KiB (2 MiB in all), known by construction. Every renderer prints
/// them as bytes (or names the unit), none as a time.
#[test]
fn byte_layers_carry_their_unit_in_every_renderer() {
    let d = tempfile::tempdir().unwrap();
    let mut w = fsprof_core::OpStats::new("loop0:write");
    // Bucket i holds (2^i, 2^(i+1)]: 64 KiB = 2^16 is in bucket 15.
    w.histogram.add_to(Some(15), 16);
    w.histogram.add_to(Some(16), 8);
    w.pre = 24;
    w.post = 24;
    w.total_ns = 16 * 65536 + 8 * 131072;
    let p = write(d.path(), "b.json", &profile_of("block-size", vec![w]));
    let text = stdout(&["report", "--peaks", "--layer", "block-size"], &p);
    let body = &text[text.find("layer block-size").unwrap()..];
    assert!(body.contains("24 calls, 0 errors, 2 MiB in all"), "{body}");
    assert!(
        body.contains("32 KiB -> 64 KiB") && body.contains("64 KiB -> 128 KiB"),
        "{body}"
    );
    assert!(body.contains("size") && !has_time(body), "{body}");

    let json: serde_json::Value =
        serde_json::from_str(&stdout(&["report", "--format", "json", "--peaks"], &p)).unwrap();
    assert_eq!(json["layers"][0]["unit"], "bytes", "{json}");
    assert_eq!(json["layers"][0]["total_ns"], 2 << 20);
    assert_eq!(json["peaks"][0]["unit"], "bytes", "{json}");

    let csv = stdout(&["report", "--format", "csv"], &p);
    let (head, row) = csv.split_once('\n').unwrap();
    assert!(
        head.ends_with(",unit") && row.trim_end().ends_with(",bytes"),
        "{csv}"
    );

    let html = html_report(&p, &d.path().join("r.html"));
    assert!(
        html.contains("2 MiB in all") && html.contains("calls per size bucket"),
        "{}",
        &html[..html.len().min(3000)]
    );
    assert!(html.contains("size (log2 buckets"), "the chart's axis");

    let svg = stdout(
        &["plot", "--op", "loop0:write", "-o", "-", "--format", "svg"],
        &p,
    );
    assert!(
        svg.contains("size (log2 buckets") && svg.contains("64 KiB"),
        "{svg}"
    );
    assert!(!has_time(&svg), "{svg}");

    let prom = stdout(&["export", "--format", "prometheus"], &p);
    assert!(
        prom.contains("fsprof_op_size_bytes_sum{")
            && !prom.contains("fsprof_op_latency_nanoseconds_sum{"),
        "{prom}"
    );
    let otlp = stdout(&["export", "--format", "otlp-json"], &p);
    assert!(
        otlp.contains("\"fsprof.op.size\"") && otlp.contains("\"By\""),
        "{otlp}"
    );
}

/// Whether `s` holds a time such as `131µs`, `2.5ms` or `40ns`.
fn has_time(s: &str) -> bool {
    s.split(|c: char| !(c.is_alphanumeric() || c == 'µ' || c == '.'))
        .any(|w| {
            ["ns", "µs", "ms"].iter().any(|u| {
                w.strip_suffix(u).is_some_and(|n| {
                    !n.is_empty() && n.chars().all(|c| c.is_ascii_digit() || c == '.')
                })
            })
        })
}

/// A name too long for any table (65,536 bytes: `{:<w$}` takes widths
/// below that and panicked, exit 101) is refused when the profile is read,
/// by every command, in one line: a clear error rather than a cut name
/// (two cut names could become one op and mix their latencies).
#[test]
fn an_op_or_layer_name_beyond_the_bound_is_one_line_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let long = "a".repeat(65_536);
    let bad_op = write(
        dir.path(),
        "op.json",
        &profile_of("user", vec![op(&long, &[(10, 1)])]),
    );
    let bad_layer = write(
        dir.path(),
        "layer.json",
        &profile_of(&long, vec![op("read", &[(10, 1)])]),
    );
    for p in [&bad_op, &bad_layer] {
        let runs: [Vec<&std::ffi::OsStr>; 6] = [
            vec!["report".as_ref(), p.as_ref()],
            vec!["compare".as_ref(), p.as_ref(), p.as_ref()],
            vec!["check".as_ref(), p.as_ref()],
            vec![
                "export".as_ref(),
                p.as_ref(),
                "--format".as_ref(),
                "prometheus".as_ref(),
            ],
            vec!["report".as_ref(), p.as_ref(), "--peaks".as_ref()],
            vec!["merge".as_ref(), p.as_ref(), "-o".as_ref(), "-".as_ref()],
        ];
        for args in runs {
            let o = fsprof().args(&args).output().unwrap();
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
            assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
            assert!(
                err.contains("65536 bytes") && err.contains("at most"),
                "{args:?}: {err}"
            );
            assert!(err.len() < 400, "{args:?}: the whole name printed");
        }
    }
}
