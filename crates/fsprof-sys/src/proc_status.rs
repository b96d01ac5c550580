//! `/proc/<pid>/status`: a process's credentials and capabilities as the
//! kernel states them, read in one place (the kernel source checks its own
//! capabilities before bpf(2); the FUSE daemon takes on a caller's
//! supplementary groups).

use std::io;

/// The text of one `/proc/<pid>/status`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcStatus(String);

impl ProcStatus {
    /// This process's status.
    pub fn of_self() -> io::Result<ProcStatus> {
        std::fs::read_to_string("/proc/self/status").map(ProcStatus)
    }

    /// Process `pid`'s status (gone or hidden: the error says which).
    pub fn of(pid: u32) -> io::Result<ProcStatus> {
        std::fs::read_to_string(format!("/proc/{pid}/status")).map(ProcStatus)
    }

    /// A status text read elsewhere.
    pub fn parse(text: &str) -> ProcStatus {
        ProcStatus(text.to_string())
    }

    /// The value of `key` (`Groups`, `CapEff`, ...), trimmed.
    pub fn field(&self, key: &str) -> Option<&str> {
        crate::host::proc_field(&self.0, key)
    }

    /// Supplementary group ids (`Groups:`); `None` when the line is
    /// missing or malformed.
    pub fn groups(&self) -> Option<Vec<libc::gid_t>> {
        let line = self.0.lines().find_map(|l| l.strip_prefix("Groups:"))?;
        line.split_whitespace().map(|g| g.parse().ok()).collect()
    }

    /// The effective capability set (`CapEff:`, hexadecimal).
    pub fn effective_caps(&self) -> Option<u64> {
        u64::from_str_radix(self.field("CapEff")?, 16).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_and_capabilities_are_read_from_the_text() {
        let s = ProcStatus::parse(
            "Name:\tcat\nUid:\t1000\t1000\t1000\t1000\nGroups:\t4 24 1000 \nCapEff:\t000001ffffffffff\n",
        );
        assert_eq!(s.groups(), Some(vec![4, 24, 1000]));
        assert_eq!(s.effective_caps(), Some(0x1ff_ffff_ffff));
        assert_eq!(s.field("Name"), Some("cat"));
        assert_eq!(ProcStatus::parse("Groups:\t\n").groups(), Some(vec![]));
        assert_eq!(ProcStatus::parse("Groups:\tx\n").groups(), None);
        assert_eq!(ProcStatus::parse("Name:\tcat\n").groups(), None);
        assert_eq!(ProcStatus::parse("CapEff:\tzz\n").effective_caps(), None);
    }

    #[test]
    fn this_process_and_pid_1_have_a_status() {
        let me = ProcStatus::of_self().unwrap();
        assert!(me.groups().is_some() && me.effective_caps().is_some());
        assert_eq!(
            ProcStatus::of(std::process::id()).unwrap().field("Name"),
            me.field("Name")
        );
        assert!(ProcStatus::of(u32::MAX).is_err());
    }
}
