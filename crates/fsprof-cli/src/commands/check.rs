//! `fsprof check FILE...`: FSprof's consistency check on each profile;
//! exit 1 when one is inconsistent.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use fsprof_core::check::{check_profile, CheckReport};

use crate::args::TextOrJson;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Profile files
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// How to print the verdicts: a line per file, or a JSON array
    #[arg(long, value_enum, default_value_t = TextOrJson::Text)]
    pub format: TextOrJson,
}

pub fn check(a: CheckArgs) -> Result<i32> {
    if a.files
        .iter()
        .filter(|f| fsprof_capture::is_stdio(f))
        .count()
        > 1
    {
        anyhow::bail!("only one input can be standard input (-)");
    }
    let mut failed = false;
    let mut json = Vec::new();
    for file in &a.files {
        let p = crate::files::read_input(file)?;
        let file = crate::files::name(file);
        let rep = check_profile(&p);
        failed |= !rep.ok();
        match a.format {
            TextOrJson::Text => print_text(&file, &rep),
            TextOrJson::Json => json.push(serde_json::json!({
                "file": file,
                "ok": rep.ok(),
                "ops_checked": rep.ops_checked,
                "inconsistencies": rep.errors,
                "notes": rep.notes,
            })),
        }
    }
    if a.format == TextOrJson::Json {
        crate::files::write_stdout((serde_json::to_string_pretty(&json)? + "\n").as_bytes())?;
    }
    Ok(if failed { 1 } else { 0 })
}

/// Notes and inconsistencies on standard error, the verdict on standard output.
fn print_text(file: &str, rep: &CheckReport) {
    for n in &rep.notes {
        fsprof_sys::diag!(
            "{}: note: {}",
            file,
            fsprof_core::printable::field(&n.to_string())
        );
    }
    for e in &rep.errors {
        fsprof_sys::diag!(
            "{}: inconsistent: {}",
            file,
            fsprof_core::printable::field(&e.to_string())
        );
    }
    if rep.ok() {
        println!("{}: ok ({} op counters consistent)", file, rep.ops_checked);
    } else {
        println!("{}: FAILED ({} inconsistencies)", file, rep.errors.len());
    }
}
