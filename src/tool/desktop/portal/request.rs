//! The xdg-desktop-portal's request pattern: a method that takes a `handle_token` returns a
//! `Request` object at once, and the answer comes later as that object's `Response` signal
//! (0 done, 1 cancelled by the person, 2 failed). The signal is subscribed to before the call,
//! on the path the token determines, so an answer quicker than the call's reply is not lost.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::StreamExt as _;
use zbus::Connection;
use zbus::{OwnedVariant, Variant};

use crate::tool::ToolError;
use crate::tool::desktop::backend::failed;

pub(super) const PORTAL: &str = "org.freedesktop.portal.Desktop";
pub(super) const PORTAL_PATH: &str = "/org/freedesktop/portal/desktop";

/// Options as the portal takes them (`a{sv}`).
pub(super) type Options<'a> = HashMap<&'a str, Variant<'a>>;
/// Results as the portal gives them.
pub(super) type Results = HashMap<String, OwnedVariant>;

static TOKENS: AtomicU64 = AtomicU64::new(0);

/// A fresh token, unique in this process (the portal's path is per connection and token).
pub(super) fn token(what: &str) -> String {
    format!(
        "corral_{what}_{}_{}",
        std::process::id(),
        TOKENS.fetch_add(1, Ordering::Relaxed)
    )
}

/// Calls `method` of the portal's `interface` with `body` (whose options carry
/// `handle_token = token`) and waits up to `wait` for its `Response`.
pub(super) async fn request<B>(
    conn: &Connection,
    interface: &str,
    method: &str,
    token: &str,
    body: &B,
    wait: Duration,
) -> Result<Results, ToolError>
where
    B: serde::Serialize + zbus::DynamicType,
{
    let sender = conn
        .unique_name()
        .ok_or_else(|| failed("the session bus gave corral no name"))?
        .trim_start_matches(':')
        .replace('.', "_");
    let path = format!("{PORTAL_PATH}/request/{sender}/{token}");
    let rule = format!(
        "type='signal',interface='org.freedesktop.portal.Request',member='Response',path='{path}'"
    );
    let mut answers = zbus::MessageStream::for_match_rule(rule.as_str(), conn, None)
        .await
        .map_err(|e| bus_error(method, &e))?;
    let reply = conn
        .call_method(Some(PORTAL), PORTAL_PATH, Some(interface), method, body)
        .await
        .map_err(|e| bus_error(method, &e))?;
    // Anyone on the bus can send a signal on the request's path: only the answer from the
    // portal that took the call counts (a forged one could name any file as the screenshot).
    let portal = reply.header().sender().map(|name| name.to_string());
    let deadline = tokio::time::Instant::now() + wait;
    let answer = loop {
        let next = tokio::time::timeout_at(deadline, answers.next())
            .await
            .map_err(|_| {
                failed(format!(
                    "the desktop portal did not answer {method} within {} s",
                    wait.as_secs()
                ))
            })?
            .ok_or_else(|| failed(format!("the session bus closed during {method}")))?
            .map_err(|e| bus_error(method, &e))?;
        let from = next.header().sender().map(|name| name.to_string());
        if from.is_some() && from == portal {
            break next;
        }
        tracing::warn!(
            ?from,
            ?portal,
            "ignored a portal answer from another sender"
        );
    };
    let (code, results): (u32, Results) = answer
        .body()
        .deserialize()
        .map_err(|e| bus_error(method, &e))?;
    match code {
        0 => Ok(results),
        1 => Err(ToolError::Refused(format!(
            "the person declined the desktop portal's {method} dialog"
        ))),
        _ => Err(failed(format!("the desktop portal's {method} failed"))),
    }
}

pub(super) fn bus_error(what: &str, e: &dyn std::fmt::Display) -> ToolError {
    failed(format!("desktop portal ({what}): {e}"))
}

/// A string result (`uri`, `session_handle`).
pub(super) fn string(results: &Results, key: &str) -> Option<String> {
    match &**results.get(key)? {
        Variant::Str(s) => Some(s.to_string()),
        Variant::ObjectPath(p) => Some(p.to_string()),
        _ => None,
    }
}
