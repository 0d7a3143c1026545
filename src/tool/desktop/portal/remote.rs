//! Input through `org.freedesktop.portal.RemoteDesktop`, with a ScreenCast source selected
//! on the same session only for the stream ids absolute pointer motion is given in (corral
//! takes its pixels from the Screenshot portal, so no PipeWire stream is read).
//!
//! Starting a session shows the person the desktop's own consent dialog (GNOME: "Allow
//! remote interaction", then Share). A session is started once, on a session's first action,
//! and kept until the session ends, so the person is asked once, not per click.

use std::time::Duration;

use zbus::Connection;
use zbus::{ObjectPath, OwnedObjectPath, Variant};

use super::request::{Options, Results, bus_error, request, string, token};
use crate::tool::ToolError;
use crate::tool::desktop::backend::{Point, Rect, failed};

const REMOTE: &str = "org.freedesktop.portal.RemoteDesktop";
const SCREENCAST: &str = "org.freedesktop.portal.ScreenCast";
/// Calls that show nothing answer at once.
const QUICK: Duration = Duration::from_secs(10);
/// The consent dialog waits for the person.
const CONSENT_WAIT: Duration = Duration::from_secs(120);
/// Input sent while the consent dialog is still closing can be lost.
const AFTER_CONSENT: Duration = Duration::from_millis(1000);
const KEYBOARD: u32 = 1;
const POINTER: u32 = 2;
const MONITOR: u32 = 1;
const SHIFT_L: i32 = 0xffe1;

/// A started remote desktop session.
#[derive(Debug)]
pub(super) struct Remote {
    conn: Connection,
    session: OwnedObjectPath,
    /// The monitors shared, as the portal places them in the layout.
    streams: Vec<Stream>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stream {
    node: u32,
    area: Rect,
}

impl Remote {
    /// Creates a session, asks for keyboard, pointer and the monitors, and starts it: the
    /// person answers the desktop's dialog.
    pub(super) async fn start(conn: Connection) -> Result<Remote, ToolError> {
        let created = {
            let handle = token("create");
            let mut options = Options::new();
            options.insert("handle_token", Variant::from(handle.as_str()));
            let session_token = token("session");
            options.insert(
                "session_handle_token",
                Variant::from(session_token.as_str()),
            );
            request(&conn, REMOTE, "CreateSession", &handle, &(options,), QUICK).await?
        };
        let session = string(&created, "session_handle")
            .ok_or_else(|| failed("the desktop portal made no remote desktop session"))?;
        let path =
            ObjectPath::try_from(session.as_str()).map_err(|e| bus_error("CreateSession", &e))?;
        let devices = token("devices");
        let mut options = Options::new();
        options.insert("handle_token", Variant::from(devices.as_str()));
        options.insert("types", Variant::from(KEYBOARD | POINTER));
        request(
            &conn,
            REMOTE,
            "SelectDevices",
            &devices,
            &(&path, options),
            QUICK,
        )
        .await?;
        let sources = token("sources");
        let mut options = Options::new();
        options.insert("handle_token", Variant::from(sources.as_str()));
        options.insert("types", Variant::from(MONITOR));
        options.insert("multiple", Variant::from(true));
        request(
            &conn,
            SCREENCAST,
            "SelectSources",
            &sources,
            &(&path, options),
            QUICK,
        )
        .await?;
        tracing::warn!(
            "the desktop asks whether corral may control it: allow remote interaction in its \
             dialog (GNOME: switch on \u{201c}Allow remote interaction\u{201d}, then Share)"
        );
        let started = {
            let handle = token("start");
            let mut options = Options::new();
            options.insert("handle_token", Variant::from(handle.as_str()));
            request(
                &conn,
                REMOTE,
                "Start",
                &handle,
                &(&path, "", options),
                CONSENT_WAIT,
            )
            .await?
        };
        let granted = match started.get("devices").map(|v| &**v) {
            Some(Variant::U32(devices)) => *devices,
            _ => 0,
        };
        if granted & (KEYBOARD | POINTER) != KEYBOARD | POINTER {
            return Err(ToolError::Refused(
                "the desktop did not allow remote interaction (keyboard and pointer): nothing \
                 was sent; allow it in the dialog next time"
                    .into(),
            ));
        }
        let streams = streams(&started);
        if streams.is_empty() {
            return Err(failed("the desktop portal shared no monitor to point in"));
        }
        let remote = Remote {
            conn,
            session: OwnedObjectPath::from(path.into_owned()),
            streams,
        };
        tokio::time::sleep(AFTER_CONSENT).await;
        // A new portal keyboard's first key reaches no window (the focus arrives with it):
        // a Shift tap takes that place.
        remote.keysym(SHIFT_L, true).await?;
        remote.keysym(SHIFT_L, false).await?;
        Ok(remote)
    }

