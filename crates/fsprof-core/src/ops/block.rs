//! Block request kinds: the op names of the `block` and `block-size`
//! layers are `DEVICE:KIND` (`loop3:write`, `vda:flush`).

/// The kinds, in the order of their op ids in `fsprof kernel`'s programs.
pub const KINDS: [&str; 5] = ["read", "write", "flush", "discard", "other"];

/// The kind for anything [`KINDS`] does not name.
pub const OTHER: &str = "other";

/// `DEVICE:KIND`.
pub fn op_name(device: &str, kind: &str) -> String {
    format!("{device}:{kind}")
}

/// The device and kind of a block op name.
pub fn split(op: &str) -> Option<(&str, &str)> {
    op.rsplit_once(':')
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_round_trip() {
        let n = super::op_name("loop3", "write");
        assert_eq!(n, "loop3:write");
        assert_eq!(super::split(&n), Some(("loop3", "write")));
        assert_eq!(super::KINDS.last(), Some(&super::OTHER));
    }
}
