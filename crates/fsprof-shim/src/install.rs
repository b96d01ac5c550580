//! Puts the embedded shim where the dynamic linker can load it.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::{SHIM_HASH, SHIM_SO};

/// Writes the shim to `<base>/fsprof-<uid>/libfsprof_shim-<hash>.so` unless
/// an identical copy is there, and returns its path. The directory must be
/// ours and writable by us alone: whoever can replace the file runs code in
/// every profiled program. It is searchable by all (0711) and the shim
/// readable, so that a workload that drops to another user can still load
/// it (ld.so would otherwise print "cannot be preloaded" on the program's
/// stderr); the shim then finds it cannot join the run and stays idle.
pub fn install(base: &Path) -> io::Result<PathBuf> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    let dir = base.join(format!("fsprof-{uid}"));
    match fs::DirBuilder::new().mode(0o711).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = fs::symlink_metadata(&dir)?;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o022 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is not a private directory owned by uid {uid}; remove it or set TMPDIR elsewhere",
                dir.display()
            ),
        ));
    }
    if meta.mode() & 0o7777 != 0o711 {
        // Created private by an older fsprof: open it for searching only.
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o711))?;
    }
    let path = dir.join(format!("libfsprof_shim-{SHIM_HASH:016x}.so"));
    // The name is the content's hash and only we can write the directory,
    // so a file of the right size is the right file (a partial write never
    // gets this name: it is renamed into place).
    if fs::metadata(&path).is_ok_and(|m| m.len() == SHIM_SO.len() as u64) {
        return Ok(path);
    }
    let tmp = dir.join(format!(".shim-{}.tmp", std::process::id()));
    {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(SHIM_SO)?;
        f.set_permissions(fs::Permissions::from_mode(0o755))?;
    }
    fs::rename(&tmp, &path)?;
    Ok(path)
}
