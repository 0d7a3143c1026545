//! The desktop through the xdg-desktop-portal, for Wayland compositors that offer a client no
//! input or capture protocols of their own (GNOME's mutter, KDE's KWin): pixels from the
//! Screenshot portal, pointer and keyboard from the RemoteDesktop portal. The desktop shows
//! the person its own consent dialog when corral first acts; the session it grants is kept in
//! the corral session's [`PortalHold`] until that session ends.
//!
//! The portal gives no window list, no window under a point, no focus and no lock state: those
//! answers are "unknown", `windows` is refused, and an approval shows the point on the screen
//! without naming a window.

mod remote;
mod request;
mod screenshot;

use std::sync::{Arc, Mutex, PoisonError};

use tokio::runtime::Handle;

use super::backend::{
    Button, Desktop, DesktopEnv, Frame, Point, Rect, ScrollDirection, WindowInfo, failed,
};
use super::keys::{KeyCombo, char_keysym};
use crate::tool::ToolError;
use remote::Remote;

/// How long a pointer motion is given to arrive before the next event.
const MOTION_SETTLE: std::time::Duration = std::time::Duration::from_millis(100);

/// What a corral session holds of the portal: the bus connection and, once the person has
/// allowed it, the remote desktop session. Dropped with the corral session, which ends the
/// remote session.
#[derive(Debug, Default)]
pub struct PortalHold {
    inner: tokio::sync::Mutex<Held>,
    /// Where corral last put the pointer: the portal does not say where it is.
    pointer: Mutex<Option<Point>>,
}

#[derive(Debug, Default)]
struct Held {
    /// The bus it was opened on, and the connection.
    conn: Option<(String, zbus::Connection)>,
    remote: Option<Arc<Remote>>,
}

impl Drop for PortalHold {
    fn drop(&mut self) {
        let remote = self.inner.get_mut().remote.take();
        if let (Some(remote), Ok(runtime)) = (remote, Handle::try_current()) {
            runtime.spawn(async move { remote.close().await });
        }
    }
}

impl PortalHold {
    async fn connection(&self, bus: &str) -> Result<zbus::Connection, ToolError> {
        let mut held = self.inner.lock().await;
        if let Some((address, conn)) = &held.conn
            && address == bus
        {
            return Ok(conn.clone());
        }
        let conn = zbus::connection::Builder::address(bus)
            .build()
            .await
            .map_err(|e| request::bus_error("connect", &e))?;
        held.remote = None;
        held.conn = Some((bus.to_owned(), conn.clone()));
        Ok(conn)
    }

    /// The remote desktop session, started (and the person asked) on first use.
    async fn remote(&self, bus: &str) -> Result<Arc<Remote>, ToolError> {
        let conn = self.connection(bus).await?;
        let mut held = self.inner.lock().await;
        if let Some(remote) = &held.remote {
            return Ok(remote.clone());
        }
        let remote = Arc::new(Remote::start(conn).await?);
        held.remote = Some(remote.clone());
        Ok(remote)
    }

    /// Forgets a session the desktop ended (the person stopped sharing): the next action
    /// asks again.
    async fn ended(&self) {
        if let Some(remote) = self.inner.lock().await.remote.take() {
            remote.close().await;
        }
    }
}

/// The desktop through the portal, on a corral session's [`PortalHold`].
pub struct PortalDesktop {
    bus: String,
    hold: Arc<PortalHold>,
    runtime: Handle,
}

impl PortalDesktop {
    pub fn connect(env: &DesktopEnv, hold: Arc<PortalHold>) -> Result<PortalDesktop, ToolError> {
        let bus = env.session_bus.clone().ok_or_else(|| {
            ToolError::Refused(
                "this Wayland desktop offers input only through the xdg-desktop-portal, and \
                 DBUS_SESSION_BUS_ADDRESS is not set"
                    .into(),
            )
        })?;
        let runtime = Handle::try_current()
            .map_err(|e| failed(format!("the desktop portal needs the async runtime: {e}")))?;
        Ok(PortalDesktop { bus, hold, runtime })
    }

    fn wait<T>(&self, work: impl Future<Output = Result<T, ToolError>>) -> Result<T, ToolError> {
        self.runtime.block_on(work)
    }

    /// Runs `act` on the remote session; a session the desktop ended is dropped, so the next
    /// action asks the person again.
    fn act<F, Fut>(&self, act: F) -> Result<(), ToolError>
    where
        F: FnOnce(Arc<Remote>) -> Fut,
        Fut: Future<Output = Result<(), ToolError>>,
    {
        self.wait(async {
            let remote = self.hold.remote(&self.bus).await?;
            let done = act(remote).await;
            if done.is_err() {
                self.hold.ended().await;
            }
            done
        })
    }

    fn keysym_taps(&self, keysyms: Vec<i32>) -> Result<(), ToolError> {
        self.act(|remote| async move {
            for keysym in keysyms {
                remote.keysym(keysym, true).await?;
                remote.keysym(keysym, false).await?;
            }
            Ok(())
        })
    }
}

impl Desktop for PortalDesktop {
    fn kind(&self) -> String {
        "wayland (xdg-desktop-portal)".into()
    }

