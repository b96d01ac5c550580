//! Rules the whole test suite keeps, checked on every run.

use std::os::unix::fs::PermissionsExt;

use fsprof_testkit::{in_ci, workspace};

/// Tests that need root or programs outside cargo are `#[ignore]`d (see
/// `fsprof_testkit::need`); CI must run them, so under `CI=true` a run
/// that was not started by `./scripts/test-all` (which sets
/// `FSPROF_FULL_SUITE=1` and passes `--run-ignored all`) fails here.
#[test]
fn ci_runs_the_tests_that_need_more_than_cargo() {
    if in_ci() {
        assert_eq!(
            std::env::var("FSPROF_FULL_SUITE").as_deref(),
            Ok("1"),
            "CI=true, but this run leaves out the tests marked #[ignore = \"needs ...\"]: \
             run ./scripts/test-all (cargo nextest run --workspace --run-ignored all)"
        );
    }
}

/// The `fsprof` binary's end-to-end tests are one test binary per
/// subsystem: `crates/fsprof-cli/tests/<subsystem>/main.rs` declaring a
/// module per file beside it (docs/testing.md, "Where a test goes"). A
/// file directly under `tests/` would be a test binary of its own (linked
/// on its own against everything), and a file in a subsystem's directory
/// that its `main.rs` does not declare is never compiled: its tests would
/// silently never run.
#[test]
fn cli_tests_are_one_binary_per_subsystem() {
    let root = workspace();
    let tests = root.join("crates/fsprof-cli/tests");
    let guide = std::fs::read_to_string(root.join("docs/testing.md")).unwrap();
    let mut dirs: Vec<_> = std::fs::read_dir(&tests)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    for dir in &dirs {
        let name = dir.file_name().unwrap().to_string_lossy();
        assert!(
            dir.is_dir(),
            "{} is a test binary of its own: move it into its subsystem's directory \
             (crates/fsprof-cli/tests/<subsystem>/) and declare it there with `mod`",
            dir.display()
        );
        let main = std::fs::read_to_string(dir.join("main.rs"))
            .unwrap_or_else(|e| panic!("{}/main.rs: {e}", dir.display()));
        for file in std::fs::read_dir(dir).unwrap() {
            let file = file.unwrap().path();
            let Some(stem) = file
                .file_stem()
                .filter(|_| file.extension().is_some_and(|x| x == "rs"))
                .map(|s| s.to_string_lossy().into_owned())
            else {
                continue;
            };
            assert!(
                stem == "main" || main.lines().any(|l| l.trim() == format!("mod {stem};")),
                "{} is not declared in {name}/main.rs (add `mod {stem};`), so its tests never run",
                file.display()
            );
        }
        assert!(
            guide.contains(&format!("`tests/{name}/`")),
            "docs/testing.md's \"Where a test goes\" does not name crates/fsprof-cli/tests/{name}/"
        );
    }
    assert!(dirs.len() >= 10, "only {} test binaries found", dirs.len());
}

/// Every crate builds with the workspace's declared minimum Rust
/// (`rust-version`, which clippy's `incompatible_msrv` holds the code to).
#[test]
fn every_crate_inherits_the_workspace_rust_version() {
    let root = workspace();
    let ws = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    assert!(
        ws.lines().any(|l| l.starts_with("rust-version = \"")),
        "the workspace declares no rust-version"
    );
    let mut crates = 0;
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        let manifest = entry.unwrap().path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else {
            continue;
        };
        crates += 1;
        assert!(
            text.lines()
                .any(|l| l.trim() == "rust-version.workspace = true"),
            "{} does not inherit the workspace's rust-version \
             (add `rust-version.workspace = true` to its [package])",
            manifest.display()
        );
    }
    assert!(crates >= 10, "only {crates} crates found");
}

