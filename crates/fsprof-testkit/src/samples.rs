//! Fixed profiles of every shape a capture makes, for tests that pin what
//! is rendered of them (report snapshots) or start from them (the fuzz
//! targets' seeds): the user layer with value tables, intervals and
//! processes; the kernel's layers down to block sizes; a FUSE mount's two
//! sides. Nothing in them depends on the machine or the time.

use fsprof_core::layer;
use fsprof_core::profile::{Clock, Interval, Meta, Process, RunInfo};
use fsprof_core::{Correlations, OpStats, Profile, Resolution};

use crate::profiles::{op, profile_layers};

/// An op with calls in two peaks and value tables (request size and seek
/// distance per latency bucket), as the shim records data ops.
pub fn data_op(name: &str, fast: i32, slow: i32) -> OpStats {
    let mut o = op(
        name,
        &[(fast, 900), (fast + 1, 300), (slow, 40), (slow + 1, 10)],
    );
    o.errors = 3;
    o.min_ns = Some(1 << fast);
    o.max_ns = Some(2 << (slow + 1));
    let mut c = Correlations::default();
    for (lat, n) in [(fast, 900u64), (slow, 40)] {
        c.size.add(lat, 12, n);
        c.seek.add(lat, if lat == slow { 20 } else { -2 }, n);
    }
    o.correlations = Some(c);
    o
}

/// Metadata of a capture by `tool` on a fixed host at a fixed time.
pub fn meta(tool: &str) -> Meta {
    Meta {
        fsprof_version: "0.1.0".into(),
        tool: tool.into(),
        command: vec!["sh".into(), "-c".into(), "cat a".into()],
        run: RunInfo {
            host: "testhost".into(),
            kernel: "6.1.0".into(),
            start_time: "2026-01-01T00:00:00.000Z".into(),
            start_unix_ns: 1_767_225_600_000_000_000,
        },
        duration_ns: 3_000_000,
        clock: Clock {
            source: "monotonic".into(),
            tsc_hz: None,
        },
        resolution: Resolution::DEFAULT,
        notes: vec!["a note".into()],
        ..Default::default()
    }
}

/// `fsprof run`'s profile: reads in a fast and a slow peak (with request
/// sizes and seek distances), writes, opens with errors, an fsync, a
/// pipe; three intervals and one process.
pub fn user_profile() -> Profile {
    user_profile_with(data_op("read", 9, 20), data_op("write", 11, 17))
}

/// [`user_profile`] after a change: reads lost their fast peak (a cold
/// cache), writes are as they were.
pub fn user_profile_changed() -> Profile {
    let mut read = op("read", &[(20, 1150), (21, 50)]);
    (read.min_ns, read.max_ns) = (Some(1 << 20), Some(1 << 22));
    user_profile_with(read, data_op("write", 11, 17))
}

fn user_profile_with(read: OpStats, write: OpStats) -> Profile {
    let mut user = profile_layers(&[
        (
            layer::USER,
            vec![
                read,
                write,
                op("openat", &[(12, 80), (14, 5)]),
                op("fsync", &[(22, 4)]),
            ],
        ),
        (layer::USER_NONFILE, vec![op("pipe_read", &[(10, 7)])]),
    ]);
    user.meta = meta("run");
    user.meta.interval_ns = Some(1_000_000);
    user.intervals = (0..3)
        .map(|k| Interval {
            start_ns: k * 1_000_000,
            end_ns: (k + 1) * 1_000_000,
            layers: vec![user.layers[0].clone()],
        })
        .collect();
    user.processes = vec![Process {
        pid: 42,
        ppid: 1,
        exe: "/usr/bin/cat".into(),
        argv: vec!["cat".into(), "a b".into()],
        start_ns: 5,
        layers: vec![user.layers[0].clone()],
    }];
    user
}

/// `fsprof kernel`'s profile: reads through the syscall, file-system and
/// block layers, and the block requests' sizes.
pub fn kernel_profile() -> Profile {
    let mut kernel = profile_layers(&[
        (layer::SYSCALL, vec![op("read", &[(10, 500), (21, 20)])]),
        (layer::FS, vec![op("read", &[(10, 480), (20, 20)])]),
        (layer::BLOCK, vec![op("read", &[(19, 20)])]),
        (layer::BLOCK_SIZE, vec![op("read", &[(12, 15), (17, 5)])]),
    ]);
    kernel.meta = meta("kernel");
    kernel
}

/// `fsprof mount`'s profile: the kernel's FUSE requests and the daemon's
/// time on each.
pub fn mount_profile() -> Profile {
    let mut mount = profile_layers(&[
        (layer::FUSE, vec![op("read", &[(14, 100)])]),
        (layer::FUSEFS, vec![op("READ", &[(13, 100)])]),
    ]);
    mount.meta = meta("mount");
    mount
}

/// Every sample above, and a profile with nothing recorded.
pub fn all() -> Vec<Profile> {
    vec![
        user_profile(),
        user_profile_changed(),
        kernel_profile(),
        mount_profile(),
        Profile::new(meta("run")),
    ]
}