    fn screen_size(&mut self) -> Result<(u32, u32), ToolError> {
        // The monitors a started session shares, else the size of a picture of the screen.
        let shared = self.wait(async { Ok(self.hold.inner.lock().await.remote.clone()) })?;
        if let Some(remote) = shared {
            let screen = remote.screen();
            return Ok((screen.width, screen.height));
        }
        let frame = self.capture(None)?;
        Ok((frame.width, frame.height))
    }

    fn capture(&mut self, area: Option<Rect>) -> Result<Frame, ToolError> {
        let frame = self.wait(async {
            let conn = self.hold.connection(&self.bus).await?;
            screenshot::screenshot(&conn).await
        })?;
        Ok(match area {
            Some(area) => crop(&frame, area),
            None => frame,
        })
    }

    fn move_pointer(&mut self, to: Point) -> Result<(), ToolError> {
        self.act(|remote| async move {
            remote.move_to(to).await?;
            // The compositor moves the pointer (and tells the window under it) on its own
            // time: a press sent at once can reach the window the pointer left.
            tokio::time::sleep(MOTION_SETTLE).await;
            Ok(())
        })?;
        *self
            .hold
            .pointer
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(to);
        Ok(())
    }

    fn button(&mut self, button: Button, pressed: bool) -> Result<(), ToolError> {
        // Linux input codes: BTN_LEFT, BTN_RIGHT, BTN_MIDDLE.
        let code = match button {
            Button::Left => 0x110,
            Button::Right => 0x111,
            Button::Middle => 0x112,
        };
        self.act(|remote| async move { remote.button(code, pressed).await })
    }

    fn scroll(&mut self, direction: ScrollDirection, amount: u32) -> Result<(), ToolError> {
        let steps = i32::try_from(amount).unwrap_or(i32::MAX);
        let (axis, steps) = match direction {
            ScrollDirection::Down => (0, steps),
            ScrollDirection::Up => (0, -steps),
            ScrollDirection::Right => (1, steps),
            ScrollDirection::Left => (1, -steps),
        };
        self.act(|remote| async move { remote.scroll(axis, steps).await })
    }

    fn key(&mut self, combo: &KeyCombo) -> Result<(), ToolError> {
        let modifiers: Vec<i32> = combo.modifiers.iter().map(|m| keysym(m.keysym())).collect();
        let key = keysym(combo.keysym);
        self.act(|remote| async move {
            for m in &modifiers {
                remote.keysym(*m, true).await?;
            }
            remote.keysym(key, true).await?;
            remote.keysym(key, false).await?;
            for m in modifiers.iter().rev() {
                remote.keysym(*m, false).await?;
            }
            Ok(())
        })
    }

    fn type_text(&mut self, text: &str) -> Result<(), ToolError> {
        self.keysym_taps(text.chars().map(|c| keysym(char_keysym(c))).collect())
    }

    fn cursor(&mut self) -> Result<Point, ToolError> {
        self.hold
            .pointer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .ok_or_else(|| {
                ToolError::NotFound(
                    "the desktop portal does not tell programs where the pointer is; corral \
                     knows it only after moving it (use mouse_move first)"
                        .into(),
                )
            })
    }

    fn windows(&mut self) -> Result<Vec<WindowInfo>, ToolError> {
        Err(no_windows())
    }

    fn window_at(&mut self, _at: Point) -> Result<Option<WindowInfo>, ToolError> {
        Ok(None)
    }

    fn focused(&mut self) -> Result<Option<WindowInfo>, ToolError> {
        Ok(None)
    }

    fn focus(&mut self, _id: &str) -> Result<(), ToolError> {
        Err(no_windows())
    }

    fn locked(&mut self) -> Result<Option<String>, ToolError> {
        // The screen savers on the session bus (GNOME's, KDE's) are asked before every action.
        Ok(None)
    }
}

fn no_windows() -> ToolError {
    ToolError::Refused(
        "this desktop (driven through the xdg-desktop-portal) tells no program about other \
         programs' windows: use computer screenshots and clicks instead"
            .into(),
    )
}

/// Keysyms are 29-bit values; the portal takes them as `i32`.
fn keysym(value: u32) -> i32 {
    i32::try_from(value).unwrap_or(0)
}

/// The part of `frame` inside `area`, clipped to it.
fn crop(frame: &Frame, area: Rect) -> Frame {
    let x0 = area.x.clamp(0, frame.width as i32) as u32;
    let y0 = area.y.clamp(0, frame.height as i32) as u32;
    let x1 = (i64::from(area.x) + i64::from(area.width)).clamp(0, i64::from(frame.width)) as u32;
    let y1 = (i64::from(area.y) + i64::from(area.height)).clamp(0, i64::from(frame.height)) as u32;
    let (width, height) = (x1.saturating_sub(x0), y1.saturating_sub(y0));
    let mut rgb = Vec::with_capacity((width * height * 3) as usize);
    for y in y0..y1 {
        let start = ((y * frame.width + x0) * 3) as usize;
        rgb.extend_from_slice(&frame.rgb[start..start + (width * 3) as usize]);
    }
    Frame { width, height, rgb }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crop_is_clipped_to_the_frame() {
        let frame = Frame {
            width: 3,
            height: 2,
            rgb: (0..18).collect(),
        };
        let part = crop(
            &frame,
            Rect {
                x: 1,
                y: 1,
                width: 5,
                height: 5,
            },
        );
        assert_eq!((part.width, part.height), (2, 1));
        assert_eq!(part.rgb, [12, 13, 14, 15, 16, 17]);
    }
}
