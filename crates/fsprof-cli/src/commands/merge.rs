//! `fsprof merge`: several profiles into one (fsprof-core's merge).

use anyhow::Result;
use fsprof_core::format::{read_profile, write_profile};
use fsprof_core::merge::merge_profiles;
use fsprof_core::profile::Meta;

use crate::cli::MergeArgs;

pub fn merge(a: MergeArgs) -> Result<i32> {
    let profiles = a
        .files
        .iter()
        .map(|f| read_profile(f))
        .collect::<Result<Vec<_>, _>>()?;
    let base = Meta {
        fsprof_version: env!("CARGO_PKG_VERSION").into(),
        tool: "merge".into(),
        clock: profiles[0].meta.clock.clone(),
        start_time: profiles
            .iter()
            .map(|p| p.meta.start_time.clone())
            .min()
            .unwrap_or_default(),
        ..Default::default()
    };
    let (merged, warnings) = merge_profiles(&profiles, base);
    for w in warnings {
        eprintln!("fsprof: warning: {w}");
    }
    write_profile(&a.output, &merged, a.force)?;
    eprintln!(
        "fsprof: merged {} profiles into {}",
        profiles.len(),
        a.output.display()
    );
    Ok(0)
}
