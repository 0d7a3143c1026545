//! Before a desktop action is judged: where it lands on the real screen, which window is
//! there (or has the keyboard), the screen with that marked — what the gate's rules match
//! and the person sees — and, just before it runs, the check that it is still so.

use base64::Engine as _;

use super::super::backend::{Desktop, Point, Rect, WindowInfo};
use super::super::pixels::{downsample, encode_png};
use super::action::Action;
use super::mark::Canvas;
use super::view::{DesktopState, View};
use crate::event::{DesktopPreview, DesktopWindow, PreviewImage};
use crate::tool::{CallTarget, Danger, ToolError};

/// Characters of a window title kept in descriptions and rules.
const TITLE_CHARS: usize = 200;

/// A desktop action with everything found out about it.
#[derive(Debug, Clone)]
pub struct Target {
    pub action: Action,
    pub screenshot_after: bool,
    /// Where the pointer acts, in real pixels; the start of a drag.
    pub point: Option<Point>,
    /// The end of a drag.
    pub end: Option<Point>,
    /// The window the action reaches: under the point, else the focused one.
    pub window: Option<WindowInfo>,
    /// The window under the end of a drag.
    pub end_window: Option<WindowInfo>,
    /// What the gate and the person are given.
    pub call: CallTarget,
}

/// The whole screen as a screenshot now would show it.
pub fn whole_view(desk: &mut dyn Desktop, max_edge: u32) -> Result<View, ToolError> {
    let (width, height) = desk.screen_size()?;
    Ok(View::of(
        Rect {
            x: 0,
            y: 0,
            width,
            height,
        },
        max_edge,
    ))
}

/// An action that only looks or waits: nothing on the screen to find.
pub fn looking(action: Action, screenshot_after: bool) -> Target {
    let name = action.name();
    let (danger, description) = match &action {
        Action::Wait(secs) => (Danger::Safe, format!("wait {secs} s")),
        Action::CursorPosition => (Danger::Moderate, "read where the pointer is".into()),
        _ => (Danger::Moderate, "take a screenshot of the screen".into()),
    };
    let call = CallTarget {
        subjects: vec![format!("action:{name}")],
        grant: format!("computer:{name}"),
        always: Ok(format!("computer {name}, for this session")),
        danger: Some(danger),
        preview: DesktopPreview {
            action: name.into(),
            description,
            ..DesktopPreview::default()
        },
    };
    Target {
        action,
        screenshot_after,
        point: None,
        end: None,
        window: None,
        end_window: None,
        call,
    }
}

/// Finds an acting action's target on the desktop (blocking).
pub fn inspect(
    desk: &mut dyn Desktop,
    state: &DesktopState,
    action: Action,
    screenshot_after: bool,
    max_edge: u32,
) -> Result<Target, ToolError> {
    let whole = whole_view(desk, max_edge)?;
    let view = state.view_or(whole);
    let map = |at| view.to_screen(at);
    let (point, end) = match &action {
        Action::Move(at) => (Some(map(*at)?), None),
        Action::Click { at, .. } | Action::Scroll { at, .. } => match at {
            Some(at) => (Some(map(*at)?), None),
            None => (Some(desk.cursor()?), None),
        },
        Action::Drag { from, to } => (Some(map(*from)?), Some(map(*to)?)),
        _ => (None, None),
    };
    let window = match point {
        Some(at) => desk.window_at(at)?,
        None => desk.focused()?,
    };
    let end_window = match end {
        Some(at) => desk.window_at(at)?,
        None => None,
    };
    let image = marked_screen(desk, whole, point, end, window.as_ref())?;
    let call = judged(&action, point, end, window.as_ref(), image);
    Ok(Target {
        action,
        screenshot_after,
        point,
        end,
        window,
        end_window,
        call,
    })
}

/// The window the approved action would reach now differs from the one approved (another
/// window came up under the point, the window moved, the focus went elsewhere): refused,
/// since the person approved a click on something else.
pub fn still_there(desk: &mut dyn Desktop, target: &Target) -> Result<(), ToolError> {
    if !target.action.acts() {
        return Ok(());
    }
    let now = match target.point {
        Some(at) => desk.window_at(at)?,
        None => desk.focused()?,
    };
    let end_now = match target.end {
        Some(at) => desk.window_at(at)?,
        None => None,
    };
    for (approved, now, place) in [
        (&target.window, &now, target.point),
        (&target.end_window, &end_now, target.end),
    ] {
        if !same_window(approved.as_ref(), now.as_ref()) {
            let where_ = match place {
                Some(p) => format!("under ({}, {})", p.x, p.y),
                None => "with the keyboard focus".into(),
            };
            return Err(ToolError::Refused(format!(
                "not done: the window {where_} changed since the action was approved (was {}, \
                 now {}); take a new screenshot and try again",
                named(approved.as_ref()),
                named(now.as_ref())
            )));
        }
    }
    Ok(())
}

fn same_window(a: Option<&WindowInfo>, b: Option<&WindowInfo>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            a.id == b.id && a.app == b.app && a.title == b.title && a.geometry == b.geometry
        }
        _ => false,
    }
}

/// A window as one line: `Gnome-calculator “Calculator”`.
pub fn named(window: Option<&WindowInfo>) -> String {
    match window {
        None => "no window (the desktop)".into(),
        Some(w) => {
            let title: String = w.title.chars().take(TITLE_CHARS).collect();
            let app = if w.app.is_empty() { "a window" } else { &w.app };
            format!("{app} “{title}”")
        }
    }
}

