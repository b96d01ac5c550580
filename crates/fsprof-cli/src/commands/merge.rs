//! `fsprof merge`: several profiles into one (fsprof-core's merge).

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use fsprof_core::format::to_json;
use fsprof_core::merge::merge_profiles;
use fsprof_core::profile::{Meta, RunInfo};

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Profiles to merge
    #[arg(required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Where to write the merged profile
    #[arg(short, long, value_name = "FILE", required = true)]
    pub output: PathBuf,
    /// Replace FILE if it exists
    #[arg(short, long)]
    pub force: bool,
}

pub fn merge(a: MergeArgs) -> Result<i32> {
    crate::files::check_output(Some(&a.output), a.force)?;
    let profiles = crate::files::read_inputs(&a.files)?;
    let base = Meta {
        fsprof_version: env!("CARGO_PKG_VERSION").into(),
        tool: "merge".into(),
        clock: profiles[0].meta.clock.clone(),
        run: RunInfo {
            start_time: profiles
                .iter()
                .map(|p| p.meta.run.start_time.clone())
                .min()
                .unwrap_or_default(),
            ..Default::default()
        },
        ..Default::default()
    };
    let (merged, warnings) = merge_profiles(&profiles, base);
    for w in warnings {
        fsprof_sys::diag!("fsprof: warning: {w}");
    }
    crate::files::write_output(to_json(&merged).as_bytes(), Some(&a.output), a.force)?;
    fsprof_sys::diag!("fsprof: merged {} profiles", profiles.len());
    Ok(0)
}
