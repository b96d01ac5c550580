//! The suites are a registry, not match arms: each suite is one file under
//! `src/suites/` and one line of `registry!`, no other code of the bench
//! crate or of the command line names one, and a suite the registry has
//! never heard of runs, prints and compares like the others.

use std::io;
use std::path::{Path, PathBuf};

use fsprof_bench::params::{invalid, Kind, Opt, ParamError, Params};
use fsprof_bench::runner::{run_suite, NoProgress};
use fsprof_bench::suites::{mb_per_s, Ctx, Description, PhaseRun, Suite, MB_PER_S};
use fsprof_bench::SUITES;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `(module, type)` of each line of the `registry!` block, in order.
fn registry_lines() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(crate_dir().join("src/suites/mod.rs")).unwrap();
    let block = text
        .split("registry! {")
        .nth(1)
        .and_then(|b| b.split('}').next())
        .expect("src/suites/mod.rs has a registry! block");
    block
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (m, t) = l.trim_end_matches(',').split_once("::").unwrap();
            (m.to_string(), t.to_string())
        })
        .collect()
}

#[test]
fn every_suite_is_one_file_and_one_registry_line() {
    let lines = registry_lines();
    let names: Vec<&str> = SUITES.iter().map(|s| s.name()).collect();
    let modules: Vec<&str> = lines.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(
        modules, names,
        "one registry line per suite, named after it"
    );
    for (module, ty) in &lines {
        let file = crate_dir().join(format!("src/suites/{module}.rs"));
        let text =
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(
            text.contains(&format!("impl Suite for {ty} ")),
            "{} implements Suite for {ty}",
            file.display()
        );
    }
}

/// Code outside `src/suites/` — the runner, the result, the warnings, the
/// exports, the figures, the command line — never names a suite: no
/// `"sprite"`, no `sprite::`, no `Sprite`. Comments may.
#[test]
fn no_code_outside_the_suites_files_names_a_suite() {
    let mut files = Vec::new();
    rust_files(&crate_dir().join("src"), &mut files);
    rust_files(&crate_dir().join("../fsprof-cli/src"), &mut files);
    let suites_dir = crate_dir().join("src/suites");
    let mut found = Vec::new();
    for f in files.iter().filter(|f| !f.starts_with(&suites_dir)) {
        let text = std::fs::read_to_string(f).unwrap();
        // Unit tests (at the end of a file) may run any suite.
        let code_part = text.split("#[cfg(test)]").next().unwrap_or("");
        for (n, line) in code_part.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for (module, ty) in registry_lines() {
                let word = |w: &str| {
                    code.match_indices(w).any(|(i, _)| {
                        let before = code[..i].chars().next_back();
                        let after = code[i + w.len()..].chars().next();
                        !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                            && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
                    })
                };
                if code.contains(&format!("\"{module}\""))
                    || code.contains(&format!("{module}::"))
                    || word(&ty)
                {
                    found.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "suites named outside src/suites/:\n{}",
        found.join("\n")
    );
}

/// An option two suites share means the same in both (the command line
/// shows it once), and no suite option shadows a common one.
#[test]
fn shared_options_are_declared_alike_and_none_shadows_a_common_one() {
    let common = [
        "dir",
        "runs",
        "warmup",
        "cache",
        "drop-caches",
        "seed",
        "resolution",
        "raw-samples",
        "output",
        "force",
        "format",
        "quiet",
        "plot",
        "plot-p50",
    ];
    let mut seen: Vec<(&str, Opt)> = Vec::new();
    for s in SUITES {
        for o in s.options() {
            assert!(!common.contains(&o.name), "{}: --{}", s.name(), o.name);
            if let Some((other, first)) = seen.iter().find(|(_, f)| f.name == o.name) {
                assert_eq!(
                    first,
                    o,
                    "--{} differs between {other} and {}",
                    o.name,
                    s.name()
                );
            }
            seen.push((s.name(), *o));
            // Every default parses as its own kind.
            assert!(
                o.kind.parse(o.default).is_ok(),
                "{}: --{}",
                s.name(),
                o.name
            );
        }
        let p = Params::defaults(s.name(), "/tmp".into());
        assert_eq!(p.options.len(), s.options().len(), "{}", s.name());
        assert!(p.validate().is_ok(), "{}'s defaults are valid", s.name());
    }
}

/// A suite no registry line names: two phases of N reads of a small file.
struct Toy;

const TOY: Description = Description {
    name: "toy",
    about: "reads of one small file",
    options: &[Opt {
        name: "reads",
        help: "Reads per phase",
        value_name: "N",
        kind: Kind::Count,
        default: "64",
    }],
};

impl Suite for Toy {
    fn description(&self) -> &'static Description {
        &TOY
    }
    fn validate(&self, p: &Params) -> Result<(), ParamError> {
        match p.options.get("reads").and_then(|v| v.as_u64()) {
            Some(n) if n > 0 => Ok(()),
            _ => invalid("--reads", "must be at least 1"),
        }
    }
    fn working_set(&self, _: &Params) -> u64 {
        4096
    }
    fn run_once(&self, ctx: &Ctx, _: u64) -> io::Result<Vec<PhaseRun>> {
        let n = ctx.params.options["reads"].as_u64().unwrap_or(1) as usize;
        let path = ctx.scratch.join("toy");
        std::fs::write(&path, [1u8; 4096])?;
        let mut out = Vec::new();
        for name in ["first", "second"] {
            let f = std::fs::File::open(&path)?;
            let mut buf = [0u8; 4096];
            let s = ctx.timing().run(n, |_| {
                std::os::unix::fs::FileExt::read_exact_at(&f, &mut buf, 0)
            })?;
            out.push(PhaseRun {
                name: name.into(),
                unit: MB_PER_S,
                value: mb_per_s(4096 * n as u64, s.wall_ns),
                file_ns: Vec::new(),
                ops: vec![s.op_stats(name, ctx.resolution)],
                op_median_ns: s.summary().map_or(0.0, |m| m.median),
                on_cpu: s.on_cpu(),
                op_ns: Vec::new(),
                cache: None,
                wait: None,
            });
        }
        Ok(out)
    }
}

#[test]
fn a_suite_outside_the_registry_runs_prints_and_compares() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let mut p = Params {
        runs: 3,
        ..Params::defaults("toy", d.path().to_path_buf())
    };
    p.set("reads", 0);
    let e = run_suite(&Toy, &p, vec![], &mut NoProgress, &|| false).unwrap_err();
    assert!(e.to_string().contains("--reads must be at least 1"), "{e}");
    p.set("reads", 64);
    let (profile, r) = run_suite(&Toy, &p, vec![], &mut NoProgress, &|| false).unwrap();
    let ops = &profile.layer("bench").unwrap().ops;
    assert_eq!(ops.len(), 2);
    assert!(ops.iter().all(|o| o.post == 3 * 64), "{ops:?}");
    let text = fsprof_bench::export::text(&r);
    assert!(
        text.contains("fsprof bench toy on ") && text.contains("second"),
        "{text}"
    );
    let c = fsprof_bench::compare::compare(&r, &r);
    assert_eq!(c.phases.len(), 2);
    assert_eq!(c.exit_code(fsprof_analysis::compare::FailOn::Any), 0);
    assert!(std::fs::read_dir(d.path()).unwrap().next().is_none());
}
