//! The `screenshot` tool on Wayland: the whole layout, or one output as `monitor`.

use base64::Engine as _;

use std::sync::Arc;

use super::super::backend::{Desktop as _, DesktopEnv, Frame, Rect};
use super::super::pixels::{downsample, encode_png, fit};
use super::super::portal::{PortalDesktop, PortalHold};
use super::WaylandDesktop;
use crate::model::Image;
use crate::tool::{ToolError, ToolOutput};

/// A PNG of the screen or of output number `monitor` (outputs ordered left to right, then
/// top to bottom), its long edge at most `max_edge`, and the output's place in the layout
/// when it is one output's (`None`: the whole screen).
/// A compositor without wlr-screencopy (GNOME, KDE) is captured through the desktop portal,
/// whole.
pub(in super::super) fn screenshot(
    env: &DesktopEnv,
    monitor: Option<usize>,
    max_edge: u32,
    portal: &Arc<PortalHold>,
) -> Result<(ToolOutput, Option<Rect>), ToolError> {
    let desktop = WaylandDesktop::connect(env)?;
    if !desktop.captures() && env.session_bus.is_some() {
        if monitor.is_some() {
            return Err(ToolError::InvalidArguments(
                "this desktop is captured through the xdg-desktop-portal, which gives the                  whole screen only: omit monitor"
                    .into(),
            ));
        }
        let frame = PortalDesktop::connect(env, portal.clone())?.capture(None)?;
        return Ok((shown(frame, "screen", max_edge)?, None));
    }
    let mut desktop = desktop;
    let (area, what) = match monitor {
        None => (None, "screen".to_owned()),
        Some(index) => {
            let mut outputs = desktop.client.state.outputs.clone();
            outputs.sort_by_key(|o| (o.x, o.y));
            let Some(output) = outputs.get(index) else {
                return Err(ToolError::InvalidArguments(format!(
                    "monitor {index} does not exist: the Wayland compositor has {} output{} \
                     (numbered from 0); omit monitor for the whole screen",
                    outputs.len(),
                    if outputs.len() == 1 { "" } else { "s" }
                )));
            };
            let label = if output.name.is_empty() {
                format!("monitor {index}")
            } else {
                format!("monitor {index} ({})", output.name)
            };
            (Some(output.area()), label)
        }
    };
    let frame = desktop.capture(area)?;
    Ok((shown(frame, &what, max_edge)?, area))
}

/// The frame as the model gets it: fitted to `max_edge`, a PNG, and what it shows.
fn shown(frame: Frame, what: &str, max_edge: u32) -> Result<ToolOutput, ToolError> {
    let (width, height) = (frame.width, frame.height);
    let (out_w, out_h) = fit(width, height, max_edge);
    let rgb = if (out_w, out_h) == (width, height) {
        frame.rgb
    } else {
        downsample(&frame.rgb, width, height, out_w, out_h)
    };
    let png = encode_png(&rgb, out_w, out_h)
        .map_err(|e| ToolError::Io(format!("screenshot: PNG encoding failed: {e}")))?;
    let mut description = format!("screenshot of {what} {out_w}x{out_h}");
    if (out_w, out_h) != (width, height) {
        description.push_str(&format!(" (downsampled from {width}x{height})"));
    }
    Ok(ToolOutput {
        text: description,
        images: vec![Image {
            mime_type: "image/png".into(),
            data_base64: base64::engine::general_purpose::STANDARD.encode(png),
        }],
        recorded: Vec::new(),
    })
}
