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
        let values = fsprof_testkit::bucket_probe_values(&layout, 2000);
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
