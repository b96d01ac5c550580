//! The followed process tree of `fsprof kernel -- CMD` with its map made
//! small (`FSPROF_TEST_FOLLOWED_MAX`): processes that exit give their
//! entry back, threads take none, a group leader that exits first leaves
//! its threads followed, and processes the map has no room for are
//! counted and warned about (the program is `followed_tree.c`).

use fsprof_core::format::read_profile;
use fsprof_core::Profile;
use fsprof_testkit::{need_root, under_followed_tree, unfollowed_warnings};

/// Entries of the map in these tests.
const MAP: u32 = 8;

/// `fsprof kernel` of `followed_tree MODE N FILE` with a map of [`MAP`]
/// entries: the profile and fsprof's stderr; the program must succeed.
fn kernel_tree(mode: &str, n: u32) -> (Profile, String) {
    need_root("eBPF");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.json");
    let sub = ["kernel", "--layer", "syscall"];
    let err = under_followed_tree(dir.path(), &sub, &out, (mode, n), MAP);
    (read_profile(&out).unwrap(), err)
}

/// The failed truncates (three a unit of work) in the profile.
fn truncates(p: &Profile) -> (u64, u64) {
    p.layer("syscall")
        .and_then(|l| l.op("truncate"))
        .map_or((0, 0), |o| (o.post, o.errors))
}

/// `followed_tree MODE N` made `units` units of work, all in the profile,
/// and no warning.
fn every_unit_followed(mode: &str, n: u32, units: u64) {
    let (p, err) = kernel_tree(mode, n);
    assert_eq!(truncates(&p), (3 * units, 3 * units), "{err}");
    assert_eq!(unfollowed_warnings(&err), Vec::<&str>::new());
}

/// 40 children one after another, five times the map: each one's entry
/// is removed at its exit, so every child is followed.
#[test]
#[ignore = "needs root"]
fn processes_that_exit_give_their_entry_back() {
    every_unit_followed("seq", 40, 40);
}

/// 20 threads alive at once take no entry (3 children forked while they
/// live are followed), and once the main thread has exited, the threads'
/// calls are still followed.
#[test]
#[ignore = "needs root"]
fn threads_take_no_entry_and_outlive_their_leader() {
    every_unit_followed("threads", 20, 23);
}

/// 20 children alive at once with room for 8 processes: the program and
/// 7 children are followed, the 13 others are counted, warned about and
/// named in the profile's notes.
#[test]
#[ignore = "needs root"]
fn processes_the_map_has_no_room_for_are_counted_and_warned_about() {
    let (p, err) = kernel_tree("wide", 20);
    assert_eq!(truncates(&p), (3 * 7, 3 * 7), "{err}");
    let lines = unfollowed_warnings(&err);
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0]
            .starts_with("fsprof: warning: 13 process(es) of the followed tree were not followed"),
        "{err}"
    );
    assert!(lines[0].contains("(8 entries)"), "{err}");
    let notes: Vec<&String> = p
        .meta
        .notes
        .iter()
        .filter(|n| n.contains("were not followed"))
        .collect();
    assert_eq!(notes.len(), 1, "{:?}", p.meta.notes);
    assert!(notes[0].starts_with("13 process(es)"), "{notes:?}");
}
