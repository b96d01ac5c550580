//! Every fuzz target for its budget of cases (see `fsprof_fuzz`): no
//! panic, a one-line error, and no more memory than the input warrants.

#[global_allocator]
static ALLOC: fsprof_fuzz::alloc::Counting = fsprof_fuzz::alloc::Counting;

use fsprof_fuzz::targets;

macro_rules! fuzz {
    ($($test:ident => $target:expr,)*) => {
        $(
            #[test]
            fn $test() {
                fsprof_fuzz::run(&$target);
            }
        )*
    };
}

fuzz! {
    profile_files_load_and_render => targets::PROFILE,
    trace_files_read_print_and_compile => targets::trace::TARGET,
    trace_records_decode => targets::codec::TARGET,
    shim_chunk_files_parse => targets::chunks::TARGET,
    shim_counter_files_read => targets::counters::TARGET,
    strace_logs_import => targets::imports::STRACE,
    fio_iologs_import => targets::imports::FIO,
    kernel_btf_parses => targets::btf::TARGET,
    replay_files_read => targets::replay::TARGET,
    calibration_files_load_and_label => targets::files::CALIBRATION,
    mountinfo_parses => targets::files::MOUNTINFO,
}

/// Every target runs here, and cargo-fuzz has a target of the same name
/// calling the same check.
#[test]
fn every_target_is_tested_here_and_under_cargo_fuzz() {
    let here = include_str!("fuzz.rs");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/fuzz_targets");
    for t in targets::all() {
        let file = dir.join(format!("{}.rs", t.name));
        let src = std::fs::read_to_string(&file).unwrap_or_else(|e| {
            panic!(
                "no cargo-fuzz target for {}: {}: {e}",
                t.name,
                file.display()
            )
        });
        assert!(src.contains("fsprof_fuzz::targets::"), "{}", file.display());
    }
    let tests = here
        .lines()
        .filter(|l| l.contains(" => targets::") && l.ends_with(','))
        .count();
    assert_eq!(tests, targets::all().len(), "a target without a test here");
}

/// The memory budget catches what it is for: a reader that allocates what
/// a length field claims.
#[test]
fn the_memory_budget_catches_a_trusted_length() {
    let (_, peak) = fsprof_fuzz::alloc::measure(|| std::hint::black_box(vec![1u8; 200 << 20]));
    assert!(peak > fsprof_fuzz::engine::memory_budget(1000), "{peak}");
}
