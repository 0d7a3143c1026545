//! Screen capture through wlr-screencopy: the compositor copies an output into a shared-memory
//! buffer (a memfd), read back with plain reads (this crate allows no `unsafe`, so no mmap),
//! then converted to RGB and laid out like the outputs are.

use std::fs::File;
use std::os::unix::fs::FileExt as _;

use wayland_client::protocol::wl_shm;
use wayland_client::{Proxy as _, WEnum};
use wayland_protocols_wlr::screencopy::v1::client::zwlr_screencopy_manager_v1::ZwlrScreencopyManagerV1;

use super::super::backend::{Frame, Rect, failed};
use super::super::pixels::downsample;
use super::client::{Client, FrameEvents, Output};
use crate::tool::ToolError;

/// One output's pixels, as the compositor copied them.
fn capture_output(
    client: &mut Client,
    manager: &ZwlrScreencopyManagerV1,
    shm: &wl_shm::WlShm,
    output: &Output,
) -> Result<Frame, ToolError> {
    let Some(proxy) = &output.proxy else {
        return Err(failed("the output is gone"));
    };
    let qh = client.queue.handle();
    client.state.frame = FrameEvents::default();
    let frame = manager.capture_output(0, proxy, &qh, ());
    // Version 3 lists every buffer kind and then says it is done; older ones offer shm only.
    let announces_done = frame.version() >= 3;
    client.wait_for(
        |s| s.frame.failed || (s.frame.shm.is_some() && (!announces_done || s.frame.buffer_done)),
        "offer a screen buffer",
    )?;
    let Some((format, width, height, stride)) = client.state.frame.shm else {
        frame.destroy();
        return Err(failed("the compositor refused to capture the screen"));
    };
    let format = match format {
        WEnum::Value(format) => format,
        WEnum::Unknown(code) => {
            frame.destroy();
            return Err(failed(format!("unknown screen pixel format {code:#x}")));
        }
    };
    let size = u64::from(stride) * u64::from(height);
    let memory = shared_memory(size)?;
    let size_i32 = i32::try_from(size).map_err(|_| failed("the screen is too large to capture"))?;
    let pool = shm.create_pool(std::os::fd::AsFd::as_fd(&memory), size_i32, &qh, ());
    let buffer = pool.create_buffer(
        0,
        i32::try_from(width).unwrap_or(i32::MAX),
        i32::try_from(height).unwrap_or(i32::MAX),
        i32::try_from(stride).unwrap_or(i32::MAX),
        format,
        &qh,
        (),
    );
    frame.copy(&buffer);
    let copied = client.wait_for(|s| s.frame.ready || s.frame.failed, "copy the screen");
    frame.destroy();
    buffer.destroy();
    pool.destroy();
    copied?;
    if client.state.frame.failed {
        return Err(failed("the compositor failed to copy the screen"));
    }
    let mut raw = vec![0u8; usize::try_from(size).map_err(failed)?];
    memory
        .read_exact_at(&mut raw, 0)
        .map_err(|e| failed(format!("reading the captured screen: {e}")))?;
    let rgb = to_rgb(
        &raw,
        format,
        width,
        height,
        stride,
        client.state.frame.y_invert,
    )?;
    Ok(Frame { width, height, rgb })
}

/// An anonymous file of `size` bytes, shared with the compositor by its descriptor.
fn shared_memory(size: u64) -> Result<File, ToolError> {
    let fd = rustix::fs::memfd_create("corral-screencopy", rustix::fs::MemfdFlags::CLOEXEC)
        .map_err(|e| failed(format!("cannot create shared memory for the screen: {e}")))?;
    let file = File::from(fd);
    file.set_len(size)
        .map_err(|e| failed(format!("cannot size shared memory for the screen: {e}")))?;
    Ok(file)
}

/// Packed RGB from the shm buffer. The formats are little-endian words: XRGB8888 is the bytes
/// B, G, R, X; XBGR8888 is R, G, B, X.
pub(super) fn to_rgb(
    raw: &[u8],
    format: wl_shm::Format,
    width: u32,
    height: u32,
    stride: u32,
    y_invert: bool,
) -> Result<Vec<u8>, ToolError> {
    let order: [usize; 3] = match format {
        wl_shm::Format::Xrgb8888 | wl_shm::Format::Argb8888 => [2, 1, 0],
        wl_shm::Format::Xbgr8888 | wl_shm::Format::Abgr8888 => [0, 1, 2],
        other => {
            return Err(failed(format!(
                "the compositor offers the screen only as {other:?}, which corral cannot read"
            )));
        }
    };
    let (width, height, stride) = (width as usize, height as usize, stride as usize);
    if stride < width * 4 || raw.len() < stride * height {
        return Err(failed(
            "the captured screen buffer is smaller than the screen",
        ));
    }
    let mut rgb = Vec::with_capacity(width * height * 3);
    for row in 0..height {
        let source = if y_invert { height - 1 - row } else { row };
        let line = &raw[source * stride..source * stride + width * 4];
        for px in line.chunks_exact(4) {
            rgb.extend(order.iter().map(|&i| px[i]));
        }
    }
    Ok(rgb)
}

