//! Marks drawn on the screenshot a person approves from: a ring and cross hair where a click
//! lands, the path of a drag, a frame round the window that receives typed text or keys.
//! Plain pixel drawing on packed RGB; the colours are chosen to show on light and dark.

/// A marked picture: packed RGB, `width` × `height`.
pub struct Canvas<'a> {
    pub rgb: &'a mut [u8],
    pub width: u32,
    pub height: u32,
}

const RED: [u8; 3] = [235, 20, 60];
const WHITE: [u8; 3] = [255, 255, 255];

impl Canvas<'_> {
    fn put(&mut self, x: i64, y: i64, colour: [u8; 3]) {
        if x < 0 || y < 0 || x >= i64::from(self.width) || y >= i64::from(self.height) {
            return;
        }
        let at = ((y as usize) * (self.width as usize) + x as usize) * 3;
        if let Some(px) = self.rgb.get_mut(at..at + 3) {
            px.copy_from_slice(&colour);
        }
    }

    /// A line `thick` pixels wide (Bresenham, stamped with a square).
    fn line(&mut self, from: (i64, i64), to: (i64, i64), thick: i64, colour: [u8; 3]) {
        let (mut x, mut y) = from;
        let dx = (to.0 - x).abs();
        let dy = -(to.1 - y).abs();
        let sx = if x < to.0 { 1 } else { -1 };
        let sy = if y < to.1 { 1 } else { -1 };
        let mut err = dx + dy;
        let half = thick / 2;
        loop {
            for ox in -half..=half {
                for oy in -half..=half {
                    self.put(x + ox, y + oy, colour);
                }
            }
            if (x, y) == to {
                break;
            }
            let e2 = 2 * err;
            if e2 >= dy {
                err += dy;
                x += sx;
            }
            if e2 <= dx {
                err += dx;
                y += sy;
            }
        }
    }

    fn ring(&mut self, centre: (i64, i64), radius: i64, thick: i64, colour: [u8; 3]) {
        let (cx, cy) = centre;
        let outer = radius * radius;
        let inner = (radius - thick).max(0).pow(2);
        for y in -radius..=radius {
            for x in -radius..=radius {
                let d = x * x + y * y;
                if d <= outer && d >= inner {
                    self.put(cx + x, cy + y, colour);
                }
            }
        }
    }

    /// Where a click lands: a ring with a cross hair, outlined in white so it shows on red.
    pub fn target(&mut self, at: (i64, i64)) {
        let (x, y) = at;
        self.ring(at, 15, 5, WHITE);
        self.ring(at, 14, 3, RED);
        for (from, to) in [
            ((x - 22, y), (x - 6, y)),
            ((x + 6, y), (x + 22, y)),
            ((x, y - 22), (x, y - 6)),
            ((x, y + 6), (x, y + 22)),
        ] {
            self.line(from, to, 3, RED);
        }
        self.put(x, y, RED);
    }

    /// A drag: its path, a ring where it starts and a target where it ends.
    pub fn path(&mut self, from: (i64, i64), to: (i64, i64)) {
        self.line(from, to, 3, RED);
        self.ring(from, 8, 3, RED);
        self.target(to);
    }

    /// The window that receives keys: a frame round its rectangle.
    pub fn frame(&mut self, top_left: (i64, i64), bottom_right: (i64, i64)) {
        let (x0, y0) = top_left;
        let (x1, y1) = bottom_right;
        for (from, to) in [
            ((x0, y0), (x1, y0)),
            ((x1, y0), (x1, y1)),
            ((x1, y1), (x0, y1)),
            ((x0, y1), (x0, y0)),
        ] {
            self.line(from, to, 5, RED);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canvas(rgb: &mut Vec<u8>) -> Canvas<'_> {
        Canvas {
            rgb,
            width: 100,
            height: 80,
        }
    }

    fn at(rgb: &[u8], x: usize, y: usize) -> [u8; 3] {
        let i = (y * 100 + x) * 3;
        [rgb[i], rgb[i + 1], rgb[i + 2]]
    }

    #[test]
    fn a_target_is_drawn_round_the_point_and_nothing_far_away_changes() {
        let mut rgb = vec![0u8; 100 * 80 * 3];
        canvas(&mut rgb).target((50, 40));
        assert_eq!(at(&rgb, 50, 40), RED);
        assert_eq!(at(&rgb, 50 + 13, 40), RED);
        assert_eq!(at(&rgb, 50 - 20, 40), RED);
        assert_eq!(at(&rgb, 5, 5), [0, 0, 0]);
    }

    #[test]
    fn marks_off_the_edge_are_clipped_not_panics() {
        let mut rgb = vec![0u8; 100 * 80 * 3];
        let mut c = canvas(&mut rgb);
        c.target((0, 0));
        c.target((99, 79));
        c.path((-50, -50), (500, 500));
        c.frame((-10, -10), (200, 200));
        assert_eq!(at(&rgb, 0, 0), RED);
    }

    #[test]
    fn a_frame_outlines_the_window() {
        let mut rgb = vec![0u8; 100 * 80 * 3];
        canvas(&mut rgb).frame((10, 10), (60, 50));
        assert_eq!(at(&rgb, 35, 10), RED);
        assert_eq!(at(&rgb, 60, 30), RED);
        assert_eq!(at(&rgb, 35, 30), [0, 0, 0]);
    }
}
