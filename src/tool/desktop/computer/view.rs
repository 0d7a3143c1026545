//! The screenshot the model last saw, and the mapping from its pixels back to the screen's:
//! a screenshot is downsampled to `screenshot_max_long_edge` (and a window's covers only that
//! window), so the model's `[x, y]` is in its own picture, not on the screen.

use std::sync::Mutex;

use super::super::backend::{Point, Rect};
use super::super::pixels::fit;
use super::action::Shown;
use crate::tool::ToolError;

/// One screenshot as the model was shown it: which part of the screen, at what size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct View {
    /// The part of the screen it shows, in real pixels.
    pub area: Rect,
    /// Its size as the model got it.
    pub shown: (u32, u32),
}

impl View {
    /// A picture of `area` downsampled so its long edge is at most `max_edge`.
    pub fn of(area: Rect, max_edge: u32) -> View {
        View {
            area,
            shown: fit(area.width, area.height, max_edge),
        }
    }

    /// The screen pixel under the picture's `[x, y]`: the centre of the block of pixels it
    /// was averaged from.
    pub fn to_screen(self, at: Shown) -> Result<Point, ToolError> {
        let (w, h) = self.shown;
        let [x, y] = at;
        if x < 0 || y < 0 || x >= i64::from(w) || y >= i64::from(h) {
            return Err(ToolError::InvalidArguments(format!(
                "[{x}, {y}] is outside the last screenshot, which is {w}×{h}: coordinates are \
                 pixels in it, from [0, 0] at the top left"
            )));
        }
        let scale = |v: i64, shown: u32, real: u32| -> i32 {
            let mapped = ((v as f64 + 0.5) * f64::from(real) / f64::from(shown.max(1))) as i64;
            mapped.clamp(0, i64::from(real.max(1)) - 1) as i32
        };
        Ok(Point {
            x: self.area.x + scale(x, w, self.area.width),
            y: self.area.y + scale(y, h, self.area.height),
        })
    }

    /// Where a screen point falls in the picture (for marking it), if it does.
    pub fn to_shown(self, at: Point) -> Option<(i64, i64)> {
        if !self.area.contains(at) {
            return None;
        }
        let (w, h) = self.shown;
        let x = i64::from(at.x - self.area.x) * i64::from(w) / i64::from(self.area.width.max(1));
        let y = i64::from(at.y - self.area.y) * i64::from(h) / i64::from(self.area.height.max(1));
        Some((x, y))
    }
}

/// A session's desktop state shared by its calls: the last view, and the stop key.
#[derive(Debug, Default)]
pub struct DesktopState {
    view: Mutex<Option<View>>,
    pub stop: super::stop::StopKey,
    /// The desktop portal's session, where the desktop is driven through it.
    pub portal: std::sync::Arc<super::super::portal::PortalHold>,
}

impl DesktopState {
    /// The view coordinates refer to: the last screenshot, else the whole screen as a
    /// screenshot now would show it.
    pub fn view_or(&self, whole: View) -> View {
        self.lock().unwrap_or(whole)
    }

    /// The model has just been shown this picture.
    pub fn saw(&self, view: View) {
        *self.view.lock().unwrap_or_else(|p| p.into_inner()) = Some(view);
    }

    /// Coordinates refer to the whole screen again (as a screenshot of it now would show
    /// it): the model has just been shown the whole screen.
    pub fn forget(&self) {
        *self.view.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    fn lock(&self) -> Option<View> {
        *self.view.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Each session has its own state: two settings are equal only when they share it.
impl PartialEq for DesktopState {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn screen(width: u32, height: u32) -> Rect {
        Rect {
            x: 0,
            y: 0,
            width,
            height,
        }
    }

    #[test]
    fn a_downsampled_point_maps_to_the_centre_of_its_block() {
        let view = View::of(screen(3000, 2000), 1500);
        assert_eq!(view.shown, (1500, 1000));
        assert_eq!(view.to_screen([0, 0]).unwrap(), Point { x: 1, y: 1 });
        assert_eq!(
            view.to_screen([750, 500]).unwrap(),
            Point { x: 1501, y: 1001 }
        );
        assert_eq!(
            view.to_screen([1499, 999]).unwrap(),
            Point { x: 2999, y: 1999 }
        );
        assert_eq!(view.to_shown(Point { x: 1501, y: 1001 }), Some((750, 500)));
    }

    #[test]
    fn a_window_view_is_offset_and_unscaled_when_small() {
        let view = View::of(
            Rect {
                x: 200,
                y: 150,
                width: 400,
                height: 300,
            },
            1568,
        );
        assert_eq!(view.to_screen([10, 20]).unwrap(), Point { x: 210, y: 170 });
        assert_eq!(view.to_shown(Point { x: 10, y: 10 }), None);
    }

    #[test]
    fn points_off_the_picture_are_refused_with_its_size() {
        let view = View::of(screen(1024, 768), 1568);
        let error = view.to_screen([1024, 5]).unwrap_err().to_string();
        assert!(
            error.contains("outside the last screenshot, which is 1024×768"),
            "{error}"
        );
        assert!(view.to_screen([-1, 5]).is_err());
    }

    #[test]
    fn the_last_view_wins_over_the_whole_screen() {
        let state = DesktopState::default();
        let whole = View::of(screen(100, 100), 50);
        assert_eq!(state.view_or(whole), whole);
        let window = View::of(
            Rect {
                x: 5,
                y: 5,
                width: 10,
                height: 10,
            },
            50,
        );
        state.saw(window);
        assert_eq!(state.view_or(whole), window);
    }
}
