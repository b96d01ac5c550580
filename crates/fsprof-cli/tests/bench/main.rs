//! `fsprof bench` from the command line: bad input is one line and exit 2,
//! results are profiles that report/check read, every --format parses,
//! `fsprof compare` on two bench results judges phases by their intervals,
//! and a sweep's plot marks the CPU caches sysfs lists.

mod per_process_bench;
mod slow_runs;
mod trace_replay_bench;

use std::path::Path;
use std::process::Output;

use fsprof_testkit::{fsprof, html_report};

/// Runs the script `bench/NAME` with `args` under python3; fails the test
/// unless it exits 0 and prints `passed` (the scripts' self-tests).
pub(crate) fn bench_script_passes(name: &str, args: &[&std::ffi::OsStr], passed: &str) {
    let python = fsprof_testkit::need_program("python3", "python3");
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../bench")
        .join(name);
    let o = std::process::Command::new(python)
        .arg(script)
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains(passed));
}

fn one_error_line(o: &Output, needle: &str) {
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.starts_with("fsprof: ") && err.contains(needle), "{err}");
}

fn bench(dir: &Path, args: &[&str]) -> Output {
    fsprof()
        .args(["bench"])
        .args(args)
        .arg("--dir")
        .arg(dir)
        .output()
        .unwrap()
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    one_error_line(
        &bench(Path::new("/nonexistent/dir"), &["sprite"]),
        "/nonexistent/dir: ",
    );
    one_error_line(
        &bench(d.path(), &["pread", "--cache", "cold"]),
        "cached reads",
    );
    one_error_line(&bench(d.path(), &["sprite", "--files", "1"]), "--files");
    // clap's own parse errors are one line too.
    one_error_line(
        &bench(d.path(), &["sprite", "--file-size", "1x"]),
        "invalid size \"1x\"",
    );
    one_error_line(
        &bench(d.path(), &["sprite", "--align", "sideways"]),
        "--align",
    );
    one_error_line(
        &bench(d.path(), &["sprite", "--bogus"]),
        "usage: fsprof bench",
    );
    one_error_line(&bench(d.path(), &["sprite", "--plot", "x.svg"]), "--plot");
    // Another suite's option is named, with whose it is.
    one_error_line(
        &bench(d.path(), &["sprite", "--dirs", "3"]),
        "--dirs is not an option of sprite (it is metadata's)",
    );
    let existing = d.path().join("r.json");
    std::fs::write(&existing, "mine").unwrap();
    let o = bench(d.path(), &["sprite", "-o", existing.to_str().unwrap()]);
    one_error_line(&o, "--force");
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "mine");
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
}

/// The suites and their options are the registry's: `--help` lists each
/// suite with its description and each suite option once, with the suites
/// that take it; an unknown suite is refused with the registry's names.
#[test]
fn suites_and_their_options_come_from_the_registry() {
    let o = fsprof().args(["bench", "--help"]).output().unwrap();
    assert!(o.status.success(), "{o:?}");
    let help = String::from_utf8_lossy(&o.stdout);
    for s in fsprof_bench::SUITES {
        assert!(
            help.contains(&format!("- {}:", s.name())) && help.contains(s.about()),
            "{} missing from:\n{help}",
            s.name()
        );
        for opt in s.options() {
            let flag = format!("--{}", opt.name);
            assert_eq!(
                help.lines()
                    .filter(|l| l.trim_start().starts_with(&flag)
                        && l.trim_start()[flag.len()..].starts_with([' ', '\n'])
                        || l.trim() == flag)
                    .count(),
                1,
                "{flag} once in:\n{help}"
            );
        }
    }
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let o = bench(d.path(), &["nosuch"]);
    let names: Vec<&str> = fsprof_bench::SUITES.iter().map(|s| s.name()).collect();
    one_error_line(&o, &names.join(", "));
}

/// A sprite run small enough for a test: three files of 32 KiB.
const SMALL_SPRITE: [&str; 5] = ["sprite", "--files", "3", "--file-size", "32k"];

