//! The bucket code the kernel runs is fsprof's bucket function: run the
//! generated eBPF (BPF_PROG_TEST_RUN) on every threshold, its neighbours and
//! pseudo-random values, at every resolution, and compare with
//! `BucketLayout::index`.

use fsprof_core::{BucketLayout, Resolution};
use fsprof_kernel::progs::{self, Shared, ZERO_SLOT};
use fsprof_kernel::sys::{self, Map, Prog};

#[test]
#[ignore = "needs root"]
fn kernel_buckets_equal_bucket_layout_index() {
    fsprof_testkit::need_root("eBPF");
    for r in Resolution::ALLOWED {
        let layout = BucketLayout::new(Resolution::new(r).unwrap());
        let tv = progs::thresh_value(&layout);
        let thresh =
            Map::create("t", sys::MAP_ARRAY, 4, tv.len(), 1, 0).expect("create threshold map");
        thresh
            .update(&0u32.to_le_bytes(), &tv, sys::BPF_ANY)
            .unwrap();
        let sh = Shared {
            stats_fd: -1,
            sys_stats_fd: -1,
            hist_fd: -1,
            thresh_fd: thresh.fd(),
            on_fd: -1,
            resolution: r,
            by_cgroup: None,
        };
        let prog = Prog::load("bucket_probe", sys::PROG_XDP, &progs::bucket_probe(&sh))
            .unwrap_or_else(|e| panic!("r={r}: load failed: {} {}", e.errno, e.log));
        for v in fsprof_testkit::bucket_probe_values(&layout, 500) {
            let mut pkt = v.to_le_bytes().to_vec();
            pkt.resize(64, 0);
            let got = prog.test_run(&pkt).expect("BPF_PROG_TEST_RUN");
            let want = match layout.index(v) {
                None => ZERO_SLOT,
                Some(i) => (i - fsprof_core::buckets::MIN_INDEX) as u32,
            };
            assert_eq!(
                got, want,
                "r={r} value {v}: kernel slot {got}, fsprof slot {want}"
            );
        }
    }
}
