//! The directory a discovery measures in: the file system under it (type,
//! block size as `statfs` states it, free space) and the mount it belongs
//! to are fsprof-measure's [`Target`]; here is the scratch directory the
//! measurements create their files in and remove afterwards.

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

pub(crate) use fsprof_measure::target::cpath;
pub use fsprof_measure::target::{magic, MountEntry, Target};

use crate::DiscoverError;

/// A private directory under the target for the measurements' files,
/// removed with everything in it when dropped.
#[derive(Debug)]
pub struct Scratch {
    path: PathBuf,
}

impl Scratch {
    /// Creates `DIR/.fsprof-discover-<pid>-<n>` (mode 0700); a directory
    /// fsprof may not write in is [`DiscoverError::NotWritable`].
    pub fn create(dir: &Path) -> Result<Scratch, DiscoverError> {
        let pid = std::process::id();
        for n in 0..1000 {
            let path = dir.join(format!(".fsprof-discover-{pid}-{n}"));
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(Scratch { path }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(source) => {
                    return Err(DiscoverError::NotWritable {
                        dir: dir.to_path_buf(),
                        source,
                    })
                }
            }
        }
        Err(DiscoverError::NotWritable {
            dir: dir.to_path_buf(),
            source: io::Error::new(
                io::ErrorKind::AlreadyExists,
                "no free scratch directory name",
            ),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A file name in the scratch directory.
    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn scratch_directories_are_private_and_removed() {
        let d = tempfile::tempdir().unwrap();
        let path = {
            let s = Scratch::create(d.path()).unwrap();
            std::fs::write(s.file("x"), b"1").unwrap();
            let mode = std::fs::metadata(s.path()).unwrap().mode() & 0o777;
            assert_eq!(mode, 0o700);
            s.path().to_path_buf()
        };
        assert!(!path.exists());
    }
}