/// A small sprite run (three runs) into `out`; it must succeed.
fn quick(dir: &Path, out: &Path, extra: &[&str]) {
    let mut args = SMALL_SPRITE.to_vec();
    args.extend(["--runs", "3", "-o", out.to_str().unwrap()]);
    args.extend_from_slice(extra);
    let o = bench(dir, &args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn results_are_profiles_and_every_format_parses() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let out = tempfile::tempdir().unwrap();
    let r = out.path().join("r.json");
    quick(d.path(), &r, &[]);
    let o = fsprof().arg("check").arg(&r).output().unwrap();
    assert!(o.status.success(), "{o:?}");
    let o = fsprof().arg("report").arg(&r).output().unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains("seq_read"));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&r).unwrap()).unwrap();
    assert_eq!(v["format"], "fsprof-profile");
    let b = &v["bench"];
    assert_eq!(b["format"], "fsprof-bench");
    for key in ["machine", "dir", "params", "timer", "phases"] {
        assert!(!b[key].is_null(), "{key} missing");
    }
    assert_eq!(b["dir"]["fs_type"], "tmpfs");
    assert!(b["machine"]["caches"].is_array() && b["params"]["runs"] == 3);
    for f in ["json", "csv", "markdown", "text"] {
        let o = bench(
            d.path(),
            &[
                "sprite",
                "--files",
                "2",
                "--file-size",
                "16k",
                "--runs",
                "2",
                "--format",
                f,
            ],
        );
        assert!(o.status.success(), "{f}");
        let s = String::from_utf8(o.stdout).unwrap();
        match f {
            "json" => {
                let v: serde_json::Value = serde_json::from_str(&s).unwrap();
                assert_eq!(v["bench"]["phases"].as_array().unwrap().len(), 5);
            }
            "csv" => {
                assert_eq!(s.lines().count(), 6, "{s}");
                assert!(s.lines().all(|l| l.split(',').count() == 14), "{s}");
            }
            "markdown" => assert_eq!(s.lines().filter(|l| l.starts_with("| `")).count(), 5),
            _ => assert!(s.contains("± 95% CI") && s.contains("first file is dropped")),
        }
    }
}

#[test]
fn compare_of_two_bench_results_judges_phases_by_their_intervals() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let out = tempfile::tempdir().unwrap();
    let a = out.path().join("a.json");
    quick(d.path(), &a, &[]);
    // Same file against itself: identical intervals overlap.
    let o = fsprof().arg("compare").arg(&a).arg(&a).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("no significant change"));
    // B: seq_read's mean and interval moved far above A's.
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&a).unwrap()).unwrap();
    let phases = v["bench"]["phases"].as_array_mut().unwrap();
    let ph = phases.iter_mut().find(|p| p["name"] == "seq_read").unwrap();
    let hi = ph["summary"]["ci95"]["high"].as_f64().unwrap();
    let s = &mut ph["summary"];
    s["mean"] = (hi * 10.0).into();
    s["ci95"]["low"] = (hi * 9.0).into();
    s["ci95"]["high"] = (hi * 11.0).into();
    let b = out.path().join("b.json");
    std::fs::write(&b, serde_json::to_vec(&v).unwrap()).unwrap();
    // Faster is listed and passes the gate (--fail-on slower), fails it
    // with --fail-on any; the other way round it is slower and fails.
    let o = fsprof().arg("compare").arg(&a).arg(&b).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let o = fsprof().arg("compare").arg(&b).arg(&a).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("slower (beyond both CIs)"));
    let o = fsprof()
        .args(["compare", "--fail-on", "any"])
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let text = String::from_utf8_lossy(&o.stdout);
    let line = text.lines().find(|l| l.starts_with("seq_read ")).unwrap();
    assert!(line.contains("faster (beyond both CIs)"), "{text}");
    let other = text.lines().find(|l| l.starts_with("rand_read ")).unwrap();
    assert!(other.contains("no significant change"), "{text}");
    // Each file is read once, so a result on standard input (which cannot
    // be read twice) is still compared as a bench result.
    let o = fsprof()
        .args(["compare", "--fail-on", "any", "-"])
        .arg(&b)
        .stdin(std::fs::File::open(&a).unwrap())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("faster (beyond both CIs)"));
}

