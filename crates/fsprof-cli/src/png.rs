//! PNG figures through `fsprof-render`, the second executable `cargo
//! install` puts beside fsprof (`src/bin/fsprof-render.rs`, which says why
//! the renderer is not in this binary). It is looked for only in the
//! directory of the running executable (`/proc/self/exe`), never on
//! `$PATH` or through the environment: fsprof often runs as root.

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{anyhow, bail, Context, Result};

/// The renderer's file name, beside fsprof's.
const RENDERER: &str = "fsprof-render";

/// What every PNG file starts with.
const SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

/// Renders `svg` at `scale` × its own size, as fsprof-plot's `svg_to_png`
/// does (the renderer calls it); its errors are the renderer's one line.
pub fn svg_to_png(svg: &str, scale: f32) -> Result<Vec<u8>> {
    let renderer = renderer()?;
    let mut child = Command::new(&renderer)
        // `{}` of an f32 reads back as the same f32: the same pixels.
        .args(["--scale", &scale.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => anyhow!(
                "cannot render the PNG: {} is missing (fsprof draws PNGs with it; `cargo install` puts it beside fsprof: copy it along)",
                renderer.display()
            ),
            _ => anyhow!("cannot render the PNG: cannot run {}: {e}", renderer.display()),
        })?;
    let mut stdin = child.stdin.take().expect("stdin was piped");
    // Written from a thread of its own: the renderer's output is read
    // meanwhile, so neither side waits on a full pipe. A renderer that
    // stopped reading (it failed) is reported by its status below.
    let output = std::thread::scope(|s| {
        s.spawn(move || {
            let _ = stdin.write_all(svg.as_bytes());
        });
        child.wait_with_output()
    })
    .with_context(|| format!("cannot render the PNG: {}", renderer.display()))?;
    if let Some(sig) = output.status.signal() {
        bail!(
            "cannot render the PNG: {} was killed by signal {sig}",
            renderer.display()
        );
    }
    if !output.status.success() {
        let said = String::from_utf8_lossy(&output.stderr);
        match said.lines().rev().find(|l| !l.trim().is_empty()) {
            Some(line) => bail!("{}", fsprof_core::printable::field(line.trim())),
            None => bail!(
                "cannot render the PNG: {} failed ({})",
                renderer.display(),
                output.status
            ),
        }
    }
    if !output.stdout.starts_with(SIGNATURE) {
        bail!("cannot render the PNG: {} wrote no PNG", renderer.display());
    }
    Ok(output.stdout)
}

/// `fsprof-render` in the directory of the running fsprof.
fn renderer() -> Result<PathBuf> {
    let exe = std::fs::read_link("/proc/self/exe")
        .context("cannot render the PNG: cannot find fsprof's own executable (/proc/self/exe)")?;
    let dir = exe.parent().ok_or_else(|| {
        anyhow!(
            "cannot render the PNG: fsprof's executable {} has no directory",
            exe.display()
        )
    })?;
    Ok(dir.join(RENDERER))
}
