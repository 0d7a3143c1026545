//! The stop key on sway. Wayland gives a client no global keys, but sway binds keys for its
//! IPC clients: Pause is bound to a no-op command whose `binding` event a watcher thread waits
//! for. The binding is sway's own, so it works whichever window has the focus, the virtual
//! keyboard corral types with included.

use std::net::Shutdown;
use std::os::unix::net::UnixStream;

use serde_json::Value;

use super::sway_ipc::{GET_CONFIG, SwayIpc};
use crate::tool::ToolError;
use crate::tool::desktop::backend::failed;

/// The command Pause runs: it does nothing, and its `binding` event names it.
const STOP_COMMAND: &str = "nop corral-stop-key";
const BIND: &str = "bindsym --no-repeat Pause nop corral-stop-key";
const UNBIND: &str = "unbindsym --no-repeat Pause";
/// i3's `binding` event: the event bit and event 5.
const BINDING_EVENT: u32 = 0x8000_0005;

/// Binds Pause in the sway at `socket` to the stop command, unless the person's configuration
/// binds Pause itself (corral does not take a key the person uses).
pub(crate) fn bind(socket: &str) -> Result<(), ToolError> {
    let mut ipc = SwayIpc::connect(socket)?;
    let config = ipc.request(GET_CONFIG, "")?;
    let text = config.get("config").and_then(Value::as_str).unwrap_or("");
    if binds_pause(text) {
        return Err(failed(
            "sway's configuration binds Pause already: corral leaves it to that binding",
        ));
    }
    ipc.command(BIND)
}

/// Takes the binding back (with a fresh connection: the watcher's may be gone).
pub(crate) fn unbind(socket: &str) {
    if let Err(e) = SwayIpc::connect(socket).and_then(|mut ipc| ipc.command(UNBIND)) {
        tracing::debug!(error = %e, "the stop key's binding could not be removed");
    }
}

/// Watches sway's `binding` events on a thread of its own and calls `pressed` for each press
/// of the stop key; the watch ends when the returned stream is shut down (or sway goes away).
pub(crate) fn watch(
    socket: &str,
    pressed: impl Fn() + Send + 'static,
) -> Result<UnixStream, ToolError> {
    let mut ipc = SwayIpc::connect(socket)?;
    ipc.subscribe(&["binding"])?;
    let closer = ipc.closer()?;
    std::thread::Builder::new()
        .name("corral-stop-key".into())
        .spawn(move || {
            loop {
                match ipc.next_event() {
                    Ok((BINDING_EVENT, event)) if is_stop(&event) => pressed(),
                    Ok(_) => {}
                    Err(e) => {
                        tracing::debug!(error = %e, "the stop key's watch ended");
                        return;
                    }
                }
            }
        })
        .map_err(|e| failed(format!("cannot start the stop key's watcher: {e}")))?;
    Ok(closer)
}

/// Ends a [`watch`].
pub(crate) fn stop_watching(closer: &UnixStream) {
    let _ = closer.shutdown(Shutdown::Both);
}

fn is_stop(event: &Value) -> bool {
    event.get("change").and_then(Value::as_str) == Some("run")
        && event
            .pointer("/binding/command")
            .and_then(Value::as_str)
            .is_some_and(|command| command.trim() == STOP_COMMAND)
}

/// Whether a sway configuration binds Pause (alone or in a combination) to anything.
fn binds_pause(config: &str) -> bool {
    config.lines().any(|line| {
        let mut words = line.split_whitespace();
        matches!(words.next(), Some("bindsym" | "bindcode"))
            && words
                .find(|word| !word.starts_with("--"))
                .is_some_and(|combo| {
                    combo
                        .split('+')
                        .any(|key| key.eq_ignore_ascii_case("pause"))
                })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pause_binding_in_the_configuration_is_found_whatever_its_flags_and_modifiers() {
        assert!(binds_pause("bindsym Pause exec foo"));
        assert!(binds_pause("  bindsym --release Mod4+pause exec foo\n"));
        assert!(!binds_pause(
            "bindsym Mod4+Return exec foot\n# bindsym Pause x"
        ));
        assert!(!binds_pause("exec Pause"));
    }

    #[test]
    fn only_the_stop_commands_binding_event_counts() {
        let event = |command: &str| json!({"change": "run", "binding": {"command": command}});
        assert!(is_stop(&event(STOP_COMMAND)));
        assert!(!is_stop(&event("exec foot")));
        assert!(!is_stop(
            &json!({"change": "other", "binding": {"command": STOP_COMMAND}})
        ));
    }
}