/// A sweep small enough for a test: two files, two runs, from 16 KiB.
const SMALL_SWEEP: [&str; 6] = ["--files", "2", "--runs", "2", "--min-size", "16k"];

#[test]
fn a_sweep_plot_marks_the_caches_sysfs_lists() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let out = tempfile::tempdir().unwrap();
    let svg = out.path().join("s.svg");
    let l1 = std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cache/index0/size")
        .expect("sysfs cache sizes");
    let l1_kib: u64 = l1.trim().trim_end_matches('K').parse().unwrap();
    let max = format!("{}k", (l1_kib * 2).next_power_of_two());
    let result = out.path().join("sweep.json");
    let table = out.path().join("sweep.csv");
    let (result_arg, svg_arg) = (result.to_str().unwrap(), svg.to_str().unwrap());
    let mut args = vec![
        "sweep",
        "-o",
        result_arg,
        "--plot",
        svg_arg,
        "-o",
        table.to_str().unwrap(),
    ];
    args.extend(SMALL_SWEEP);
    args.extend(["--max-size", &max]);
    let o = bench(d.path(), &args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.contains(&format!("L1 {l1_kib} KiB")), "no L1 marker");
    let csv = std::fs::read_to_string(&table).unwrap();
    assert!(csv.contains("seq_read@16 KiB"), "{csv}");
    // The HTML report of the result carries the same chart; a bench
    // result without a sweep (and any plain profile) has none.
    let html = out.path().join("r.html");
    let page = html_report(&result, &html);
    assert_eq!(page.matches("id=\"file-size-sweep\"").count(), 1);
    let chart = &page[page.find("id=\"file-size-sweep\"").unwrap()..];
    assert!(
        chart.contains(&format!("L1 {l1_kib} KiB")),
        "no L1 marker in the report"
    );
    assert!(chart.contains("seq_read"));
    let p50 = &page[page
        .find("id=\"file-size-sweep-op-p50\"")
        .expect("op p50 chart")..];
    assert!(p50.contains("ns per op (median)"));
    let sprite = out.path().join("sprite.json");
    quick(d.path(), &sprite, &[]);
    let html2 = out.path().join("r2.html");
    assert!(!html_report(&sprite, &html2).contains("id=\"file-size-sweep\""));
    let png = out.path().join("s.png");
    let mut args = vec![
        "sweep",
        "--max-size",
        "32k",
        "--plot-p50",
        png.to_str().unwrap(),
    ];
    args.extend(SMALL_SWEEP);
    let o = bench(d.path(), &args);
    assert!(o.status.success());
    assert_eq!(&std::fs::read(&png).unwrap()[..4], b"\x89PNG");
    // An existing plot file is refused before anything runs.
    one_error_line(
        &bench(d.path(), &["sweep", "--plot-p50", png.to_str().unwrap()]),
        "--force",
    );
}

/// Median of a sample, computed here (sorted copy, middle or mean of the
/// two middle values), not by fsprof.
fn median_of(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The 1-minute load average, from /proc/loadavg.
fn loadavg() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// CPUs the kernel lists as online (`0-1,4`), counted from sysfs.
fn online_cpus() -> usize {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    s.trim()
        .split(',')
        .map(|r| match r.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
            None => 1,
        })
        .sum()
}

const FILES: usize = 3;
const BLOCKS: usize = 8; // 32 KiB files, 4 KiB I/O
const RUNS: usize = 4;
const T_975_DF3: f64 = 3.182_446_305_284_263; // Student t, 97.5%, 3 df

/// One phase's printed figures, recomputed by the test from the raw
/// per-file and per-op times the result carries.
struct Recomputed {
    mean: f64,
    half: f64,
    median: f64,
    min: f64,
    max: f64,
    sd: f64,
    mad: f64,
    outliers: usize,
    op_p50: f64,
    /// The discarded warm-up run's figure, and every measured figure.
    warm: f64,
    figs: Vec<f64>,
}

fn nested(v: &serde_json::Value) -> Vec<Vec<f64>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|f| {
            f.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect()
        })
        .collect()
}

