//! Well-formed inputs for the targets, written by fsprof's own writers
//! (profiles by `fsprof_core::format`, traces by `TraceWriter`, replay
//! files by `fsprof compile`), so that edits start from what real files
//! look like; and hostile ones that no writer makes but a reader must
//! take. `cargo run -p fsprof-fuzz --example corpus DIR` writes them as
//! cargo-fuzz's starting corpus.

mod profiles;
mod shim;
mod traces;

pub use profiles::{calibration_files, hostile_profiles, profile_files, profiles};
pub use shim::{chunk_files, counter_files, COUNTER_BUCKETS};
pub use traces::{record_blocks, record_count_bomb, records, replay_files, trace_files};

/// BTF blobs: functions of each return kind and a struct with an
/// anonymous union and an enum, as `fsprof_kernel::btf`'s tests build them.
pub fn btf_blobs() -> Vec<Vec<u8>> {
    use fsprof_kernel::btf::{blob, synthetic};
    let funcs = synthetic(&[
        ("vfs_read", 4, "long"),
        ("iterate_dir", 2, "int"),
        ("lookup_fast", 1, "ptr"),
        ("noop", 0, "void"),
        ("by_value", 2, "int+struct"),
    ]);
    // struct request { int a; union { void *p; long l; }; long len; } and
    // enum { OP_READ = 0, OP_FLUSH = 2 }: kinds 1 int, 2 ptr, 4 struct,
    // 5 union, 6 enum.
    let strs = b"\0request\0a\0p\0l\0len\0OP_READ\0OP_FLUSH\0".to_vec();
    let off = |name: &str| {
        let pat = [name.as_bytes(), b"\0"].concat();
        (1..strs.len())
            .find(|&i| strs[i - 1] == 0 && strs[i..].starts_with(&pat))
            .expect("a name of the table") as u32
    };
    let words: Vec<u32> = [
        vec![0, 1 << 24, 4, 32],
        vec![0, 1 << 24, 8, 64],
        vec![0, 2 << 24, 0],
        vec![0, 5 << 24 | 2, 8],
        vec![off("p"), 3, 0],
        vec![off("l"), 2, 0],
        vec![off("request"), 4 << 24 | 3, 24],
        vec![off("a"), 1, 0],
        vec![0, 4, 64],
        vec![off("len"), 2, 128],
        vec![0, 6 << 24 | 2, 4],
        vec![off("OP_READ"), 0],
        vec![off("OP_FLUSH"), 2],
    ]
    .concat();
    let types: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    vec![funcs, blob(&types, &strs)]
}
