//! SVG to PNG without a browser: resvg renders in pure Rust. Fonts are
//! loaded from a fixed list (DejaVu, Debian's default) before the system's,
//! so a given machine setup always produces the same pixels.

use std::sync::Arc;

use crate::PlotError;

const PREFERRED_FONTS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf",
];

fn fontdb() -> Arc<resvg::usvg::fontdb::Database> {
    let mut db = resvg::usvg::fontdb::Database::new();
    for f in PREFERRED_FONTS {
        let _ = db.load_font_file(f);
    }
    if db.is_empty() {
        db.load_system_fonts();
    }
    db.set_sans_serif_family("DejaVu Sans");
    Arc::new(db)
}

/// Renders `svg` at `scale` × its own size (2 for slides and retina screens).
pub fn svg_to_png(svg: &str, scale: f32) -> Result<Vec<u8>, PlotError> {
    let opt = resvg::usvg::Options {
        fontdb: fontdb(),
        ..Default::default()
    };
    if opt.fontdb.is_empty() {
        return Err(PlotError::Png(
            "no fonts found for the labels; install fonts-dejavu-core".into(),
        ));
    }
    let tree = resvg::usvg::Tree::from_str(svg, &opt).map_err(|e| PlotError::Png(e.to_string()))?;
    let size = tree
        .size()
        .to_int_size()
        .scale_by(scale)
        .ok_or_else(|| PlotError::Png("empty image".into()))?;
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or_else(|| PlotError::Png("image too large".into()))?;
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::from_scale(scale, scale),
        &mut pixmap.as_mut(),
    );
    pixmap
        .encode_png()
        .map_err(|e| PlotError::Png(e.to_string()))
}
