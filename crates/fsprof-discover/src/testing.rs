//! Real file systems for the validation tests and the benchmark: an image
//! file formatted with `mkfs.<fs>`, attached to a loop device with direct
//! I/O (so that the image's own pages in the host's page cache neither
//! answer "device" reads nor count against a memory cgroup) and mounted;
//! all undone on drop, also when a test panics.
//!
//! Needs root and `mkfs.<fs>`; tests check for them first
//! (`fsprof_testkit::need_root`, `need_program`) and are marked
//! `#[ignore = "needs root, ..."]`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Why an image could not be made, attached or mounted.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("{command}: {source} (install it: e2fsprogs, xfsprogs, btrfs-progs, util-linux)")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
    #[error("{command}: {stderr}")]
    Failed { command: String, stderr: String },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn run(cmd: &mut Command) -> Result<String, ImageError> {
    let command = format!("{cmd:?}");
    let out = cmd.output().map_err(|source| ImageError::Spawn {
        command: command.clone(),
        source,
    })?;
    if !out.status.success() {
        return Err(ImageError::Failed {
            command,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A formatted, loop-attached, mounted image.
#[derive(Debug)]
pub struct LoopImage {
    dir: tempfile::TempDir,
    pub device: PathBuf,
    pub fs: String,
    mounted: bool,
}

impl LoopImage {
    /// `mkfs.<fs> <mkfs_args> IMAGE` on a sparse image of `mib` MiB under
    /// /var/tmp (disk-backed, so direct I/O to it works), then loop-attach
    /// with direct I/O and mount with `mount_opts`.
    pub fn new(
        fs: &str,
        mkfs_args: &[&str],
        mib: u64,
        mount_opts: &str,
    ) -> Result<LoopImage, ImageError> {
        let mut me = LoopImage::unmounted(fs, mkfs_args, mib)?;
        let mut mount = Command::new("mount");
        if !mount_opts.is_empty() {
            mount.args(["-o", mount_opts]);
        }
        run(mount.arg(&me.device).arg(me.mount_point()))?;
        me.mounted = true;
        Ok(me)
    }

    /// Formatted and loop-attached, with an empty [`mount_point`] for the
    /// caller to mount (e.g. in a mount namespace of its own, where no
    /// other process can hold a copy of the mount).
    ///
    /// [`mount_point`]: LoopImage::mount_point
    pub fn unmounted(fs: &str, mkfs_args: &[&str], mib: u64) -> Result<LoopImage, ImageError> {
        let base = if Path::new("/var/tmp").is_dir() {
            "/var/tmp"
        } else {
            "/tmp"
        };
        let dir = tempfile::Builder::new()
            .prefix("fsprof-discover-img")
            .tempdir_in(base)
            .map_err(|source| ImageError::Io {
                path: base.into(),
                source,
            })?;
        let img = dir.path().join("image");
        std::fs::File::create(&img)
            .and_then(|f| f.set_len(mib << 20))
            .map_err(|source| ImageError::Io {
                path: img.clone(),
                source,
            })?;
        run(Command::new(format!("mkfs.{fs}")).args(mkfs_args).arg(&img))?;
        let dev = run(Command::new("losetup")
            .args(["--find", "--show", "--direct-io=on"])
            .arg(&img))?;
        let me = LoopImage {
            dir,
            device: PathBuf::from(dev),
            fs: fs.to_string(),
            mounted: false,
        };
        std::fs::create_dir(me.mount_point()).map_err(|source| ImageError::Io {
            path: me.mount_point(),
            source,
        })?;
        Ok(me)
    }

    pub fn mount_point(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }

    /// `blockdev --setra SECTORS` on the loop device.
    pub fn set_readahead_sectors(&self, sectors: u64) -> Result<(), ImageError> {
        run(Command::new("blockdev")
            .args(["--setra", &sectors.to_string()])
            .arg(&self.device))
        .map(|_| ())
    }

    /// The device's `read_ahead_kb`.
    pub fn readahead_kb(&self) -> Option<u64> {
        let name = self.device.file_name()?.to_string_lossy().into_owned();
        std::fs::read_to_string(format!("/sys/block/{name}/queue/read_ahead_kb"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

impl Drop for LoopImage {
    fn drop(&mut self) {
        if self.mounted {
            let unmounted = Command::new("umount")
                .arg(self.mount_point())
                .status()
                .is_ok_and(|s| s.success());
            // Still busy (a process of the test writes there): detach it
            // lazily rather than leave a mount behind.
            if !unmounted {
                let _ = Command::new("umount")
                    .arg("-l")
                    .arg(self.mount_point())
                    .status();
            }
        }
        let _ = Command::new("losetup").arg("-d").arg(&self.device).status();
    }
}

/// `f` mapped shared and read-only with every page touched, so mapped
/// into this process until the map is dropped: pages mapped into a process
/// cannot be evicted (fadvise and drop_caches skip them), as when another
/// program has the file mapped.
pub fn map_every_page(f: &std::fs::File) -> std::io::Result<fsprof_sys::mmap::SharedMap> {
    let len = usize::try_from(f.metadata()?.len())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EFBIG))?;
    let map = fsprof_sys::mmap::SharedMap::new(f, len)?;
    let page = fsprof_sys::host::page_size();
    let mut sum = 0u64;
    for off in (0..len.saturating_sub(7)).step_by(page) {
        sum = sum.wrapping_add(map.u64_at(off));
    }
    std::hint::black_box(sum);
    Ok(map)
}
