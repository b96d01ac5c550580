//! The shim's compiled hot path files every latency in exactly the bucket
//! fsprof-core defines, at every resolution: around every boundary and at
//! pseudo-random values.

use fsprof_core::buckets::MIN_INDEX;
use fsprof_core::{BucketLayout, Resolution};
use fsprof_shim::{install, LoadedShim};
use fsprof_user::clock::ClockParams;
use fsprof_user::rundir::control_bytes;

#[test]
fn shim_buckets_equal_core_buckets() {
    let dir = tempfile::tempdir().unwrap();
    let shim = LoadedShim::load(&install(dir.path()).unwrap()).unwrap();
    for r in Resolution::ALLOWED {
        let layout = BucketLayout::new(Resolution::new(r).unwrap());
        let control = control_bytes(&ClockParams::monotonic(), &layout);
        let mut values: Vec<u64> = vec![1, 2, 3, u64::MAX, u64::MAX - 1];
        for &t in layout.thresholds() {
            values.extend([t.saturating_sub(1), t, t.saturating_add(1)]);
        }
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.push(x >> (x % 64));
        }
        for ns in values.into_iter().filter(|&v| v > 0) {
            let want = layout.index(ns).unwrap() - MIN_INDEX;
            let got = shim
                .bucket_slot(&control, ns)
                .unwrap()
                .expect("a valid control block") as i32;
            assert_eq!(got, want, "r={r} ns={ns}");
        }
    }
}
