//! The shim's compiled hot path files every latency in exactly the bucket
//! fsprof-core defines, at every resolution: around every boundary and at
//! pseudo-random values; and converts clock ticks to exactly the ns of the
//! 128-bit product (truncated to 64 bits as the counters hold it), so that
//! a faster conversion (docs/benchmarks.md tried a 64-bit one) cannot
//! change a latency unnoticed.

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

#[test]
fn shim_ticks_to_ns_is_the_exact_product() {
    let dir = tempfile::tempdir().unwrap();
    let shim = LoadedShim::load(&install(dir.path()).unwrap()).unwrap();
    let layout = BucketLayout::new(Resolution::new(1).unwrap());
    let shift = fsprof_shim::abi::TICK_SHIFT;
    // Rates of a TSC above and below 1 GHz, the edges of a product that
    // fits in 64 bits, the monotonic clock's 1 tick = 1 ns (mult 2^32) and
    // the largest multiplier the shim accepts.
    let mults: [u64; 7] = [
        (1u64 << 32) / 3,
        1_867_377_085,
        (1u64 << 32) - 1,
        1u64 << 32,
        (1u64 << 32) + 1,
        3u64 << 31,
        1u64 << 48,
    ];
    let mut ticks: Vec<u64> = vec![0, 1, 2, 3, 1000, u64::MAX, u64::MAX - 1];
    for k in [31u32, 32, 33, 40, 63] {
        let p = 1u64 << k;
        ticks.extend([p - 1, p, p + 1]);
    }
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..2000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        ticks.push(x >> (x % 64));
    }
    for mult in mults {
        let mut clock = ClockParams::monotonic();
        clock.kind = fsprof_shim::abi::CLOCK_TSC;
        clock.mult = mult;
        let control = control_bytes(&clock, &layout);
        for &d in &ticks {
            let want = ((d as u128 * mult as u128) >> shift) as u64;
            let got = shim
                .ticks_to_ns(&control, d)
                .unwrap()
                .expect("a valid control block");
            assert_eq!(got, want, "mult={mult} ticks={d}");
        }
    }
}
