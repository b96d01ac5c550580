//! A cgroup's path as a label a person can read and a monitoring system
//! can afford: the systemd unit, the container, or the Kubernetes pod it
//! stands for, at a configurable depth.
//!
//! The label is made from the path alone, while the cgroup exists (the
//! agent gets the path from `cgroup_mkdir` or /sys/fs/cgroup), so it never
//! depends on an id that can no longer be looked up.

use serde::Deserialize;

/// Longest label value; longer paths keep their end (the part that tells
/// cgroups apart).
pub const MAX_LABEL: usize = 128;

/// How paths become labels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The unit, container or pod the (cut) path names; the path when it
    /// names none of them.
    #[default]
    Auto,
    /// The (cut) path itself.
    Path,
}

/// Turns cgroup paths (below the v2 root: `/system.slice/nginx.service`)
/// into label values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Labeler {
    pub mode: Mode,
    /// Keep this many path components (0: all): `2` files everything in
    /// `/kubepods.slice/kubepods-burstable.slice/...` under the QoS slice,
    /// `3` under its pod.
    pub depth: usize,
}

impl Labeler {
    /// The label of the cgroup at `path`.
    pub fn label(&self, path: &str) -> String {
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        let kept = match self.depth {
            0 => &parts[..],
            d => &parts[..d.min(parts.len())],
        };
        let label = match self.mode {
            Mode::Path => format!("/{}", kept.join("/")),
            Mode::Auto => readable(kept),
        };
        bounded(label)
    }
}

/// The label of a path cut to `parts`, by its last component: a
/// container, a pod, a systemd unit, else the path.
fn readable(parts: &[&str]) -> String {
    let Some(last) = parts.last() else {
        return "/".into();
    };
    if let Some(id) = container_id(last) {
        return format!("container:{}", &id[..12]);
    }
    if let Some(uid) = pod_uid(last) {
        return format!("pod:{uid}");
    }
    const UNITS: [&str; 6] = [".service", ".scope", ".slice", ".socket", ".mount", ".swap"];
    if UNITS.iter().any(|u| last.ends_with(u)) {
        return (*last).to_string();
    }
    format!("/{}", parts.join("/"))
}

/// The 64-hex-digit id of a container's cgroup: `docker-<id>.scope`,
/// `cri-containerd-<id>.scope`, `crio-<id>.scope`, `libpod-<id>.scope`
/// (systemd driver) or a bare `<id>` (cgroupfs driver).
fn container_id(name: &str) -> Option<&str> {
    let stem = name.strip_suffix(".scope").unwrap_or(name);
    let id = ["docker-", "cri-containerd-", "crio-", "libpod-"]
        .iter()
        .find_map(|p| stem.strip_prefix(p))
        .unwrap_or(stem);
    (id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit())).then_some(id)
}

/// The pod UID of a pod's cgroup: `kubepods-<qos>-pod<uid>.slice` with
/// the UID's dashes written as underscores (systemd driver), or
/// `pod<uid>` (cgroupfs driver).
fn pod_uid(name: &str) -> Option<String> {
    let stem = name.strip_suffix(".slice").unwrap_or(name);
    let at = stem.rfind("pod")?;
    let before = &stem[..at];
    if !(before.is_empty() || before.starts_with("kubepods") && before.ends_with('-')) {
        return None;
    }
    let uid = stem[at + 3..].replace('_', "-");
    let ok = uid.len() == 36
        && uid.bytes().enumerate().all(|(i, b)| {
            matches!(i, 8 | 13 | 18 | 23) == (b == b'-') && (b == b'-' || b.is_ascii_hexdigit())
        });
    ok.then_some(uid)
}

/// Cuts a label to [`MAX_LABEL`] bytes, keeping its end.
fn bounded(label: String) -> String {
    if label.len() <= MAX_LABEL {
        return label;
    }
    let mut start = label.len() - (MAX_LABEL - 3);
    while !label.is_char_boundary(start) {
        start += 1;
    }
    format!("...{}", &label[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    const POD: &str = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod5d5c3e8e_0f4a_4b9a_8b3d_1f2e3d4c5b6a.slice";
    const CTR: &str =
        "cri-containerd-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope";

    fn auto(depth: usize) -> Labeler {
        Labeler {
            mode: Mode::Auto,
            depth,
        }
    }

    #[test]
    fn units_containers_and_pods_are_named_by_what_they_are() {
        let l = auto(0);
        assert_eq!(l.label("/system.slice/nginx.service"), "nginx.service");
        assert_eq!(
            l.label("/user.slice/user-1000.slice/session-3.scope"),
            "session-3.scope"
        );
        assert_eq!(l.label(&format!("{POD}/{CTR}")), "container:0123456789ab");
        assert_eq!(l.label(POD), "pod:5d5c3e8e-0f4a-4b9a-8b3d-1f2e3d4c5b6a");
        assert_eq!(
            l.label("/kubepods/besteffort/pod5d5c3e8e-0f4a-4b9a-8b3d-1f2e3d4c5b6a"),
            "pod:5d5c3e8e-0f4a-4b9a-8b3d-1f2e3d4c5b6a"
        );
        assert_eq!(
            l.label("/docker/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"),
            "container:0123456789ab"
        );
        assert_eq!(l.label("/"), "/");
        assert_eq!(l.label("/batch/job-7"), "/batch/job-7");
        // Near misses stay paths.
        assert_eq!(l.label("/podcast"), "/podcast");
        assert_eq!(l.label("/docker-abc.scope"), "docker-abc.scope");
    }

    #[test]
    fn depth_files_a_cgroup_under_its_ancestor() {
        let path = format!("{POD}/{CTR}");
        assert_eq!(auto(2).label(&path), "kubepods-burstable.slice");
        assert_eq!(
            auto(3).label(&path),
            "pod:5d5c3e8e-0f4a-4b9a-8b3d-1f2e3d4c5b6a"
        );
        assert_eq!(auto(1).label("/system.slice/nginx.service"), "system.slice");
        let p = Labeler {
            mode: Mode::Path,
            depth: 2,
        };
        assert_eq!(p.label("/a/b/c"), "/a/b");
        assert_eq!(p.label("/a"), "/a");
    }

    #[test]
    fn long_paths_keep_their_end() {
        let long = format!("/{}", "x".repeat(300));
        let l = auto(0).label(&long);
        assert_eq!(l.len(), MAX_LABEL);
        assert!(l.starts_with("...x"));
    }
}
