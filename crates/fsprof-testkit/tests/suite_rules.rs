//! Rules the whole test suite keeps, checked on every run.

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