    /// The area the shared monitors cover.
    pub(super) fn screen(&self) -> Rect {
        let left = self.streams.iter().map(|s| s.area.x).min().unwrap_or(0);
        let top = self.streams.iter().map(|s| s.area.y).min().unwrap_or(0);
        let right = self
            .streams
            .iter()
            .map(|s| i64::from(s.area.x) + i64::from(s.area.width))
            .max()
            .unwrap_or(0);
        let bottom = self
            .streams
            .iter()
            .map(|s| i64::from(s.area.y) + i64::from(s.area.height))
            .max()
            .unwrap_or(0);
        Rect {
            x: left,
            y: top,
            width: u32::try_from(right - i64::from(left)).unwrap_or(0),
            height: u32::try_from(bottom - i64::from(top)).unwrap_or(0),
        }
    }

    pub(super) async fn move_to(&self, to: Point) -> Result<(), ToolError> {
        let stream = self
            .streams
            .iter()
            .find(|s| s.area.contains(to))
            .ok_or_else(|| {
                ToolError::InvalidArguments(format!(
                    "({}, {}) is on no monitor the desktop shares",
                    to.x, to.y
                ))
            })?;
        let x = f64::from(to.x - stream.area.x);
        let y = f64::from(to.y - stream.area.y);
        let body = (self.session.as_ref(), Options::new(), stream.node, x, y);
        self.call("NotifyPointerMotionAbsolute", &body).await
    }

    pub(super) async fn button(&self, code: i32, pressed: bool) -> Result<(), ToolError> {
        let body = (
            self.session.as_ref(),
            Options::new(),
            code,
            u32::from(pressed),
        );
        self.call("NotifyPointerButton", &body).await
    }

    /// `steps` wheel clicks on `axis` (0 vertical, 1 horizontal; positive down or right).
    pub(super) async fn scroll(&self, axis: u32, steps: i32) -> Result<(), ToolError> {
        let body = (self.session.as_ref(), Options::new(), axis, steps);
        self.call("NotifyPointerAxisDiscrete", &body).await
    }

    pub(super) async fn keysym(&self, keysym: i32, pressed: bool) -> Result<(), ToolError> {
        let body = (
            self.session.as_ref(),
            Options::new(),
            keysym,
            u32::from(pressed),
        );
        self.call("NotifyKeyboardKeysym", &body).await
    }

    /// A `Notify*` call: the session and (empty) options, then the call's own arguments.
    async fn call<B>(&self, method: &str, body: &B) -> Result<(), ToolError>
    where
        B: serde::Serialize + zbus::DynamicType,
    {
        self.conn
            .call_method(
                Some(super::request::PORTAL),
                super::request::PORTAL_PATH,
                Some(REMOTE),
                method,
                body,
            )
            .await
            .map(|_| ())
            .map_err(|e| bus_error(method, &e))
    }

    /// Ends the session (the desktop's "being controlled" indicator goes away).
    pub(super) async fn close(&self) {
        let closed = self
            .conn
            .call_method(
                Some(super::request::PORTAL),
                self.session.as_ref(),
                Some("org.freedesktop.portal.Session"),
                "Close",
                &(),
            )
            .await;
        if let Err(e) = closed {
            tracing::debug!(error = %e, "the remote desktop session did not close");
        }
    }
}

/// The `streams` of a Start answer (`a(ua{sv})`): node id, position and size.
fn streams(results: &Results) -> Vec<Stream> {
    let Some(Variant::Array(all)) = results.get("streams").map(|v| &**v) else {
        return Vec::new();
    };
    all.inner()
        .iter()
        .filter_map(|stream| {
            let Variant::Structure(stream) = stream else {
                return None;
            };
            let [Variant::U32(node), Variant::Dict(props)] = stream.fields() else {
                return None;
            };
            let property = |name: &str| {
                props.iter().find_map(|(key, value)| match key {
                    Variant::Str(key) if key.as_str() == name => pair(value),
                    _ => None,
                })
            };
            let position = property("position").unwrap_or((0, 0));
            let size = property("size")?;
            Some(Stream {
                node: *node,
                area: Rect {
                    x: position.0,
                    y: position.1,
                    width: u32::try_from(size.0).ok()?,
                    height: u32::try_from(size.1).ok()?,
                },
            })
        })
        .collect()
}

/// An `(ii)`, inside a variant or not.
fn pair(value: &Variant) -> Option<(i32, i32)> {
    match value {
        Variant::Variant(inner) => pair(inner),
        Variant::Structure(s) => match s.fields() {
            [Variant::I32(a), Variant::I32(b)] => Some((*a, *b)),
            _ => None,
        },
        _ => None,
    }
}
