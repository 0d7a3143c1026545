//! What the session's Wayland desktop offers corral, for `doctor`: which protocols the
//! compositor advertises, whether sway's IPC answers, whether an xdg-desktop-portal is on the
//! session bus (which corral drives where the compositor offers no input protocol of its own).

use std::time::Duration;

use super::super::backend::DesktopEnv;
use super::client::Client;
use super::sway_ipc::SwayIpc;

/// Longest wait for the compositor, sway or the bus during the whole check.
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// One thing the desktop may offer, and whether it does.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Capability {
    /// What it gives corral: `mouse input`, `keyboard input`, `screen capture` …
    pub name: &'static str,
    pub available: bool,
    /// The protocol or service, or why it is missing.
    pub detail: String,
}

/// The protocols each capability needs, any one of them enough.
const PROTOCOLS: [(&str, &[&str]); 4] = [
    ("mouse input", &["zwlr_virtual_pointer_manager_v1"]),
    ("keyboard input", &["zwp_virtual_keyboard_manager_v1"]),
    ("screen capture", &["zwlr_screencopy_manager_v1"]),
    (
        "clipboard",
        &[
            "zwlr_data_control_manager_v1",
            "ext_data_control_manager_v1",
        ],
    ),
];

/// Checks the Wayland desktop named in `env` (the session's tool environment).
pub(crate) async fn capabilities(env: &DesktopEnv) -> Vec<Capability> {
    let probe_env = env.clone();
    let wayland = tokio::task::spawn_blocking(move || wayland_capabilities(&probe_env));
    let (wayland, portal) = tokio::join!(
        tokio::time::timeout(CHECK_TIMEOUT, wayland),
        tokio::time::timeout(CHECK_TIMEOUT, portal(env.session_bus.clone()))
    );
    let mut found = match wayland {
        Ok(Ok(found)) => found,
        Ok(Err(e)) => vec![missing(
            "wayland compositor",
            format!("the check failed: {e}"),
        )],
        Err(_) => vec![missing("wayland compositor", "it does not answer".into())],
    };
    found.push(match portal {
        Ok(found) => found,
        Err(_) => missing(
            "xdg-desktop-portal",
            "the session bus does not answer".into(),
        ),
    });
    found
}

fn missing(name: &'static str, detail: String) -> Capability {
    Capability {
        name,
        available: false,
        detail,
    }
}

fn wayland_capabilities(env: &DesktopEnv) -> Vec<Capability> {
    let client = match Client::connect(env) {
        Ok(client) => client,
        Err(e) => return vec![missing("wayland compositor", e.to_string())],
    };
    let mut found = vec![Capability {
        name: "wayland compositor",
        available: true,
        detail: client.socket.display().to_string(),
    }];
    for (name, protocols) in PROTOCOLS {
        let offered = protocols
            .iter()
            .find(|p| !client.globals_named(p).is_empty());
        found.push(Capability {
            name,
            available: offered.is_some(),
            detail: match offered {
                Some(protocol) => (*protocol).to_owned(),
                None => format!("the compositor does not offer {}", protocols.join(" or ")),
            },
        });
    }
    found.push(match &env.swaysock {
        None => missing("window list", "SWAYSOCK is not set (sway's IPC)".into()),
        Some(path) => match SwayIpc::connect(path).and_then(|mut ipc| ipc.windows()) {
            Ok(_) => Capability {
                name: "window list",
                available: true,
                detail: format!("sway IPC at {path}"),
            },
            Err(e) => missing("window list", e.to_string()),
        },
    });
    found
}

/// Whether `org.freedesktop.portal.Desktop` runs on the session bus or can be started there.
async fn portal(address: Option<String>) -> Capability {
    const PORTAL: &str = "org.freedesktop.portal.Desktop";
    let Some(address) = address else {
        return missing(
            "xdg-desktop-portal",
            "DBUS_SESSION_BUS_ADDRESS is not set".into(),
        );
    };
    let check = async {
        let conn = zbus::connection::Builder::address(address.as_str())
            .build()
            .await?;
        let ask = |method: &'static str, with_name: bool| {
            let conn = conn.clone();
            async move {
                let destination = Some("org.freedesktop.DBus");
                let path = "/org/freedesktop/DBus";
                let interface = Some("org.freedesktop.DBus");
                if with_name {
                    conn.call_method(destination, path, interface, method, &(PORTAL,))
                        .await
                } else {
                    conn.call_method(destination, path, interface, method, &())
                        .await
                }
            }
        };
        let reply = ask("NameHasOwner", true).await?;
        if reply.body().deserialize::<bool>()? {
            return Ok::<_, zbus::Error>(Some("running"));
        }
        let reply = ask("ListActivatableNames", false).await?;
        let names: Vec<String> = reply.body().deserialize()?;
        Ok(names
            .iter()
            .any(|n| n == PORTAL)
            .then_some("can be started"))
    };
    match check.await {
        Ok(Some(how)) => Capability {
            name: "xdg-desktop-portal",
            available: true,
            detail: format!(
                "{PORTAL} {how} (used for input and screenshots where the compositor offers \
                 neither)"
            ),
        },
        Ok(None) => missing(
            "xdg-desktop-portal",
            format!("{PORTAL} is not on the session bus"),
        ),
        Err(e) => missing("xdg-desktop-portal", format!("session bus: {e}")),
    }
}
