//! `screenshot`: the X11 root window (or one RandR monitor) as a PNG, downsampled so the long
//! edge fits the model. On Wayland (`WAYLAND_DISPLAY` set) the Wayland backend captures. Captured with x11rb's GetImage directly: the capture crates pull in
//! Wayland and PipeWire build dependencies the headless build must not need.

use base64::Engine as _;
use serde::Deserialize;
use serde_json::Value;
use x11rb::connection::Connection as _;
use x11rb::protocol::randr::ConnectionExt as _;
use x11rb::protocol::xproto::{ConnectionExt as _, ImageFormat, ImageOrder, Screen};
use x11rb::rust_connection::RustConnection;

use super::super::output::parse_args;
use super::super::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use super::backend::DesktopEnv;
use super::pixels::{PixelLayout, downsample, encode_png, fit, to_rgb};
use super::wayland::screenshot;
use super::{blocking, display};
use crate::model::Image;

/// GetImage replies are fetched in bands of at most this many bytes, so a very large screen
/// never needs one huge reply (servers refuse those with BadAlloc).
const BAND_BYTES: usize = 8 << 20;

pub(crate) struct Screenshot;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    monitor: Option<i64>,
}

impl Tool for Screenshot {
    fn name(&self) -> &'static str {
        "screenshot"
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let args: Args = parse_args(args)?;
            let monitor = match args.monitor {
                None => None,
                Some(n) => Some(usize::try_from(n).map_err(|_| {
                    ToolError::InvalidArguments(format!(
                        "monitor must be 0 or more (got {n}); omit it for the whole screen"
                    ))
                })?),
            };
            let max_edge = ctx.settings.screenshot_max_long_edge;
            let desktop = DesktopEnv::from_env(&ctx.settings.env);
            // `computer` coordinates are in the picture the model saw last: this one.
            let state = ctx.settings.desktop.clone();
            if desktop.wayland_display.is_some() {
                let portal = state.portal.clone();
                let (shot, area) = blocking(ctx, move || {
                    screenshot(&desktop, monitor, max_edge, &portal)
                })
                .await?;
                match area {
                    // One output's picture: coordinates are in it, placed where the output is.
                    Some(area) => state.saw(super::computer::View::of(area, max_edge)),
                    None => state.forget(),
                }
                return Ok(shot);
            }
            let display = display(ctx, "screenshot")?;
            let shot = blocking(ctx, move || capture(&display, monitor, max_edge)).await?;
            state.saw(super::computer::View::of(
                super::backend::Rect {
                    x: i32::from(shot.area.x),
                    y: i32::from(shot.area.y),
                    width: u32::from(shot.area.width),
                    height: u32::from(shot.area.height),
                },
                max_edge,
            ));
            Ok(ToolOutput {
                text: shot.description,
                images: vec![Image {
                    mime_type: "image/png".into(),
                    data_base64: shot.png_base64,
                }],
                recorded: Vec::new(),
            })
        })
    }
}

struct Shot {
    description: String,
    png_base64: String,
    /// The part of the screen it shows.
    area: Area,
}

/// A rectangle of the root window, in pixels (the X protocol's own integer widths). Shared
/// with the X11 desktop backend's `capture`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Area {
    pub x: i16,
    pub y: i16,
    pub width: u16,
    pub height: u16,
}

