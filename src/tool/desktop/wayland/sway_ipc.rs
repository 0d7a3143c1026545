//! Windows on sway through its IPC socket (`$SWAYSOCK`, i3's framing: `i3-ipc`, a u32 length,
//! a u32 message type, JSON). Wayland itself gives a client no view of other clients' windows;
//! sway's tree has all of them with title, app_id, pid, geometry and focus.

use std::io::{Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use serde_json::Value;

use super::super::backend::{Rect, WindowInfo, failed};
use crate::tool::ToolError;

const MAGIC: &[u8; 6] = b"i3-ipc";
const RUN_COMMAND: u32 = 0;
const SUBSCRIBE: u32 = 2;
const GET_TREE: u32 = 4;
pub(super) const GET_CONFIG: u32 = 9;
/// A reply larger than this is not a window tree.
const MAX_REPLY: usize = 64 << 20;
/// sway answers at once; a socket that does not is not sway.
const IPC_TIMEOUT: Duration = Duration::from_secs(5);

pub(super) struct SwayIpc {
    stream: UnixStream,
    path: String,
}

impl SwayIpc {
    pub fn connect(path: &str) -> Result<SwayIpc, ToolError> {
        let stream = UnixStream::connect(path)
            .map_err(|e| failed(format!("cannot reach sway's IPC socket {path}: {e}")))?;
        stream
            .set_read_timeout(Some(IPC_TIMEOUT))
            .and_then(|()| stream.set_write_timeout(Some(IPC_TIMEOUT)))
            .map_err(|e| failed(format!("sway IPC {path}: {e}")))?;
        Ok(SwayIpc {
            stream,
            path: path.to_owned(),
        })
    }

    pub(super) fn request(&mut self, kind: u32, payload: &str) -> Result<Value, ToolError> {
        self.send(kind, payload)?;
        let (reply_kind, body) = self.receive()?;
        if reply_kind != kind {
            return Err(self.error(&format!("unexpected reply (type {reply_kind})")));
        }
        Ok(body)
    }

    fn error(&self, e: &dyn std::fmt::Display) -> ToolError {
        failed(format!("sway IPC {}: {e}", self.path))
    }

    fn send(&mut self, kind: u32, payload: &str) -> Result<(), ToolError> {
        let len = u32::try_from(payload.len()).map_err(|e| self.error(&e))?;
        let mut message = Vec::with_capacity(14 + payload.len());
        message.extend_from_slice(MAGIC);
        message.extend_from_slice(&len.to_ne_bytes());
        message.extend_from_slice(&kind.to_ne_bytes());
        message.extend_from_slice(payload.as_bytes());
        self.stream.write_all(&message).map_err(|e| self.error(&e))
    }

    /// The next message (a reply, or an event on a subscribed connection): its type and body.
    fn receive(&mut self) -> Result<(u32, Value), ToolError> {
        let mut header = [0u8; 14];
        self.stream
            .read_exact(&mut header)
            .map_err(|e| self.error(&e))?;
        if &header[..6] != MAGIC {
            return Err(self.error(&"the reply is not i3-ipc"));
        }
        let word = |at: usize| {
            u32::from_ne_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
        };
        let (len, kind) = (word(6) as usize, word(10));
        if len > MAX_REPLY {
            return Err(self.error(&format!("a {len}-byte message")));
        }
        let mut body = vec![0u8; len];
        self.stream
            .read_exact(&mut body)
            .map_err(|e| self.error(&e))?;
        let body = serde_json::from_slice(&body).map_err(|e| self.error(&e))?;
        Ok((kind, body))
    }

    /// Turns this connection into a stream of `events` (`SUBSCRIBE`, i3's event names); then
    /// [`SwayIpc::next_event`] reads them. Waits for events block with no timeout.
    pub(super) fn subscribe(&mut self, events: &[&str]) -> Result<(), ToolError> {
        let names = serde_json::to_string(events).map_err(|e| self.error(&e))?;
        let reply = self.request(SUBSCRIBE, &names)?;
        if reply.get("success").and_then(Value::as_bool) != Some(true) {
            return Err(self.error(&format!("sway refused the subscription: {reply}")));
        }
        self.stream
            .set_read_timeout(None)
            .map_err(|e| self.error(&e))
    }

    /// The next event of a subscribed connection: its type (with the event bit) and body.
    pub(super) fn next_event(&mut self) -> Result<(u32, Value), ToolError> {
        self.receive()
    }

    /// Ends a blocked [`SwayIpc::next_event`] from another thread (through a clone of the
    /// socket).
    pub(super) fn closer(&self) -> Result<UnixStream, ToolError> {
        self.stream.try_clone().map_err(|e| self.error(&e))
    }

    /// Runs a sway command; `Err` with sway's own words when it fails.
    pub(super) fn command(&mut self, command: &str) -> Result<(), ToolError> {
        let reply = self.request(RUN_COMMAND, command)?;
        match reply.as_array().and_then(|all| all.first()) {
            Some(o) if o.get("success").and_then(Value::as_bool) == Some(true) => Ok(()),
            Some(o) => Err(self.error(&format!(
                "`{command}` failed: {}",
                o.get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("no reason given")
            ))),
            None => Err(self.error(&format!("no answer to `{command}`"))),
        }
    }

    /// Every window in sway's tree, in tree order (floating windows of a workspace after its
    /// tiled ones, which is also the order they are drawn in).
    pub fn windows(&mut self) -> Result<Vec<SwayWindow>, ToolError> {
        let tree = self.request(GET_TREE, "")?;
        let mut found = Vec::new();
        collect(&tree, &mut found);
        Ok(found)
    }

    /// Focuses (and so raises and shows) the window with this container id.
    pub fn focus(&mut self, id: &str) -> Result<(), ToolError> {
        // Only digits reach the command: an id is chosen by the model, and sway runs
        // everything after a `;` as another command.
        let con_id: u64 = id.parse().map_err(|_| {
            ToolError::InvalidArguments(format!(
                "{id:?} is not a sway window id (a number, as `windows` lists them)"
            ))
        })?;
        let reply = self.request(RUN_COMMAND, &format!("[con_id={con_id}] focus"))?;
        let outcome = reply.as_array().and_then(|all| all.first());
        match outcome {
            Some(o) if o.get("success").and_then(Value::as_bool) == Some(true) => Ok(()),
            Some(o) => Err(ToolError::NotFound(format!(
                "sway cannot focus window {con_id}: {}",
                o.get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("no reason given")
            ))),
            None => Err(failed(format!("sway gave no answer to focusing {con_id}"))),
        }
    }
}

/// A window from sway's tree, with whether it shows on screen (not on a hidden workspace,
/// tab or the scratchpad) to tell which window a point is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SwayWindow {
    pub info: WindowInfo,
    pub visible: bool,
    pub floating: bool,
}

