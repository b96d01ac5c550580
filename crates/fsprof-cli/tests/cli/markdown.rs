//! The project's Markdown (README.md and docs/): every code block closed.
//! The benchmark narratives are long and merged from several branches at
//! once; a rebase that drops one closing fence turns all the prose after
//! it into code, silently, and two such drops cancel out in a count.

use std::path::{Path, PathBuf};

use fsprof_testkit::*;

/// The Markdown files this test reads: README.md and docs/, recursively.
fn markdown_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    let root = workspace();
    let mut files = vec![root.join("README.md")];
    walk(&root.join("docs"), &mut files);
    files.sort();
    files
}

/// What is wrong with the fences of one file, or None: a fence with an
/// info string where a block is open (CommonMark cannot close a block with
/// one, so the block before was left open), a section heading inside a
/// block (bench outputs print `#` and `##` lines, never `###`), or a block
/// still open at the end.
fn fence_problem(text: &str) -> Option<String> {
    let mut open: Option<usize> = None;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let t = line.trim_start();
        if let Some(info) = t.strip_prefix("```") {
            open = match (open, info.trim().is_empty()) {
                (None, _) => Some(n),
                (Some(_), true) => None,
                (Some(at), false) => {
                    return Some(format!(
                        "line {n} opens a block while the one from line {at} is open"
                    ))
                }
            };
        } else if let Some(at) = open {
            if line.starts_with("### ") {
                return Some(format!(
                    "line {n}, a heading, is inside the block opened on line {at}"
                ));
            }
        }
    }
    open.map(|at| format!("the block opened on line {at} is never closed"))
}

#[test]
fn every_code_block_in_the_docs_is_closed() {
    let files = markdown_files();
    assert!(files.len() > 20, "{} Markdown files found", files.len());
    let bad: Vec<String> = files
        .iter()
        .filter_map(|p| {
            let text = std::fs::read_to_string(p).unwrap();
            fence_problem(&text).map(|why| format!("{}: {why}", p.display()))
        })
        .collect();
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn a_dropped_fence_is_found_even_where_two_cancel_out() {
    let ok = "text\n```\n# load 1\n## loop: cat\n```\nmore\n```sh\nls\n```\n";
    assert_eq!(fence_problem(ok), None);
    // The closing fence dropped before the next section's heading.
    let heading = "```\nout\n\n### next\n\n```\nmore out\n```\n";
    assert!(fence_problem(heading).unwrap().contains("line 4"));
    // A block left open, then another opened with its language.
    let info = "```sh\nls\n\ntext\n\n```sh\nls\n```\n";
    assert!(fence_problem(info).unwrap().contains("line 6"));
    assert!(fence_problem("```\nout\n")
        .unwrap()
        .contains("never closed"));
}