fn capture(display: &str, monitor: Option<usize>, max_edge: u32) -> Result<Shot, ToolError> {
    let (conn, screen_num) = x11rb::connect(Some(display)).map_err(|e| {
        ToolError::Io(format!(
            "screenshot: cannot connect to X11 display {display}: {e}"
        ))
    })?;
    let x_error = |e: &dyn std::fmt::Display| {
        ToolError::Io(format!("screenshot: X11 error on display {display}: {e}"))
    };
    let screen = conn
        .setup()
        .roots
        .get(screen_num)
        .ok_or_else(|| x_error(&format!("screen {screen_num} does not exist")))?;
    let whole = Area {
        x: 0,
        y: 0,
        width: screen.width_in_pixels,
        height: screen.height_in_pixels,
    };
    let (area, what) = match monitor {
        None => (whole, "screen".to_owned()),
        Some(index) => {
            let monitors = monitors(&conn, screen, whole);
            let Some((area, name)) = monitors.get(index) else {
                return Err(ToolError::InvalidArguments(format!(
                    "monitor {index} does not exist: display {display} has {} monitor{} \
                     (numbered from 0); omit monitor for the whole screen",
                    monitors.len(),
                    if monitors.len() == 1 { "" } else { "s" }
                )));
            };
            let label = if name.is_empty() {
                format!("monitor {index}")
            } else {
                format!("monitor {index} ({name})")
            };
            (
                clip(*area, whole).ok_or_else(|| x_error(&"the monitor is off screen"))?,
                label,
            )
        }
    };
    let (width, height) = (u32::from(area.width), u32::from(area.height));
    let rgb = grab_rgb(&conn, screen, area).map_err(|e| x_error(&e))?;
    let (out_w, out_h) = fit(width, height, max_edge);
    let rgb = if (out_w, out_h) == (width, height) {
        rgb
    } else {
        downsample(&rgb, width, height, out_w, out_h)
    };
    let png = encode_png(&rgb, out_w, out_h)
        .map_err(|e| ToolError::Io(format!("screenshot: PNG encoding failed: {e}")))?;
    let mut description = format!("screenshot of {what} {out_w}x{out_h}");
    if (out_w, out_h) != (width, height) {
        description.push_str(&format!(" (downsampled from {width}x{height})"));
    }
    Ok(Shot {
        description,
        png_base64: base64::engine::general_purpose::STANDARD.encode(png),
        area,
    })
}

/// RandR monitors with their names; the whole screen as the one monitor when the server has
/// no RandR 1.5 (old or minimal servers), so `monitor: 0` always works.
fn monitors(conn: &RustConnection, screen: &Screen, whole: Area) -> Vec<(Area, String)> {
    let listed = conn
        .randr_get_monitors(screen.root, true)
        .ok()
        .and_then(|cookie| cookie.reply().ok())
        .map(|reply| reply.monitors)
        .unwrap_or_default();
    if listed.is_empty() {
        return vec![(whole, String::new())];
    }
    listed
        .into_iter()
        .map(|m| {
            let name = conn
                .get_atom_name(m.name)
                .ok()
                .and_then(|cookie| cookie.reply().ok())
                .map(|reply| String::from_utf8_lossy(&reply.name).into_owned())
                .unwrap_or_default();
            let area = Area {
                x: m.x,
                y: m.y,
                width: m.width,
                height: m.height,
            };
            (area, name)
        })
        .collect()
}

/// The part of `area` inside `bounds`; `None` when nothing is.
pub(super) fn clip(area: Area, bounds: Area) -> Option<Area> {
    let x0 = i32::from(area.x).max(i32::from(bounds.x));
    let y0 = i32::from(area.y).max(i32::from(bounds.y));
    let x1 = (i32::from(area.x) + i32::from(area.width))
        .min(i32::from(bounds.x) + i32::from(bounds.width));
    let y1 = (i32::from(area.y) + i32::from(area.height))
        .min(i32::from(bounds.y) + i32::from(bounds.height));
    (x1 > x0 && y1 > y0).then(|| Area {
        x: i16::try_from(x0).unwrap_or(i16::MAX),
        y: i16::try_from(y0).unwrap_or(i16::MAX),
        width: u16::try_from(x1 - x0).unwrap_or(u16::MAX),
        height: u16::try_from(y1 - y0).unwrap_or(u16::MAX),
    })
}

