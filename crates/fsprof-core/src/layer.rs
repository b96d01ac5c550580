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

/// The system calls that waited for block requests of their own thread
/// (`fsprof kernel` with the syscall and block layers): op names as in
/// `syscall`, each call's histogram entry is the time it was charged
/// (docs/profile-format.md, "Layered attribution").
pub const BLOCK_WAIT: &str = "block-wait";

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

/// Whether a layer's histograms hold byte counts rather than latencies.
pub fn holds_bytes(layer: &str) -> bool {
    layer == BLOCK_SIZE
}
