//! Whether the session's environment reaches a desktop: a Wayland compositor or an X display
//! that accepts a connection (screen and clipboard) and a D-Bus session bus that does
//! (notifications). Tools whose
//! manifest `needs` what is missing are not offered: a model offered `clipboard_read` on a
//! headless box calls it, fails, and learns nothing.
//!
//! Probed for real, from the session's tool environment (the one the tools would use), with a
//! short timeout each, both at once; an absent variable costs nothing.

use std::time::Duration;

use crate::tool::manifest::Need;

/// Longest wait for a display or bus to accept a connection.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// What the desktop gives this session: `Err` says why a need is not met.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Presence {
    display: Result<(), String>,
    session_bus: Result<(), String>,
}

impl Presence {
    /// Probes the display and the session bus named in `env` (the tool environment).
    pub async fn probe(env: &[(String, String)]) -> Presence {
        let desk = super::backend::DesktopEnv::from_env(env);
        let bus = desk.session_bus.clone();
        let (display, session_bus) =
            tokio::join!(display(desk.display.clone(), desk), session_bus(bus));
        Presence {
            display,
            session_bus,
        }
    }

    /// Why `need` is not met, or `None` when it is.
    pub fn lacks(&self, need: Need) -> Option<&str> {
        let met = match need {
            Need::Display => &self.display,
            Need::SessionBus => &self.session_bus,
        };
        met.as_ref().err().map(String::as_str)
    }
}

async fn display(
    display: Option<String>,
    desktop: super::backend::DesktopEnv,
) -> Result<(), String> {
    // With WAYLAND_DISPLAY set the tools act through the compositor (backend::open), so the
    // compositor is what must answer, DISPLAY or not.
    if let Some(wayland) = desktop.wayland_display.clone() {
        let connect = tokio::task::spawn_blocking(move || super::wayland::probe(&desktop));
        return match tokio::time::timeout(PROBE_TIMEOUT, connect).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(e))) => Err(format!("the Wayland display {wayland} refuses: {e}")),
            Ok(Err(e)) => Err(format!(
                "the Wayland display {wayland} could not be probed: {e}"
            )),
            Err(_) => Err(format!(
                "the Wayland compositor at {wayland} does not answer"
            )),
        };
    }
    let Some(name) = display else {
        return Err("no display: DISPLAY is not set".into());
    };
    let shown = name.clone();
    let connect = tokio::task::spawn_blocking(move || {
        x11rb::connect(Some(&name))
            .map(|_| ())
            .map_err(|e| e.to_string())
    });
    match tokio::time::timeout(PROBE_TIMEOUT, connect).await {
        Ok(Ok(Ok(()))) => Ok(()),
        Ok(Ok(Err(e))) => Err(format!("the display {shown} refuses connections: {e}")),
        Ok(Err(e)) => Err(format!("the display {shown} could not be probed: {e}")),
        Err(_) => Err(format!("the display {shown} does not answer")),
    }
}

async fn session_bus(address: Option<String>) -> Result<(), String> {
    let Some(address) = address else {
        return Err("no session bus: DBUS_SESSION_BUS_ADDRESS is not set".into());
    };
    let connect = async {
        zbus::connection::Builder::address(address.as_str())
            .build()
            .await
            .map(|_| ())
    };
    match tokio::time::timeout(PROBE_TIMEOUT, connect).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(format!(
            "the session bus at {address} refuses connections: {e}"
        )),
        Err(_) => Err(format!("the session bus at {address} does not answer")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[tokio::test]
    async fn nothing_set_means_nothing_offered_and_says_why() {
        let presence = Presence::probe(&env(&[("DISPLAY", "")])).await;
        assert_eq!(
            presence.lacks(Need::Display),
            Some("no display: DISPLAY is not set")
        );
        assert_eq!(
            presence.lacks(Need::SessionBus),
            Some("no session bus: DBUS_SESSION_BUS_ADDRESS is not set")
        );
    }

    #[tokio::test]
    async fn a_variable_that_leads_nowhere_is_missing_too() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("bus");
        let presence = Presence::probe(&env(&[
            ("DISPLAY", ":4242"),
            (
                "DBUS_SESSION_BUS_ADDRESS",
                &format!("unix:path={}", socket.display()),
            ),
        ]))
        .await;
        let display = presence.lacks(Need::Display).unwrap();
        assert!(
            display.starts_with("the display :4242 refuses"),
            "{display}"
        );
        let bus = presence.lacks(Need::SessionBus).unwrap();
        assert!(bus.starts_with("the session bus at unix:path="), "{bus}");
    }
}