/// The area as tightly packed RGB, 3 bytes a pixel.
pub(super) fn grab_rgb(
    conn: &RustConnection,
    screen: &Screen,
    area: Area,
) -> Result<Vec<u8>, String> {
    let (width, height) = (usize::from(area.width), usize::from(area.height));
    let band_rows = (BAND_BYTES / (width * 4).max(1)).clamp(1, height.max(1));
    let mut rgb = Vec::with_capacity(width * height * 3);
    let mut layout: Option<PixelLayout> = None;
    let mut row = 0;
    while row < height {
        let rows = band_rows.min(height - row);
        let y = i32::from(area.y) + row as i32;
        let reply = conn
            .get_image(
                ImageFormat::Z_PIXMAP,
                screen.root,
                area.x,
                i16::try_from(y).map_err(|_| format!("row {y} is out of range"))?,
                area.width,
                rows as u16,
                u32::MAX,
            )
            .map_err(|e| e.to_string())?
            .reply()
            .map_err(|e| format!("GetImage failed: {e}"))?;
        let layout = match layout {
            Some(layout) => layout,
            None => *layout.insert(pixel_layout(conn, screen, reply.depth, reply.visual)?),
        };
        to_rgb(&reply.data, width, rows, &layout, &mut rgb)?;
        row += rows;
    }
    Ok(rgb)
}

fn pixel_layout(
    conn: &RustConnection,
    screen: &Screen,
    depth: u8,
    visual: u32,
) -> Result<PixelLayout, String> {
    let setup = conn.setup();
    let format = setup
        .pixmap_formats
        .iter()
        .find(|f| f.depth == depth)
        .ok_or_else(|| format!("the server lists no pixmap format for depth {depth}"))?;
    let visual = screen
        .allowed_depths
        .iter()
        .flat_map(|d| d.visuals.iter())
        .find(|v| v.visual_id == visual)
        .ok_or_else(|| format!("the root visual {visual:#x} is not listed"))?;
    let layout = PixelLayout {
        bits_per_pixel: format.bits_per_pixel,
        scanline_pad: format.scanline_pad,
        masks: [visual.red_mask, visual.green_mask, visual.blue_mask],
        msb_first: setup.image_byte_order == ImageOrder::MSB_FIRST,
    };
    if !matches!(layout.bits_per_pixel, 16 | 24 | 32) || layout.masks.contains(&0) {
        return Err(format!(
            "unsupported pixel format: depth {depth}, {} bits per pixel (a true-color \
             visual of 16, 24 or 32 bits is needed)",
            layout.bits_per_pixel
        ));
    }
    Ok(layout)
}

#[cfg(test)]
mod tests {
    use super::super::testing::context_with_env;
    use super::*;
    use serde_json::json;

    #[test]
    fn monitors_are_clipped_to_the_screen() {
        let screen = Area {
            x: 0,
            y: 0,
            width: 100,
            height: 50,
        };
        let half_off = Area {
            x: 80,
            y: -10,
            width: 40,
            height: 40,
        };
        assert_eq!(
            clip(half_off, screen),
            Some(Area {
                x: 80,
                y: 0,
                width: 20,
                height: 30
            })
        );
        assert_eq!(
            clip(
                Area {
                    x: 200,
                    y: 0,
                    width: 5,
                    height: 5
                },
                screen
            ),
            None
        );
    }

    #[tokio::test]
    async fn without_a_display_the_error_says_what_is_missing() {
        let ctx = context_with_env(&[]);
        let err = Screenshot.call(json!({}), &ctx).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "screenshot needs an X11 display: DISPLAY is not set (on a server, run under Xvfb)"
        );
    }

    #[tokio::test]
    async fn an_unreachable_display_is_named() {
        let ctx = context_with_env(&[("DISPLAY", ":4242")]);
        let err = Screenshot.call(json!({}), &ctx).await.unwrap_err();
        assert!(
            err.to_string()
                .contains("cannot connect to X11 display :4242"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_negative_monitor_is_refused() {
        let ctx = context_with_env(&[("DISPLAY", ":4242")]);
        let err = Screenshot
            .call(json!({"monitor": -1}), &ctx)
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::InvalidArguments(_)), "{err}");
    }
}
