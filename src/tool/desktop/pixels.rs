//! Pixels: the server's ZPixmap rows to packed RGB, downsampling, PNG encoding. Pure
//! functions, tested without a display.

/// How the server lays out pixels of one depth: bits per pixel, row padding, channel masks,
/// byte order.
#[derive(Debug, Clone, Copy)]
pub(super) struct PixelLayout {
    pub bits_per_pixel: u8,
    pub scanline_pad: u8,
    pub masks: [u32; 3],
    pub msb_first: bool,
}

impl PixelLayout {
    fn stride(&self, width: usize) -> usize {
        let pad = usize::from(self.scanline_pad.max(8));
        (width * usize::from(self.bits_per_pixel)).div_ceil(pad) * pad / 8
    }
}

/// Appends `rows` rows of ZPixmap data as RGB. Channels are found through the visual's masks,
/// which covers BGRX (the usual 24/32-bit layout), RGBX and 16-bit 565 alike.
pub(super) fn to_rgb(
    data: &[u8],
    width: usize,
    rows: usize,
    layout: &PixelLayout,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    let stride = layout.stride(width);
    let bytes = usize::from(layout.bits_per_pixel / 8);
    if data.len() < stride * rows {
        return Err(format!(
            "GetImage returned {} bytes, expected {}",
            data.len(),
            stride * rows
        ));
    }
    let channels = layout
        .masks
        .map(|mask| (mask.trailing_zeros(), mask.count_ones()));
    for row in data.chunks_exact(stride).take(rows) {
        for px in row[..width * bytes].chunks_exact(bytes) {
            let value = px.iter().enumerate().fold(0u32, |acc, (i, &b)| {
                let shift = if layout.msb_first { bytes - 1 - i } else { i };
                acc | (u32::from(b) << (8 * shift))
            });
            for (mask, (shift, bits)) in layout.masks.iter().zip(channels) {
                let v = (value & mask) >> shift;
                let max = (1u32 << bits) - 1;
                out.push(if bits == 8 {
                    v as u8
                } else {
                    (v * 255 / max) as u8
                });
            }
        }
    }
    Ok(())
}

/// The output size: the long edge at most `max_edge` (0: no limit), aspect ratio kept.
pub(super) fn fit(width: u32, height: u32, max_edge: u32) -> (u32, u32) {
    let long = width.max(height);
    if max_edge == 0 || long <= max_edge {
        return (width, height);
    }
    let scale = |edge: u32| {
        let scaled =
            (u64::from(edge) * u64::from(max_edge) + u64::from(long) / 2) / u64::from(long);
        (scaled as u32).max(1)
    };
    (scale(width), scale(height))
}

/// Area-average (box filter) downsampling of packed RGB: each output pixel is the mean of the
/// source pixels its box covers, which keeps thin text and lines visible where nearest-neighbour
/// would drop them.
pub(super) fn downsample(src: &[u8], width: u32, height: u32, out_w: u32, out_h: u32) -> Vec<u8> {
    let (w, h, ow, oh) = (
        width as usize,
        height as usize,
        out_w as usize,
        out_h as usize,
    );
    let spans = |from: usize, to: usize| -> Vec<(usize, usize)> {
        (0..to)
            .map(|i| {
                let start = i * from / to;
                let end = ((i + 1) * from / to).max(start + 1).min(from);
                (start, end)
            })
            .collect()
    };
    let (cols, rows) = (spans(w, ow), spans(h, oh));
    let mut out = Vec::with_capacity(ow * oh * 3);
    let mut sums = vec![0u64; ow * 3];
    for &(y0, y1) in &rows {
        sums.fill(0);
        for y in y0..y1 {
            let line = &src[y * w * 3..(y + 1) * w * 3];
            for (o, &(x0, x1)) in cols.iter().enumerate() {
                for px in line[x0 * 3..x1 * 3].chunks_exact(3) {
                    for c in 0..3 {
                        sums[o * 3 + c] += u64::from(px[c]);
                    }
                }
            }
        }
        for (o, &(x0, x1)) in cols.iter().enumerate() {
            let count = ((x1 - x0) * (y1 - y0)) as u64;
            for c in 0..3 {
                out.push(((sums[o * 3 + c] + count / 2) / count) as u8);
            }
        }
    }
    out
}

pub(super) fn encode_png(
    rgb: &[u8],
    width: u32,
    height: u32,
) -> Result<Vec<u8>, png::EncodingError> {
    let mut png = Vec::new();
    let mut encoder = png::Encoder::new(&mut png, width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    // Fast compression: a screen of flat colours still compresses well, and the tool call
    // should not spend a second of CPU on a few percent of size.
    encoder.set_compression(png::Compression::Fast);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(rgb)?;
    writer.finish()?;
    Ok(png)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_long_edge_is_fitted_keeping_the_aspect_ratio() {
        assert_eq!(fit(1280, 800, 640), (640, 400));
        assert_eq!(fit(800, 1280, 640), (400, 640));
        assert_eq!(fit(1280, 800, 1568), (1280, 800));
        assert_eq!(fit(1280, 800, 0), (1280, 800));
        assert_eq!(fit(3000, 1, 100), (100, 1));
    }

    #[test]
    fn downsampling_averages_each_box() {
        // 4x2 → 2x1: each output pixel is the mean of a 2x2 box.
        #[rustfmt::skip]
        let src = [
            0, 0, 0,   100, 100, 100,   255, 0, 0,   255, 0, 0,
            100, 100, 100,   200, 200, 200,   255, 0, 0,   255, 0, 0,
        ];
        assert_eq!(downsample(&src, 4, 2, 2, 1), [100, 100, 100, 255, 0, 0]);
        // A non-integer ratio still covers every source pixel once.
        let src: Vec<u8> = (0..5 * 3 * 3).map(|i| (i % 7) as u8).collect();
        assert_eq!(downsample(&src, 5, 3, 2, 2).len(), 2 * 2 * 3);
    }

    #[test]
    fn bgrx_pixels_become_rgb() {
        let layout = PixelLayout {
            bits_per_pixel: 32,
            scanline_pad: 32,
            masks: [0xff0000, 0x00ff00, 0x0000ff],
            msb_first: false,
        };
        // Little-endian BGRX: blue 0x30, green 0x20, red 0x10.
        let data = [0x30, 0x20, 0x10, 0xff, 1, 2, 3, 0];
        let mut out = Vec::new();
        to_rgb(&data, 2, 1, &layout, &mut out).unwrap();
        assert_eq!(out, [0x10, 0x20, 0x30, 3, 2, 1]);
        // 16-bit 565 with row padding to 32 bits: one white pixel plus two pad bytes.
        let layout = PixelLayout {
            bits_per_pixel: 16,
            scanline_pad: 32,
            masks: [0xf800, 0x07e0, 0x001f],
            msb_first: false,
        };
        let mut out = Vec::new();
        to_rgb(&[0xff, 0xff, 0, 0], 1, 1, &layout, &mut out).unwrap();
        assert_eq!(out, [255, 255, 255]);
    }

    #[test]
    fn png_round_trips() {
        let rgb: Vec<u8> = (0..3 * 2 * 3).map(|i| i as u8 * 10).collect();
        let png = encode_png(&rgb, 3, 2).unwrap();
        let mut reader = png::Decoder::new(std::io::Cursor::new(png))
            .read_info()
            .unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (3, 2));
        assert_eq!(&buf[..info.buffer_size()], &rgb[..]);
    }
}
