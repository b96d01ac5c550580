//! Profiles from several hosts merged into one fleet profile with
//! `fsprof merge`, then reported and exported like any other.

use std::path::{Path, PathBuf};

use fsprof_core::format::{read_profile, write_profile};
use fsprof_core::Profile;
use fsprof_testkit::*;

/// Three real runs, each named for a host it stands for, merged into
/// `dir/fleet.json`; returns the inputs and the merged file.
fn merged_fleet(dir: &Path) -> (Vec<(PathBuf, Profile)>, PathBuf) {
    let mut inputs = Vec::new();
    for host in ["web1", "web2", "db1"] {
        let p = record(dir, &format!("{host}.json"), &[]);
        // Each run here is on this machine; give each the name of the host
        // it stands for, as profiles collected across a fleet would have.
        let mut prof = read_profile(&p).unwrap();
        prof.meta.run.host = host.into();
        write_profile(&p, &prof, true).unwrap();
        inputs.push((p, prof));
    }
    let merged = dir.join("fleet.json");
    let o = fsprof()
        .arg("merge")
        .args(inputs.iter().map(|(p, _)| p))
        .arg("-o")
        .arg(&merged)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    (inputs, merged)
}

#[test]
fn merge_profiles_of_several_hosts_then_report_and_export() {
    let dir = tempfile::tempdir().unwrap();
    let (inputs, merged) = merged_fleet(dir.path());
    let m = read_profile(&merged).unwrap();
    let hosts: Vec<&str> = m.meta.merged_from.iter().map(|s| s.host.as_str()).collect();
    assert_eq!(hosts, ["web1", "web2", "db1"]);
    // Counts add up bucket by bucket.
    let user = m.layer("user").unwrap();
    for op in &user.ops {
        let sum: u64 = inputs
            .iter()
            .filter_map(|(_, p)| p.layer("user").and_then(|l| l.op(&op.name)))
            .map(|o| o.post)
            .sum();
        assert_eq!(op.post, sum, "{}", op.name);
    }
    let o = fsprof().arg("check").arg(&merged).output().unwrap();
    assert!(o.status.success(), "{}", stdout(&o));

    // Exports label the aggregate with every host it covers.
    let o = export("prometheus", &merged, None);
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains("host=\"db1+web1+web2\""),
        "{}",
        &text[..400.min(text.len())]
    );

    // The HTML report lists the merged runs.
    let html = dir.path().join("fleet.html");
    let page = html_report(&merged, &html);
    assert!(page.contains("merged from 3 profiles"));
    for h in ["web1", "web2", "db1"] {
        assert!(page.contains(&format!("<td class=\"l\">{h}</td>")), "{h}");
    }
}

/// The merged profile's exports, read by the real parsers.
#[test]
#[ignore = "needs the Python export parsers"]
fn merged_fleet_exports_parse() {
    let py = need_python_parsers();
    let dir = tempfile::tempdir().unwrap();
    let (_, merged) = merged_fleet(dir.path());
    let prom = dir.path().join("fleet.prom");
    let otlp = dir.path().join("fleet.otlp.json");
    for (format, file) in [("prometheus", &prom), ("otlp-json", &otlp)] {
        let o = export(format, &merged, Some(file));
        assert!(o.status.success(), "{}", stderr(&o));
    }
    py_check(&py, "check_prometheus.py", &[&prom, &merged], &[]);
    py_check(&py, "check_otlp.py", &[&otlp, &merged], &[]);
}

/// Issue 26: a merge of many hosts labels its series with a bounded host
/// (the list stays in the profile), and `command` is the program's name
/// unless the command line is asked for.
#[test]
fn fleet_labels_stay_bounded_and_name_programs_not_command_lines() {
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Vec::new();
    for k in 0..40 {
        let mut p = profile_of("user", vec![op("read", &[(10, 3)])]);
        p.meta.run.host = format!("web{k:03}");
        inputs.push(write(dir.path(), &format!("h{k}.json"), &p));
    }
    let merged = dir.path().join("fleet.json");
    let o = fsprof()
        .arg("merge")
        .args(&inputs)
        .arg("-o")
        .arg(&merged)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(read_profile(&merged).unwrap().meta.merged_from.len(), 40);
    let text = String::from_utf8(export("prometheus", &merged, None).stdout).unwrap();
    let host = text
        .split("host=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap();
    assert!(
        host.starts_with("web000+39 more #") && host.len() <= 64,
        "{host}"
    );

    let run = record(dir.path(), "r.json", &[]);
    let program = String::from_utf8(export("prometheus", &run, None).stdout).unwrap();
    assert!(program.contains("command=\"sh\""), "{program}");
    let o = fsprof()
        .args(["export", "--format", "prometheus", "--command-argv"])
        .arg(&run)
        .output()
        .unwrap();
    assert!(stdout(&o).contains("command=\"sh -c "), "{}", stdout(&o));
}