/// The whole layout (every output where it sits), or the part of it in `area`.
pub(super) fn capture(client: &mut Client, area: Option<Rect>) -> Result<Frame, ToolError> {
    let manager: ZwlrScreencopyManagerV1 = client.bind(3, ()).ok_or_else(|| {
        failed(
            "this Wayland compositor offers no screen capture (wlr-screencopy): \
             screenshots work on wlroots compositors such as sway",
        )
    })?;
    let shm: wl_shm::WlShm = client
        .bind(1, ())
        .ok_or_else(|| failed("the Wayland compositor offers no shared memory (wl_shm)"))?;
    let screen = layout(&client.state.outputs)
        .ok_or_else(|| failed("the Wayland compositor has no output"))?;
    let wanted = match area {
        None => screen,
        Some(area) => clip(area, screen)
            .ok_or_else(|| ToolError::InvalidArguments("the area is off the screen".into()))?,
    };
    let mut canvas = Frame {
        width: wanted.width,
        height: wanted.height,
        rgb: vec![0; wanted.width as usize * wanted.height as usize * 3],
    };
    let outputs = client.state.outputs.clone();
    for output in &outputs {
        let place = output.area();
        if clip(place, wanted).is_none() {
            continue;
        }
        let mut shot = capture_output(client, &manager, &shm, output)?;
        // A scaled output is copied in its real pixels; the layout is in logical ones.
        if (shot.width, shot.height) != (place.width, place.height) {
            shot.rgb = downsample(
                &shot.rgb,
                shot.width,
                shot.height,
                place.width,
                place.height,
            );
            (shot.width, shot.height) = (place.width, place.height);
        }
        blit(&shot, place, &mut canvas, wanted);
    }
    manager.destroy();
    Ok(canvas)
}

/// The bounding box of the outputs.
pub(super) fn layout(outputs: &[Output]) -> Option<Rect> {
    let areas: Vec<Rect> = outputs
        .iter()
        .map(Output::area)
        .filter(|a| a.width > 0)
        .collect();
    let x0 = areas.iter().map(|a| a.x).min()?;
    let y0 = areas.iter().map(|a| a.y).min()?;
    let x1 = areas
        .iter()
        .map(|a| i64::from(a.x) + i64::from(a.width))
        .max()?;
    let y1 = areas
        .iter()
        .map(|a| i64::from(a.y) + i64::from(a.height))
        .max()?;
    Some(Rect {
        x: x0,
        y: y0,
        width: u32::try_from(x1 - i64::from(x0)).ok()?,
        height: u32::try_from(y1 - i64::from(y0)).ok()?,
    })
}

/// The part of `area` inside `bounds`.
pub(super) fn clip(area: Rect, bounds: Rect) -> Option<Rect> {
    let end = |start: i32, len: u32| i64::from(start) + i64::from(len);
    let x0 = area.x.max(bounds.x);
    let y0 = area.y.max(bounds.y);
    let x1 = end(area.x, area.width).min(end(bounds.x, bounds.width));
    let y1 = end(area.y, area.height).min(end(bounds.y, bounds.height));
    (x1 > i64::from(x0) && y1 > i64::from(y0)).then(|| Rect {
        x: x0,
        y: y0,
        width: (x1 - i64::from(x0)) as u32,
        height: (y1 - i64::from(y0)) as u32,
    })
}

/// Copies the part of `shot` (which covers `place`) that falls in `target` (which `canvas`
/// covers).
fn blit(shot: &Frame, place: Rect, canvas: &mut Frame, target: Rect) {
    let Some(common) = clip(place, target) else {
        return;
    };
    let row_bytes = common.width as usize * 3;
    for row in 0..common.height as usize {
        let sy = (common.y - place.y) as usize + row;
        let sx = (common.x - place.x) as usize;
        let dy = (common.y - target.y) as usize + row;
        let dx = (common.x - target.x) as usize;
        let from = (sy * shot.width as usize + sx) * 3;
        let to = (dy * canvas.width as usize + dx) * 3;
        canvas.rgb[to..to + row_bytes].copy_from_slice(&shot.rgb[from..from + row_bytes]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shm_formats_become_rgb_and_inverted_frames_are_turned_upright() {
        // Two rows of one pixel, stride 8 (padding after each pixel).
        let raw = [10, 20, 30, 255, 0, 0, 0, 0, 1, 2, 3, 255, 0, 0, 0, 0];
        let xrgb = to_rgb(&raw, wl_shm::Format::Xrgb8888, 1, 2, 8, false).unwrap();
        assert_eq!(xrgb, [30, 20, 10, 3, 2, 1]);
        let xbgr = to_rgb(&raw, wl_shm::Format::Abgr8888, 1, 2, 8, true).unwrap();
        assert_eq!(xbgr, [1, 2, 3, 10, 20, 30]);
        assert!(to_rgb(&raw, wl_shm::Format::Rgb565, 1, 2, 8, false).is_err());
        assert!(to_rgb(&raw[..12], wl_shm::Format::Xrgb8888, 1, 2, 8, false).is_err());
    }

    #[test]
    fn outputs_are_laid_out_and_areas_cut_from_them() {
        let output = |x, w| Output {
            x,
            y: 0,
            mode: (w, 100),
            scale: 1,
            ..Output::default()
        };
        let screen = layout(&[output(0, 200), output(200, 100)]).unwrap();
        assert_eq!(
            screen,
            Rect {
                x: 0,
                y: 0,
                width: 300,
                height: 100
            }
        );
        let shot = Frame {
            width: 2,
            height: 1,
            rgb: vec![1, 1, 1, 2, 2, 2],
        };
        let mut canvas = Frame {
            width: 3,
            height: 1,
            rgb: vec![0; 9],
        };
        let place = Rect {
            x: 10,
            y: 5,
            width: 2,
            height: 1,
        };
        blit(
            &shot,
            place,
            &mut canvas,
            Rect {
                x: 11,
                y: 5,
                width: 3,
                height: 1,
            },
        );
        assert_eq!(canvas.rgb, [2, 2, 2, 0, 0, 0, 0, 0, 0]);
        assert_eq!(
            clip(
                Rect {
                    x: 400,
                    y: 0,
                    width: 5,
                    height: 5
                },
                screen
            ),
            None
        );
    }
}