/// The testing manual's "what a fresh clone needs" stays true: the Rust version it
/// names is the one Cargo.toml declares, every Debian package
/// `scripts/test-all` may install is listed there, and CI runs that script
/// unchanged.
#[test]
fn readme_lists_what_a_fresh_clone_needs() {
    let root = workspace();
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
    let (readme, ws, script) = (
        read("docs/testing.md"),
        read("Cargo.toml"),
        read("scripts/test-all"),
    );
    let version = ws
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("the workspace's rust-version");
    let section = readme
        .split("### What a fresh clone needs, command by command")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("docs/testing.md has the fresh-clone section");
    assert!(
        section.contains(&format!("Rust {version} or later")),
        "docs/testing.md's fresh-clone section does not name rust-version {version}"
    );
    // Debian packages: the `program:package` pairs, and the packages
    // installed by a file test (`need+=(package)`).
    let mut packages: Vec<&str> = script
        .split_whitespace()
        .filter_map(|w| w.split_once(':'))
        .filter(|(prog, pkg)| {
            !prog.is_empty()
                && !pkg.is_empty()
                && prog
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
                && pkg
                    .trim_end_matches(';')
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
        .map(|(_, pkg)| pkg.trim_end_matches(';'))
        .collect();
    packages.extend(
        script
            .split("need+=(")
            .skip(1)
            .filter_map(|s| s.split(')').next())
            .filter(|p| !p.contains('"')),
    );
    assert!(
        packages.len() >= 15 && packages.contains(&"strace") && packages.contains(&"chromium"),
        "could not read the packages from scripts/test-all: {packages:?}"
    );
    let words: Vec<&str> = section
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| ",;.()".contains(c)))
        .collect();
    for p in &packages {
        assert!(
            words.contains(p),
            "scripts/test-all installs {p}, docs/testing.md's fresh-clone section does not say so"
        );
    }
    assert!(section.contains("./scripts/test-all") && section.contains("cargo test --workspace"));
    assert!(
        read(".ci/run").contains("scripts/test-all\""),
        ".ci/run no longer runs scripts/test-all"
    );
    let mode = std::fs::metadata(root.join("scripts/test-all")).unwrap();
    assert!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o111 != 0,
        "scripts/test-all is not executable"
    );
}

/// The shape of the workspace (docs/architecture.md, issue 8): what each
/// crate may use. A crate uses only crates below it; a new crate needs a
/// row here saying where it sits. This table is the one place the allowed
/// arrows are written; `docs/architecture.md`'s "uses" column must name
/// exactly the arrows Cargo.toml has.
const SHAPE: &[(&str, &[&str])] = &[
    ("fsprof-core", &[]),
    ("fsprof-sys", &["core"]),
    ("fsprof-capture", &["core", "sys"]),
    ("fsprof-shim", &["core"]),
    // Sources.
    ("fsprof-user", &["core", "sys", "capture", "shim"]),
    ("fsprof-kernel", &["core", "sys", "capture"]),
    ("fsprof-fuse", &["core", "sys", "capture"]),
    (
        "fsprof-trace",
        &["core", "sys", "capture", "shim", "user", "kernel"],
    ),
    // After the capture: computation only, then rendering.
    ("fsprof-analysis", &["core"]),
    ("fsprof-report", &["core", "analysis"]),
    ("fsprof-plot", &["core", "analysis", "report"]),
    ("fsprof-export", &["core", "analysis", "report"]),
    ("fsprof-pull", &["core", "export"]),
    // What fsprof's own measurements measure with (neither a capture nor
    // an analysis): under bench and discover, so that neither uses the other.
    ("fsprof-measure", &["core", "sys"]),
    // Subsystems on top of both.
    (
        "fsprof-bench",
        &[
            "core", "sys", "capture", "measure", "analysis", "report", "plot",
        ],
    ),
    (
        "fsprof-discover",
        &[
            "core", "sys", "capture", "measure", "analysis", "report", "plot",
        ],
    ),
    (
        "fsprof-replay",
        &["core", "sys", "capture", "analysis", "report", "trace"],
    ),
    (
        "fsprof-agent",
        &["core", "sys", "capture", "kernel", "export"],
    ),
    // Tests only: what the test helpers build (profiles, traces).
    ("fsprof-testkit", &["core", "trace"]),
    // Tests only: a fuzz target per reader of outside bytes, and the
    // renderings of what they read.
    (
        "fsprof-fuzz",
        &[
            "core", "sys", "shim", "user", "kernel", "trace", "analysis", "report", "plot",
            "export", "testkit",
        ],
    ),
];

