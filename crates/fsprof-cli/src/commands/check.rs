//! `fsprof check FILE...`: FSprof's consistency check on each profile;
//! exit 1 when one is inconsistent.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use fsprof_core::check::check_profile;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Profile files
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

pub fn check(a: CheckArgs) -> Result<i32> {
    let mut failed = false;
    if a.files
        .iter()
        .filter(|f| fsprof_capture::is_stdio(f))
        .count()
        > 1
    {
        anyhow::bail!("only one input can be standard input (-)");
    }
    for file in &a.files {
        let p = crate::files::read_input(file)?;
        let file = crate::files::name(file);
        let rep = check_profile(&p);
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
            failed = true;
        }
    }
    Ok(if failed { 1 } else { 0 })
}
