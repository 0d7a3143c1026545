//! `windows`: list the desktop's windows, focus one, or capture one alone. The capture
//! becomes the view coordinates refer to, so a click after it is in that window's picture.

use serde::Deserialize;
use serde_json::Value;

use super::super::backend::{self, Desktop, DesktopEnv, WindowInfo};
use super::super::off_thread;
use super::picture;
use super::view::View;
use crate::tool::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};

pub(crate) struct Windows;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    action: String,
    id: Option<String>,
    title: Option<String>,
}

impl Tool for Windows {
    fn name(&self) -> &'static str {
        "windows"
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let args: Args = serde_json::from_value(args)
                .map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
            let env = DesktopEnv::from_env(&ctx.settings.env);
            let state = ctx.settings.desktop.clone();
            let max_edge = ctx.settings.screenshot_max_long_edge;
            off_thread(&ctx.cancel, move || {
                let mut desk = backend::open(&env, "windows", &state.portal)?;
                let desk = desk.as_mut();
                match args.action.as_str() {
                    "list" => Ok(ToolOutput::text(listed(&desk.windows()?))),
                    "focus" => {
                        let window = chosen(desk, &args)?;
                        desk.focus(&window.id)?;
                        Ok(ToolOutput::text(format!("focused {}", line(&window))))
                    }
                    "screenshot" => {
                        let window = chosen(desk, &args)?;
                        let view = View::of(window.geometry, max_edge);
                        let frame = desk.capture(Some(window.geometry))?;
                        let image = picture(frame, view)?;
                        state.saw(view);
                        let (w, h) = view.shown;
                        Ok(ToolOutput {
                            text: format!(
                                "screenshot of {} only, {w}×{h}; coordinates are pixels in it \
                                 until the next screenshot",
                                line(&window)
                            ),
                            images: vec![image],
                            recorded: Vec::new(),
                        })
                    }
                    other => Err(ToolError::InvalidArguments(format!(
                        "unknown action {other:?}: list, focus or screenshot"
                    ))),
                }
            })
            .await
        })
    }
}

/// The window named by id, or by a title that matches exactly one window.
fn chosen(desk: &mut dyn Desktop, args: &Args) -> Result<WindowInfo, ToolError> {
    let windows = desk.windows()?;
    if let Some(id) = args.id.as_deref().filter(|id| !id.is_empty()) {
        return windows.into_iter().find(|w| w.id == id).ok_or_else(|| {
            ToolError::NotFound(format!(
                "no window has id {id:?}; action list gives the ids"
            ))
        });
    }
    let Some(title) = args.title.as_deref().filter(|t| !t.is_empty()) else {
        return Err(ToolError::InvalidArguments(
            "name the window: id (from action list) or title".into(),
        ));
    };
    let wanted = title.to_lowercase();
    let exact: Vec<&WindowInfo> = windows
        .iter()
        .filter(|w| w.title.to_lowercase() == wanted)
        .collect();
    let matching: Vec<&WindowInfo> = if exact.len() == 1 {
        exact
    } else {
        windows
            .iter()
            .filter(|w| w.title.to_lowercase().contains(&wanted))
            .collect()
    };
    match matching.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(ToolError::NotFound(format!(
            "no window's title contains {title:?}; action list shows them"
        ))),
        many => Err(ToolError::InvalidArguments(format!(
            "{} windows match {title:?}: {}; give the id",
            many.len(),
            many.iter().map(|w| line(w)).collect::<Vec<_>>().join("; ")
        ))),
    }
}

/// One window per line. Titles and names are the windows' own words, quoted as strings so
/// nothing in them reads as another field.
fn listed(windows: &[WindowInfo]) -> String {
    if windows.is_empty() {
        return "no windows".into();
    }
    windows
        .iter()
        .rev()
        .map(|w| {
            let g = w.geometry;
            format!(
                "{} x={} y={} width={} height={}{}",
                line(w),
                g.x,
                g.y,
                g.width,
                g.height,
                if w.focused { " focused" } else { "" }
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn line(w: &WindowInfo) -> String {
    let pid = w.pid.map(|p| format!(" pid={p}")).unwrap_or_default();
    format!("id={} app={:?} title={:?}{pid}", w.id, w.app, w.title)
}

#[cfg(test)]
mod tests {
    use super::super::super::backend::Rect;
    use super::*;

    fn window(id: &str, title: &str, focused: bool) -> WindowInfo {
        WindowInfo {
            id: id.into(),
            title: title.into(),
            app: "XTerm".into(),
            pid: Some(7),
            geometry: Rect {
                x: 1,
                y: 2,
                width: 30,
                height: 40,
            },
            focused,
        }
    }

    #[test]
    fn a_list_puts_the_top_window_first_and_quotes_titles() {
        let text = listed(&[
            window("0x1", "below", false),
            window("0x2", "top\" focused", true),
        ]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            r#"id=0x2 app="XTerm" title="top\" focused" pid=7 x=1 y=2 width=30 height=40 focused"#
        );
        assert!(lines[1].starts_with("id=0x1 "));
        assert_eq!(listed(&[]), "no windows");
    }
}
