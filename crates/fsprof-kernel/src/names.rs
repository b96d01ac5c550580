//! Names for what the programs record: op keys → (layer, op name). The
//! vocabulary itself (syscall, FUSE and block names) is
//! [`fsprof_core::ops`]; this adds what only the running system knows,
//! block device names.

/// Kernel dev_t (major << 20 | minor) → `sda`, `loop3`, or `M:m`.
pub fn block_device(dev: u32) -> String {
    let (major, minor) = (dev >> 20, dev & 0xfffff);
    let uevent = format!("/sys/dev/block/{major}:{minor}/uevent");
    if let Ok(s) = std::fs::read_to_string(uevent) {
        if let Some(n) = s.lines().find_map(|l| l.strip_prefix("DEVNAME=")) {
            return n.to_string();
        }
    }
    format!("{major}:{minor}")
}
