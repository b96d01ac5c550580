//! `fsprof check FILE...`: FSprof's consistency check on each profile;
//! exit 1 when one is inconsistent.

use anyhow::Result;
use fsprof_core::check::check_profile;
use fsprof_core::format::read_profile;

use crate::cli::CheckArgs;

pub fn check(a: CheckArgs) -> Result<i32> {
    let mut failed = false;
    for file in &a.files {
        let p = read_profile(file)?;
        let rep = check_profile(&p);
        for n in &rep.notes {
            eprintln!("{}: note: {n}", file.display());
        }
        for e in &rep.errors {
            eprintln!("{}: inconsistent: {e}", file.display());
        }
        if rep.ok() {
            println!(
                "{}: ok ({} op counters consistent)",
                file.display(),
                rep.ops_checked
            );
        } else {
            println!(
                "{}: FAILED ({} inconsistencies)",
                file.display(),
                rep.errors.len()
            );
            failed = true;
        }
    }
    Ok(if failed { 1 } else { 0 })
}