fn recompute(ph: &serde_json::Value) -> Recomputed {
    let file_ns = nested(&ph["file_ns"]);
    let op_ns = nested(&ph["op_ns"]);
    assert_eq!((file_ns.len(), op_ns.len()), (RUNS + 1, RUNS + 1), "{ph}");
    let kept_bytes = ((FILES - 1) * BLOCKS * 4096) as f64;
    let figs: Vec<f64> = file_ns[1..]
        .iter()
        .map(|f| kept_bytes * 1e3 / f[1..].iter().sum::<f64>())
        .collect();
    let n = RUNS as f64;
    let mean = figs.iter().sum::<f64>() / n;
    let sd = (figs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let median = median_of(&figs);
    let devs: Vec<f64> = figs.iter().map(|x| (x - median).abs()).collect();
    let mad = median_of(&devs);
    Recomputed {
        mean,
        half: T_975_DF3 * sd / n.sqrt(),
        median,
        min: figs.iter().copied().fold(f64::INFINITY, f64::min),
        max: figs.iter().copied().fold(0.0, f64::max),
        sd,
        mad,
        outliers: devs
            .iter()
            .filter(|&&dv| dv > 0.0 && (mad == 0.0 || dv / mad > 14.826))
            .count(),
        warm: kept_bytes * 1e3 / file_ns[0][1..].iter().sum::<f64>(),
        op_p50: median_of(
            &op_ns[1..]
                .iter()
                .map(|ops| median_of(&ops[BLOCKS..]))
                .collect::<Vec<_>>(),
        ),
        figs,
    }
}

fn check_csv_row(name: &str, csv: &str, want: &Recomputed) {
    let row: Vec<&str> = csv
        .lines()
        .find(|l| l.starts_with(&format!("{name},")))
        .unwrap()
        .split(',')
        .collect();
    let num = |i: usize| row[i].parse::<f64>().unwrap();
    let close = |i: usize, want: f64, what: &str| {
        let got = num(i);
        assert!(
            (got - want).abs() <= 1e-9 * want.abs().max(1.0),
            "{name} {what}: printed {got}, recomputed {want}"
        );
    };
    assert_eq!(row[2], RUNS.to_string());
    close(3, want.mean, "mean");
    close(4, want.mean - want.half, "ci95_low");
    close(5, want.mean + want.half, "ci95_high");
    close(6, want.median, "median");
    close(7, want.min, "min");
    close(8, want.max, "max");
    close(9, want.sd, "stddev");
    close(10, want.mad, "mad");
    assert_eq!(row[11], want.outliers.to_string(), "{name} outliers");
    close(12, want.op_p50, "op_median_ns");
    let cpu = num(13);
    assert!(cpu > 0.0 && cpu <= 1.0, "{name} on_cpu {cpu}");
}

/// The numbers in a phase's warnings, and that each warning is there
/// exactly when its recomputed condition holds (limits from
/// fsprof_bench::warnings: CI over 5%, warm-up 1.25× slower, MAD outliers).
fn check_warnings(name: &str, text: &str, r: &Recomputed) {
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with(&format!("warning: {name}: ")))
        .collect();
    let has = |needle: &str| lines.iter().any(|l| l.contains(needle));
    let rel = r.half / r.mean * 100.0;
    let ci = has("confidence interval");
    assert_eq!(ci, rel > 5.0, "{name}: CI ±{rel:.1}%: {lines:?}");
    if ci {
        assert!(has(&format!("is ±{rel:.1}% of the mean")), "{lines:?}");
    }
    let slower = r.median / r.warm;
    let warm = has("the warm-up run was");
    assert_eq!(
        warm,
        slower >= 1.25,
        "{name}: warm-up {slower:.2}×: {lines:?}"
    );
    if warm {
        assert!(has(&format!("was {slower:.2}× slower")), "{lines:?}");
    }
    let outliers: Vec<&&str> = lines
        .iter()
        .filter(|l| l.contains("is an outlier"))
        .collect();
    assert_eq!(outliers.len(), r.outliers, "{name}: {lines:?}");
    for l in outliers {
        let i: usize = word_after(l, "run ");
        assert!(
            l.contains(&format!("({:.4} MB/s)", r.figs[i - 1])),
            "{name}: {l}"
        );
    }
}

