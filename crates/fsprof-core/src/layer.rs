//! The layer names fsprof's capture commands produce (see
//! `docs/profile-format.md`, "Layers and op names"). Other names (e.g. one
//! per file system) are allowed; these are the ones fsprof itself writes.

/// libc entry points, timed by the LD_PRELOAD shim (`fsprof run`).
pub const USER: &str = "user";
/// The same entry points called on descriptors that are not files (pipes,
/// sockets, terminals and other devices, eventfd, io_uring ...), kept out
/// of the file-system ops: ops named `<class>_<op>` (`pipe_read`). Reports
/// show it only when asked.
pub const USER_NONFILE: &str = "user-nonfile";
/// System calls, timed in the kernel (`fsprof kernel`).
pub const SYSCALL: &str = "syscall";
/// VFS / file-system operations (`fsprof kernel`).
pub const FS: &str = "fs";
/// Block requests, issue to completion (`fsprof kernel`).
pub const BLOCK: &str = "block";
/// The sizes of the `block` layer's requests: the same op names, but the
/// histograms count **bytes** and `total_ns` is the total of bytes.
pub const BLOCK_SIZE: &str = "block-size";
/// FUSE requests as the kernel sees them, `fuse_request_send` to
/// `fuse_request_end` (`fsprof kernel`), the FUSE server's time included.
pub const FUSE: &str = "fuse";
/// Operations served by fsprof's own FUSE pass-through file system
/// (`fsprof mount`), timed inside the daemon. Not `fuse`: that name is the
/// kernel's view of the same requests, and one profile can hold both.
pub const FUSEFS: &str = "fusefs";

/// The system calls that slept uninterruptibly while block I/O completed
/// (`fsprof kernel` with the syscall and block layers): op names as in
/// `syscall`, each call's histogram entry is the time it was charged
/// (docs/profile-format.md, "Layered attribution").
pub const BLOCK_WAIT: &str = "block-wait";

/// Latencies of fsprof's own timed workloads rather than of another
/// program's calls (`fsprof bench`: an op per phase, e.g. `stat_seq`).
pub const BENCH: &str = "bench";
/// Read and write latencies at file offsets, timed by `fsprof discover`
/// while it infers a file system's parameters.
pub const DISCOVER: &str = "discover";

/// The layers of fsprof's own measurements (`bench`, `discover`): not in
/// [`ALL`], which holds the layers of a captured program's work.
pub const MEASURED: [&str; 2] = [BENCH, DISCOVER];

/// Every layer above, from the program down to the device.
pub const ALL: [&str; 9] = [
    USER,
    USER_NONFILE,
    SYSCALL,
    FUSE,
    FUSEFS,
    FS,
    BLOCK,
    BLOCK_SIZE,
    BLOCK_WAIT,
];

/// Layers a report leaves out unless they are named.
pub fn shown_by_default(name: &str) -> bool {
    name != USER_NONFILE
}

/// Whether a layer records every task's work whatever the profile's target:
/// block requests are issued from plugs, kworkers and interrupts, not by
/// the task that caused them, so they cannot be filtered by task.
pub fn system_wide(layer: &str) -> bool {
    layer == BLOCK || layer == BLOCK_SIZE
}

/// What one entry of a layer is: a block or FUSE request is not a call
/// of the program's (one call may make several, or none), and a figure
/// that says "time in calls" of the block layer misleads.
pub fn entries(layer: &str) -> &'static str {
    match layer {
        BLOCK | BLOCK_SIZE | FUSE => "requests",
        _ => "calls",
    }
}

/// Whether a layer's histograms hold byte counts rather than latencies.
pub fn holds_bytes(layer: &str) -> bool {
    layer == BLOCK_SIZE
}

/// What a layer's histogram values, totals and quantiles count: every
/// renderer prints a layer's numbers in its unit (a `block-size` total is
/// "1 MiB", never "1.05ms").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    /// Nanoseconds of latency.
    #[default]
    Ns,
    /// Bytes.
    Bytes,
}

impl Unit {
    /// The unit of `layer`'s values.
    pub fn of(layer: &str) -> Unit {
        if holds_bytes(layer) {
            Unit::Bytes
        } else {
            Unit::Ns
        }
    }

    /// `4.20ms` or `64 KiB`.
    pub fn format(self, v: f64) -> String {
        match self {
            Unit::Ns => crate::units::format_ns(v),
            Unit::Bytes => crate::units::format_bytes(v),
        }
    }

    /// The symbol in machine-readable outputs: `ns` or `bytes`.
    pub fn symbol(self) -> &'static str {
        match self {
            Unit::Ns => "ns",
            Unit::Bytes => "bytes",
        }
    }

    /// What the values are, as a column heading: `latency` or `size`.
    pub fn quantity(self) -> &'static str {
        match self {
            Unit::Ns => "latency",
            Unit::Bytes => "size",
        }
    }

    /// What the total of the values is, after a count of calls: `in
    /// calls` (time spent in them) or `in all` (bytes moved).
    pub fn total_phrase(self) -> &'static str {
        match self {
            Unit::Ns => "in calls",
            Unit::Bytes => "in all",
        }
    }
}

#[cfg(test)]
mod unit_tests {
    use super::*;

    #[test]
    fn byte_layers_print_bytes_and_time_layers_time() {
        assert_eq!(Unit::of(BLOCK_SIZE).format(65536.0), "64 KiB");
        assert_eq!(Unit::of(BLOCK).format(65536.0), "65.5µs");
        assert_eq!(Unit::of(USER).symbol(), "ns");
        assert_eq!(
            serde_json::to_string(&Unit::of(BLOCK_SIZE)).unwrap(),
            "\"bytes\""
        );
    }
}
