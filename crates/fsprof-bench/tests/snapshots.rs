//! The bench result as a user reads it, pinned: the table, CSV and
//! Markdown of a result, and `compare` of two results. The results are
//! files of a real `fsprof bench metadata --runs 3 --warmup 1` (host name
//! replaced), so every field a run writes is there; nothing here depends
//! on the machine the tests run on. Review changes with `cargo insta
//! review`; a new result format needs the fixtures written again.

use std::path::PathBuf;

use fsprof_bench::result::{read_result, BenchResult};
use fsprof_bench::{compare, export};

fn fixture(name: &str) -> BenchResult {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    read_result(&path).unwrap_or_else(|e| panic!("{e}")).1
}

#[test]
fn bench_text() {
    insta::assert_snapshot!(export::text(&fixture("metadata-a.json")));
}

#[test]
fn bench_csv() {
    insta::assert_snapshot!(export::csv(&fixture("metadata-a.json")));
}

#[test]
fn bench_markdown() {
    insta::assert_snapshot!(export::markdown(&fixture("metadata-a.json")));
}

#[test]
fn bench_compare_text_and_csv() {
    let c = compare::compare(&fixture("metadata-a.json"), &fixture("metadata-b.json"));
    let text = compare::text(&c, "a.json", "b.json");
    insta::assert_snapshot!(format!("{text}\n---\n{}", compare::csv(&c)));
}