/// Rules' subjects, the "always" grant and the person's preview for an acting action.
fn judged(
    action: &Action,
    point: Option<Point>,
    end: Option<Point>,
    window: Option<&WindowInfo>,
    image: Option<PreviewImage>,
) -> CallTarget {
    let name = action.name();
    let app = window.map(|w| w.app.as_str()).unwrap_or_default();
    let mut subjects = vec![format!("action:{name}")];
    if let Some(w) = window {
        subjects.push(format!("window:{}", w.app));
        subjects.push(format!(
            "title:{}",
            w.title.chars().take(TITLE_CHARS).collect::<String>()
        ));
    }
    let in_window = match window {
        Some(_) => format!("in {}", named(window)),
        None => "on the desktop (no window)".into(),
    };
    let apps = if app.is_empty() {
        "windows with no application name".to_string()
    } else {
        format!("{app} windows")
    };
    let at = |p: Option<Point>| p.map(|p| format!("({}, {})", p.x, p.y)).unwrap_or_default();
    let (description, text, grant, always) = match action {
        Action::Type(text) => (
            format!(
                "type {} characters {}",
                text.chars().count(),
                in_window.replacen("in ", "into ", 1)
            ),
            Some(text.clone()),
            format!("computer:type:{app}:{text}"),
            // A person saw this text; other text asks again.
            Ok(format!(
                "typing exactly this text into {apps}, for this session (other text asks)"
            )),
        ),
        Action::Key { combos, text } => {
            let keys: Vec<String> = combos
                .iter()
                .map(|c| c.to_string().to_lowercase())
                .collect();
            for key in &keys {
                subjects.push(format!("key:{key}"));
            }
            let keys = keys.join(" ");
            (
                format!("press {keys} {in_window}"),
                Some(text.clone()),
                format!("computer:key:{keys}:{app}"),
                Ok(format!("pressing {keys} in {apps}, for this session")),
            )
        }
        Action::Drag { .. } => (
            format!("drag from {} to {} {in_window}", at(point), at(end)),
            None,
            format!("computer:drag:{app}"),
            Ok(format!("drags starting in {apps}, for this session")),
        ),
        Action::Scroll {
            direction, amount, ..
        } => (
            format!(
                "scroll {} {amount} at {} {in_window}",
                format!("{direction:?}").to_lowercase(),
                at(point)
            ),
            None,
            format!("computer:scroll:{app}"),
            Ok(format!("scrolling in {apps}, for this session")),
        ),
        Action::Move(_) => (
            format!("move the pointer to {} {in_window}", at(point)),
            None,
            format!("computer:mouse_move:{app}"),
            Ok(format!("moving the pointer over {apps}, for this session")),
        ),
        _ => (
            format!("{} at {} {in_window}", name.replace('_', " "), at(point)),
            None,
            format!("computer:{name}:{app}"),
            Ok(format!(
                "{} in {apps}, for this session",
                name.replace('_', " ")
            )),
        ),
    };
    if let Some(text) = &text
        && matches!(action, Action::Type(_))
    {
        subjects.push(format!("text:{text}"));
    }
    CallTarget {
        subjects,
        grant,
        always,
        danger: None,
        preview: DesktopPreview {
            action: name.into(),
            description,
            point: point.map(|p| [p.x, p.y]),
            end: end.map(|p| [p.x, p.y]),
            text,
            window: window.map(|w| DesktopWindow {
                id: w.id.clone(),
                title: w.title.chars().take(TITLE_CHARS).collect(),
                app: w.app.clone(),
                pid: w.pid,
            }),
            image,
        },
    }
}

/// The screen as it is, downsampled, with the point, path or window marked.
fn marked_screen(
    desk: &mut dyn Desktop,
    whole: View,
    point: Option<Point>,
    end: Option<Point>,
    window: Option<&WindowInfo>,
) -> Result<Option<PreviewImage>, ToolError> {
    let frame = desk.capture(None)?;
    let (w, h) = whole.shown;
    let mut rgb = if (frame.width, frame.height) == (w, h) {
        frame.rgb
    } else {
        downsample(&frame.rgb, frame.width, frame.height, w, h)
    };
    let mut canvas = Canvas {
        rgb: &mut rgb,
        width: w,
        height: h,
    };
    let shown = |p: Point| whole.to_shown(p);
    match (point.and_then(shown), end.and_then(shown)) {
        (Some(from), Some(to)) => canvas.path(from, to),
        (Some(at), None) => canvas.target(at),
        _ => {
            if let Some(g) = window.map(|w| w.geometry) {
                let corner = |x: i32, y: i32| {
                    whole.to_shown(Point {
                        x: x.clamp(0, whole.area.width as i32 - 1),
                        y: y.clamp(0, whole.area.height as i32 - 1),
                    })
                };
                let right = g.x.saturating_add(g.width as i32 - 1);
                let bottom = g.y.saturating_add(g.height as i32 - 1);
                if let (Some(a), Some(b)) = (corner(g.x, g.y), corner(right, bottom)) {
                    canvas.frame(a, b);
                }
            }
        }
    }
    let png = encode_png(&rgb, w, h)
        .map_err(|e| ToolError::Io(format!("cannot encode the marked screenshot: {e}")))?;
    Ok(Some(PreviewImage {
        mime_type: "image/png".into(),
        data_base64: base64::engine::general_purpose::STANDARD.encode(png),
    }))
}
