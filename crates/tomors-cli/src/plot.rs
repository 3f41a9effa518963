//! Line-profile plots as PNG (plotters). Grey previews of slices are
//! `tomors_io::preview`'s.

use std::path::Path;
use std::sync::Once;

use anyhow::{anyhow, Context, Result};
use plotters::prelude::*;

const FONT: &[u8] = include_bytes!("../assets/fonts/DejaVuSansMono.ttf");
static REGISTER_FONT: Once = Once::new();

fn register_font() {
    REGISTER_FONT.call_once(|| {
        // The embedded font is valid; if it were not, text would be missing.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// One curve of a profile plot.
pub struct Series<'a> {
    /// Legend label.
    pub label: &'a str,
    /// Samples, plotted against their index.
    pub values: &'a [f32],
    /// Line colour.
    pub color: RGBColor,
}

/// Plots line profiles into a PNG.
pub fn save_profile(path: &Path, title: &str, x_label: &str, series: &[Series<'_>]) -> Result<()> {
    register_font();
    let (w, h) = (900u32, 450u32);
    let mut buffer = vec![0u8; (w * h * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut buffer, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let n = series
            .iter()
            .map(|s| s.values.len())
            .max()
            .unwrap_or(1)
            .max(2);
        let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
        for s in series {
            for &v in s.values {
                lo = lo.min(v);
                hi = hi.max(v);
            }
        }
        if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) {
            hi = lo + 1.0;
        }
        let margin = 0.05 * (hi - lo);
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0f32..(n - 1) as f32, (lo - margin)..(hi + margin))
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc("value")
            .label_style(("sans-serif", 14))
            .draw()
            .map_err(plot_err)?;
        for s in series {
            let color = s.color;
            chart
                .draw_series(LineSeries::new(
                    s.values.iter().enumerate().map(|(i, &v)| (i as f32, v)),
                    color.stroke_width(2),
                ))
                .map_err(plot_err)?
                .label(s.label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .draw()
            .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
    }
    let img = image::RgbImage::from_raw(w, h, buffer)
        .ok_or_else(|| anyhow!("plot buffer size mismatch"))?;
    img.save(path)
        .with_context(|| format!("{}: cannot write PNG", path.display()))
}

fn plot_err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("plotting failed: {e:?}")
}