/// The word after the first `marker` in `line`, parsed.
#[track_caller]
fn word_after<T: std::str::FromStr>(line: &str, marker: &str) -> T {
    line.split(marker)
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no number after {marker:?} in {line:?}"))
}

fn check_text_row(name: &str, text: &str, r: &Recomputed) {
    check_warnings(name, text, r);
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("{name} ")))
        .unwrap();
    let want = [
        format!("{:.1} MB/s", r.mean),
        format!("± {:.1} ({:.1}%)", r.half, r.half / r.mean * 100.0),
        format!(" {:.1} ", r.median),
        format!(" {:.1} ", r.min),
        format!(" {:.1} ", r.max),
        format!(" {:.1} ", r.sd),
    ];
    for w in &want {
        assert!(line.contains(w.as_str()), "{name}: {w:?} not in {line:?}");
    }
}

/// The text header's machine line against sysfs, /proc/meminfo and the
/// kernel's release string.
fn check_machine_line(text: &str) {
    let mem_kib: u64 = std::fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .unwrap()
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap();
    let gib = mem_kib as f64 / (1024.0 * 1024.0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let machine = text.lines().find(|l| l.starts_with("machine: ")).unwrap();
    assert!(
        machine.contains(&format!(", {} CPUs, ", online_cpus())),
        "{machine}"
    );
    assert!(
        machine.contains(&format!("{gib:.1} GiB memory")),
        "{machine}"
    );
    assert!(
        machine.contains(&format!("kernel {};", kernel.trim())),
        "{machine}"
    );
    assert!(text.lines().next().unwrap().contains("(tmpfs "), "{text}");
}

/// Every number the CSV and text exports print, recomputed here from the
/// raw per-file and per-op times of the same result (the per-run figure
/// from the bytes of files 2..N and their times; mean, median, min, max,
/// sample stddev, the Student-t interval with a table's t, MAD outliers,
/// the op median over the measured runs' files 2..N), and the machine
/// line against sysfs, /proc/meminfo and the kernel's release string.
#[test]
fn printed_numbers_match_a_recomputation_from_the_raw_samples() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let out = tempfile::tempdir().unwrap();
    for format in ["csv", "text"] {
        let r = out.path().join(format!("{format}.json"));
        let printed = out.path().join(format!("r.{format}"));
        let mut args = SMALL_SPRITE.to_vec();
        // Each -o in its extension's format: the JSON and the table of one run.
        args.extend(["--runs", "4", "--raw-samples"]);
        args.extend(["-o", r.to_str().unwrap(), "-o", printed.to_str().unwrap()]);
        let load_before = loadavg();
        let o = bench(d.path(), &args);
        let load_after = loadavg();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let stdout = std::fs::read_to_string(&printed).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&r).unwrap()).unwrap();
        let phases = v["bench"]["phases"].as_array().unwrap();
        assert_eq!(phases.len(), 5);
        for ph in phases {
            let name = ph["name"].as_str().unwrap();
            let want = recompute(ph);
            if format == "csv" {
                check_csv_row(name, &stdout, &want);
            } else {
                check_text_row(name, &stdout, &want);
            }
        }
        if format == "text" {
            check_machine_line(&stdout);
            // The load average is read once at the start: the value
            // printed is the kernel's before or after (it changes every
            // 5 s; a run takes well under that).
            let busy = stdout.lines().find(|l| l.contains("the load average was"));
            let cpus = online_cpus() as f64;
            if let Some(l) = busy {
                let v: f64 = word_after(l, "was ");
                assert!(
                    [load_before, load_after]
                        .iter()
                        .any(|x| (x - v).abs() < 0.005),
                    "{l}: /proc/loadavg said {load_before} then {load_after}"
                );
                assert!(v > 0.5 * cpus, "{l}");
            } else {
                assert!(load_before.min(load_after) <= 0.5 * cpus, "{stdout}");
            }
        }
    }
}