/// Every crate's dependencies on other fsprof crates (`cargo metadata`,
/// normal and build dependencies) stay within [`SHAPE`], and the
/// architecture page's "uses" column says what they are.
#[test]
fn crate_dependencies_follow_the_shape() {
    let root = workspace();
    let out = fsprof_testkit::succeeds(
        std::process::Command::new(option_env!("CARGO").unwrap_or("cargo"))
            .args([
                "metadata",
                "--format-version",
                "1",
                "--no-deps",
                "--offline",
            ])
            .current_dir(&root),
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let page = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    // The page's picture: a crate sits on a row above every crate it uses.
    let picture = page
        .split("## Crates and their arrows")
        .nth(1)
        .and_then(|s| s.split("```").nth(1))
        .expect("docs/architecture.md has the crates picture");
    let row_of = |krate: &str| {
        picture
            .lines()
            .position(|l| {
                l.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                    .any(|w| w == krate)
            })
            .unwrap_or_else(|| panic!("the picture in docs/architecture.md does not show {krate}"))
    };
    let mut seen = 0;
    for pkg in meta["packages"].as_array().unwrap() {
        let name = pkg["name"].as_str().unwrap();
        let deps: std::collections::BTreeSet<&str> = pkg["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["kind"].as_str() != Some("dev"))
            .filter_map(|d| d["name"].as_str()?.strip_prefix("fsprof-"))
            .collect();
        let pictured = if name == "fsprof" { "fsprof-cli" } else { name };
        for d in &deps {
            assert!(
                row_of(pictured) < row_of(&format!("fsprof-{d}")),
                "{pictured} uses fsprof-{d}, but the picture in docs/architecture.md does not show it above"
            );
        }
        if name == "fsprof" {
            // The binary (fsprof-cli) is the top: it may use any library,
            // never the test kit.
            assert!(
                !deps.contains("testkit"),
                "the fsprof binary uses fsprof-testkit"
            );
            continue;
        }
        seen += 1;
        let allowed = SHAPE
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| {
                panic!("{name} is not in SHAPE (crates/fsprof-testkit/tests/suite_rules.rs): add it where it sits")
            })
            .1;
        for d in &deps {
            assert!(
                allowed.contains(d),
                "{name} uses fsprof-{d}, which the shape does not allow it (allowed: {allowed:?}); \
                 an upward arrow means the code belongs in a lower crate"
            );
        }
        // The page's table row: | `fsprof-x` | what it is | uses |
        let row = page
            .lines()
            .find(|l| l.starts_with(&format!("| `{name}` |")))
            .unwrap_or_else(|| panic!("docs/architecture.md has no table row for {name}"));
        let uses = row.trim_end_matches('|').rsplit('|').next().unwrap().trim();
        let documented: std::collections::BTreeSet<&str> = if uses == "—" {
            Default::default()
        } else {
            uses.split(", ").collect()
        };
        assert_eq!(
            documented, deps,
            "docs/architecture.md says {name} uses {documented:?}; Cargo.toml says {deps:?}"
        );
    }
    assert_eq!(
        seen,
        SHAPE.len(),
        "a crate of SHAPE is not in the workspace"
    );
}

/// `./scripts/test-all` runs the same tests the same way on a laptop and
/// under CI=true: every test, none skipped after a first failure (nextest
/// stops at the first by default; 89 run and 486 not run was what a
/// developer saw). Run with stand-ins for `id` (root) and `cargo` (which
/// records its arguments), so nothing is installed, linted or built.
#[test]
fn test_all_runs_everything_in_and_out_of_ci() {
    let fake = tempfile::tempdir().unwrap();
    let log = fake.path().join("cargo.log");
    let script = |name: &str, body: &str| {
        let p = fake.path().join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    script("id", "echo 0");
    script(
        "cargo",
        r#"if [ "$1" = metadata ]; then echo '{"target_directory": "/nonexistent"}'; exit 0; fi
echo "$*" >> "$FAKE_CARGO_LOG""#,
    );
    let path = format!(
        "{}:{}",
        fake.path().display(),
        std::env::var("PATH").unwrap()
    );
    let mut runs = Vec::new();
    for ci in [None, Some("true")] {
        let _ = std::fs::remove_file(&log);
        let mut c = std::process::Command::new(workspace().join("scripts/test-all"));
        c.args(["--no-install", "--no-lint", "-E", "test(x)"])
            .env("PATH", &path)
            .env("FAKE_CARGO_LOG", &log)
            .env_remove("CI");
        if let Some(v) = ci {
            c.env("CI", v);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{o:?}");
        // The nextest run (test-all also builds fsprof to probe fentry).
        let logged = std::fs::read_to_string(&log).unwrap();
        let nextest = logged.lines().find(|l| l.starts_with("nextest "));
        runs.push(nextest.unwrap_or(&logged).to_string());
    }
    assert_eq!(runs[0], runs[1], "test-all runs differently under CI=true");
    assert!(
        runs[0].starts_with("nextest run --workspace --run-ignored all"),
        "{}",
        runs[0]
    );
    assert!(
        runs[0].contains("--no-fail-fast"),
        "stops at the first failure: {}",
        runs[0]
    );
    // The caller's arguments, then the name filters that leave out what
    // this machine cannot run: here fentry, since the stand-in cargo built
    // no fsprof to probe it with.
    let (caller, skips) = runs[0].split_once(" -- --skip ").unwrap_or((&runs[0], ""));
    assert!(caller.trim_end().ends_with("-E test(x)"), "{}", runs[0]);
    assert!(skips.contains("needs_fentry::"), "{}", runs[0]);
}

/// Every machine property a test can need (`need::Machine`) is probed by
/// `scripts/test-all`, which leaves out the tests in its module where the
/// machine lacks it; and every test file that needs one has such a module,
/// so that the name filter finds its tests.
#[test]
fn machine_properties_are_probed_and_their_tests_named_for_them() {
    use fsprof_testkit::Machine;
    let root = workspace();
    let script = std::fs::read_to_string(root.join("scripts/test-all")).unwrap();
    for m in Machine::ALL {
        assert!(
            script.contains(&format!("lacks+=({}", m.module()))
                || script.contains(&format!(" {})", m.module())),
            "scripts/test-all never leaves out {}",
            m.module()
        );
    }
    let variant = |m: Machine| format!("Machine::{m:?}");
    let mut files = vec![root.join("crates")];
    let mut users = 0;
    while let Some(dir) = files.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() && !path.ends_with("target") {
                files.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") || path.ends_with("need.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for m in Machine::ALL {
                if text.contains(&format!("{}, ", variant(m)))
                    || text.contains(&format!("{},\n", variant(m)))
                {
                    users += 1;
                    assert!(
                        text.contains(&format!("mod {} {{", m.module())),
                        "{} needs {m:?} outside a `mod {}`",
                        path.display(),
                        m.module()
                    );
                }
            }
        }
    }
    assert!(users >= 4, "only {users} uses of need_machine found");
}

/// No non-test function is over 100 lines, counted from its `fn` line to
/// its closing brace, comments included (`scripts/long-functions`, which
/// also reads the shim's C); clippy's too_many_lines counts code lines
/// only, so a long function with long comments would pass it.
#[test]
fn no_function_is_over_100_lines() {
    let root = workspace();
    let out = std::process::Command::new("python3")
        .arg(root.join("scripts/long-functions"))
        .arg(&root)
        .arg("100")
        .output()
        .expect("python3 runs scripts/long-functions");
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && listed.trim().is_empty(),
        "functions over 100 lines (split them where a name explains a part):\n{listed}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
