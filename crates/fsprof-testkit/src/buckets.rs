//! Values to check a bucket function against `BucketLayout::index` with,
//! wherever it is compiled (the shim's C, the kernel's eBPF).

use fsprof_core::BucketLayout;

/// 0 to 3, the largest values and 2^63, every threshold of `layout` and
/// its neighbours, then `random` pseudo-random values of every magnitude
/// (a fixed xorshift sequence, the same on every run).
pub fn bucket_probe_values(layout: &BucketLayout, random: usize) -> Vec<u64> {
    let mut values: Vec<u64> = vec![0, 1, 2, 3, u64::MAX, u64::MAX - 1, 1 << 63];
    for &t in layout.thresholds() {
        values.extend([t.saturating_sub(1), t, t.saturating_add(1)]);
    }
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..random {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        values.push(x >> (x % 64));
    }
    values
}
