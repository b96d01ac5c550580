//! `fsprof-render --scale X`: an SVG on standard input, its PNG on
//! standard output. fsprof runs it for `plot --png` and bench's PNG plots
//! (`src/png.rs`), so that the renderer (resvg, usvg, text shaping, font
//! lookup) is not linked into `fsprof` itself: its relocated data was
//! ~25 of the static PIE's 51 RELRO pages, ~80 µs of every fsprof start
//! (docs/benchmarks/history.md, start15). Installed beside `fsprof` by
//! `cargo install`; not meant to be run by hand.
//!
//! Exit status 0 with the PNG written, else 2 with one line on standard
//! error, which fsprof shows as its own error.

use std::io::{Read, Write};
use std::process::ExitCode;

fn main() -> ExitCode {
    match render() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            fsprof_sys::diag!("{e}");
            ExitCode::from(2)
        }
    }
}

fn render() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let scale = match args.as_slice() {
        [flag, x] if flag == "--scale" => x
            .parse::<f32>()
            .ok()
            .filter(|x| x.is_finite() && *x > 0.0)
            .ok_or_else(|| format!("fsprof-render: bad scale {x:?}"))?,
        _ => return Err("usage: fsprof-render --scale X < FIG.svg > FIG.png".into()),
    };
    let mut svg = String::new();
    std::io::stdin()
        .read_to_string(&mut svg)
        .map_err(|e| format!("fsprof-render: cannot read the SVG: {e}"))?;
    let png = fsprof_plot::svg_to_png(&svg, scale).map_err(|e| e.to_string())?;
    let mut out = std::io::stdout().lock();
    out.write_all(&png)
        .and_then(|()| out.flush())
        .map_err(|e| format!("fsprof-render: cannot write the PNG: {e}"))
}