fn collect(node: &Value, found: &mut Vec<SwayWindow>) {
    let kind = node.get("type").and_then(Value::as_str).unwrap_or_default();
    let children = |key: &str| {
        node.get(key)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let (tiled, floating) = (children("nodes"), children("floating_nodes"));
    let is_window = matches!(kind, "con" | "floating_con")
        && tiled.is_empty()
        && floating.is_empty()
        && (node.get("app_id").is_some_and(|v| !v.is_null())
            || node.get("window").is_some_and(|v| !v.is_null()));
    if is_window {
        found.push(window(node, kind == "floating_con"));
    }
    for child in tiled.iter().chain(&floating) {
        collect(child, found);
    }
}

fn window(node: &Value, floating: bool) -> SwayWindow {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_owned();
    let number = |v: Option<&Value>, key: &str| {
        v.and_then(|r| r.get(key))
            .and_then(Value::as_i64)
            .unwrap_or(0)
    };
    let (rect, inner) = (node.get("rect"), node.get("window_rect"));
    let size = |key: &str| u32::try_from(number(inner, key)).unwrap_or(0);
    let at = |key: &str| i32::try_from(number(rect, key) + number(inner, key)).unwrap_or(0);
    let app = match node.get("app_id").and_then(Value::as_str) {
        Some(app_id) => app_id.to_owned(),
        // An XWayland window: its WM_CLASS, like the X11 backend reports.
        None => {
            let props = node.get("window_properties");
            let class = text(props.and_then(|p| p.get("class")));
            if class.is_empty() {
                text(props.and_then(|p| p.get("instance")))
            } else {
                class
            }
        }
    };
    SwayWindow {
        info: WindowInfo {
            id: node
                .get("id")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                .to_string(),
            title: text(node.get("name")),
            app,
            pid: node
                .get("pid")
                .and_then(Value::as_u64)
                .and_then(|p| u32::try_from(p).ok())
                .filter(|&p| p > 0),
            geometry: Rect {
                x: at("x"),
                y: at("y"),
                width: size("width"),
                height: size("height"),
            },
            focused: node.get("focused").and_then(Value::as_bool) == Some(true),
        },
        visible: node.get("visible").and_then(Value::as_bool) == Some(true),
        floating,
    }
}

/// The window drawn on top at `at`: floating windows cover tiled ones, later ones earlier.
pub(super) fn topmost_at(
    windows: &[SwayWindow],
    at: super::super::backend::Point,
) -> Option<WindowInfo> {
    let shown = || {
        windows
            .iter()
            .rev()
            .filter(|w| w.visible && w.info.geometry.contains(at))
    };
    shown()
        .find(|w| w.floating)
        .or_else(|| shown().next())
        .map(|w| w.info.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn leaf(id: i64, app: &str, x: i64, visible: bool) -> Value {
        json!({"id": id, "type": "con", "name": format!("title {id}"), "app_id": app, "pid": 40 + id,
               "focused": id == 7, "visible": visible, "nodes": [], "floating_nodes": [],
               "rect": {"x": x, "y": 0, "width": 100, "height": 100},
               "window_rect": {"x": 2, "y": 3, "width": 96, "height": 95}})
    }

    #[test]
    fn the_tree_gives_windows_with_content_geometry_and_the_top_one_at_a_point() {
        let mut float = leaf(9, "float", 50, true);
        float["type"] = json!("floating_con");
        let tree = json!({"id": 1, "type": "root", "nodes": [
            {"id": 2, "type": "output", "nodes": [
                {"id": 3, "type": "workspace", "nodes": [leaf(7, "foot", 0, true), leaf(8, "gedit", 100, true)],
                 "floating_nodes": [float]},
                {"id": 4, "type": "workspace", "nodes": [leaf(10, "hidden", 0, false)]}
            ]}
        ]});
        let mut found = Vec::new();
        collect(&tree, &mut found);
        let ids: Vec<&str> = found.iter().map(|w| w.info.id.as_str()).collect();
        assert_eq!(ids, ["7", "8", "9", "10"]);
        let foot = &found[0].info;
        assert_eq!(
            foot.geometry,
            Rect {
                x: 2,
                y: 3,
                width: 96,
                height: 95
            }
        );
        assert_eq!(
            (foot.pid, foot.focused, foot.title.as_str()),
            (Some(47), true, "title 7")
        );
        use super::super::super::backend::Point;
        assert_eq!(topmost_at(&found, Point { x: 60, y: 50 }).unwrap().id, "9");
        assert_eq!(topmost_at(&found, Point { x: 20, y: 50 }).unwrap().id, "7");
        assert_eq!(topmost_at(&found, Point { x: 160, y: 50 }).unwrap().id, "8");
        assert!(topmost_at(&found, Point { x: 500, y: 50 }).is_none());
    }
}
