//! `notify`: a freedesktop notification (`org.freedesktop.Notifications.Notify`) over the
//! session D-Bus.
//!
//! Spoken with zbus directly rather than through notify-rust: notify-rust only connects to the
//! bus named in corral's own process environment, while a tool must use the bus address of the
//! session's tool environment. The call itself is one method with eight arguments.

use std::collections::HashMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::super::output::parse_args;
use super::super::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use super::env_value;

const APP_NAME: &str = "corral";
const DESTINATION: &str = "org.freedesktop.Notifications";
const PATH: &str = "/org/freedesktop/Notifications";
/// Connecting and the call together; a bus that starts the notification daemon on demand
/// answers within a second or two.
const TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) struct Notify;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    title: String,
    message: String,
    #[serde(default)]
    urgency: Urgency,
}

#[derive(Deserialize, Default, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum Urgency {
    Low,
    #[default]
    Normal,
    Critical,
}

impl Urgency {
    /// The byte the spec's `urgency` hint carries.
    fn level(self) -> u8 {
        match self {
            Urgency::Low => 0,
            Urgency::Normal => 1,
            Urgency::Critical => 2,
        }
    }
}

impl Tool for Notify {
    fn name(&self) -> &'static str {
        "notify"
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let args: Args = parse_args(args)?;
            let address = env_value(ctx, "DBUS_SESSION_BUS_ADDRESS").ok_or_else(|| {
                ToolError::Refused(
                    "notify needs a D-Bus session bus: DBUS_SESSION_BUS_ADDRESS is not set".into(),
                )
            })?;
            let send = send(address, &args);
            let id = tokio::select! {
                biased;
                () = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
                sent = tokio::time::timeout(TIMEOUT, send) => sent.map_err(|_| {
                    ToolError::Io(format!(
                        "notify: no answer from the session bus at {address} within {}s",
                        TIMEOUT.as_secs()
                    ))
                })??,
            };
            Ok(ToolOutput::text(format!("notification {id} shown")))
        })
    }
}

/// A notification from corral itself (the terminal UI's waiting approval), on the bus at
/// `address`, through the same call the tool makes.
pub(crate) async fn notify_person(
    address: &str,
    title: &str,
    message: &str,
) -> Result<u32, ToolError> {
    let args = Args {
        title: title.to_string(),
        message: message.to_string(),
        urgency: Urgency::Critical,
    };
    tokio::time::timeout(TIMEOUT, send(address, &args))
        .await
        .map_err(|_| {
            ToolError::Io(format!(
                "notify: no answer from the session bus at {address}"
            ))
        })?
}

async fn send(address: &str, args: &Args) -> Result<u32, ToolError> {
    let connection = zbus::connection::Builder::address(address)
        .build()
        .await
        .map_err(|e| {
            ToolError::Io(format!(
                "notify: cannot connect to the D-Bus session bus at {address}: {e}"
            ))
        })?;
    let mut hints: HashMap<&str, zbus::Variant<'_>> = HashMap::new();
    hints.insert("urgency", zbus::Variant::U8(args.urgency.level()));
    let body = (
        APP_NAME,
        0u32, // replaces_id: a new notification
        "",   // app_icon
        args.title.as_str(),
        args.message.as_str(),
        Vec::<&str>::new(), // actions
        hints,
        -1i32, // expire_timeout: the server's default
    );
    let reply = connection
        .call_method(Some(DESTINATION), PATH, Some(DESTINATION), "Notify", &body)
        .await
        .map_err(call_error)?;
    reply
        .body()
        .deserialize::<u32>()
        .map_err(|e| ToolError::Io(format!("notify: unexpected reply from the server: {e}")))
}

fn call_error(e: zbus::Error) -> ToolError {
    let text = e.to_string();
    let hint = if text.contains("ServiceUnknown") || text.contains("NameHasNoOwner") {
        " (no notification server is running on this bus; start one, e.g. dunst)"
    } else if text.contains("Spawn.") {
        // The bus tried to start a notification daemon on demand and it died; dunst does
        // that when it has no display.
        " (the bus could not start a notification server; does it have a DISPLAY?)"
    } else {
        ""
    };
    ToolError::Io(format!(
        "notify: the notification call failed: {text}{hint}"
    ))
}

#[cfg(test)]
mod tests {
    use super::super::testing::context_with_env;
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn without_a_bus_the_error_says_what_is_missing() {
        let ctx = context_with_env(&[("DISPLAY", ":1")]);
        let err = Notify
            .call(json!({"title": "t", "message": "m"}), &ctx)
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "notify needs a D-Bus session bus: DBUS_SESSION_BUS_ADDRESS is not set"
        );
    }

    #[tokio::test]
    async fn an_unreachable_bus_is_named() {
        let ctx = context_with_env(&[(
            "DBUS_SESSION_BUS_ADDRESS",
            "unix:path=/nonexistent/corral-bus",
        )]);
        let err = Notify
            .call(json!({"title": "t", "message": "m"}), &ctx)
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains(
                "cannot connect to the D-Bus session bus at unix:path=/nonexistent/corral-bus"
            ),
            "{text}"
        );
    }

    #[tokio::test]
    async fn urgency_is_checked() {
        let ctx = context_with_env(&[]);
        let err = Notify
            .call(
                json!({"title": "t", "message": "m", "urgency": "panic"}),
                &ctx,
            )
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::InvalidArguments(_)), "{err}");
    }
}
