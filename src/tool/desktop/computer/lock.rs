//! Is the screen locked? Asked of the screen savers on the session bus
//! (`org.freedesktop.ScreenSaver`, and GNOME's `org.gnome.ScreenSaver`): input while it is
//! locked would go to the lock screen — a password field — or nowhere the person can see.
//! A bus with neither service says nothing; the display's own screen-saver state is the
//! backend's [`locked`](super::super::backend::Desktop::locked).

use std::time::Duration;

const ASK_TIMEOUT: Duration = Duration::from_secs(2);

const SAVERS: &[(&str, &str)] = &[
    (
        "org.freedesktop.ScreenSaver",
        "/org/freedesktop/ScreenSaver",
    ),
    ("org.freedesktop.ScreenSaver", "/ScreenSaver"),
    ("org.gnome.ScreenSaver", "/org/gnome/ScreenSaver"),
];

/// `Some(why)` when a screen saver on the bus says it is active.
pub async fn locked_on_bus(address: Option<&str>) -> Option<String> {
    let address = address?;
    let ask = async {
        let connection = zbus::connection::Builder::address(address)
            .build()
            .await
            .ok()?;
        for (name, path) in SAVERS {
            let reply = connection
                .call_method(Some(*name), *path, Some(*name), "GetActive", &())
                .await;
            if let Ok(reply) = reply
                && let Ok(true) = reply.body().deserialize::<bool>()
            {
                return Some(format!("the screen is locked ({name} says it is active)"));
            }
        }
        None
    };
    tokio::time::timeout(ASK_TIMEOUT, ask).await.ok().flatten()
}
