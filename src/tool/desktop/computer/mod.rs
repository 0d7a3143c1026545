//! `computer`: the mouse and keyboard on the person's desktop, and `windows`: its windows.
//!
//! A call is first inspected ([`inspect_call`], before the gate): its coordinates mapped from
//! the screenshot the model saw to real pixels, the window there found, the screen marked.
//! The gate judges that target and the person approves it; just before acting the window is
//! checked again and the action refused if it changed, or if the screen is locked.

mod action;
mod lock;
mod mark;
mod stop;
mod target;
mod view;
mod windows;

use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::backend::{self, Button, Desktop, DesktopEnv, Point};
use super::off_thread;
use super::pixels::{downsample, encode_png};
use crate::model::Image;
use crate::tool::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSettings};
pub use target::Target;
pub use view::DesktopState;
pub(crate) use windows::Windows;

use target::{inspect, looking, named, still_there, whole_view};
pub use view::View;

/// Steps a drag moves through between its ends, so applications see a motion, not a jump.
const DRAG_STEPS: i32 = 8;
/// Time an application gets to redraw before the screenshot that follows an action.
const SETTLE: Duration = Duration::from_millis(200);

pub(crate) struct Computer;

impl Tool for Computer {
    fn name(&self) -> &'static str {
        "computer"
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            // The loop inspected the call before the gate; anything else inspects it now.
            let target = match &ctx.desktop_target {
                Some(target) => target.as_ref().clone(),
                None => inspect_call(&args, &ctx.settings, &ctx.cancel).await?,
            };
            run(target, ctx).await
        })
    }
}

/// A `computer` call's target, found on the session's desktop: what the gate judges and the
/// person approves. Errors are the call's (bad coordinates, no display).
pub async fn inspect_call(
    args: &Value,
    settings: &ToolSettings,
    cancel: &CancellationToken,
) -> Result<Target, ToolError> {
    let (action, after) = action::parse(args.clone())?;
    if !action.acts() {
        return Ok(looking(action, after));
    }
    let env = DesktopEnv::from_env(&settings.env);
    let state = settings.desktop.clone();
    let max_edge = settings.screenshot_max_long_edge;
    off_thread(cancel, move || {
        let mut desk = backend::open(&env, "computer", &state.portal)?;
        inspect(desk.as_mut(), &state, action, after, max_edge)
    })
    .await
}

async fn run(target: Target, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let env = DesktopEnv::from_env(&ctx.settings.env);
    let state = ctx.settings.desktop.clone();
    if let Some(source) = stop::StopSource::of(&env)
        && let Err(why) = state.stop.arm(&source, &ctx.turn)
    {
        tracing::warn!(%why, "no stop key for this desktop session");
    }
    if let action::Action::Wait(secs) = target.action {
        tokio::select! {
            () = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
            () = tokio::time::sleep(Duration::from_secs_f64(secs)) => {}
        }
    }
    if target.action.acts()
        && let Some(why) = lock::locked_on_bus(env.session_bus.as_deref()).await
    {
        return Err(refused_locked(&why));
    }
    let max_edge = ctx.settings.screenshot_max_long_edge;
    off_thread(&ctx.cancel, move || {
        let mut desk = backend::open(&env, "computer", &state.portal)?;
        let desk = desk.as_mut();
        let said = if target.action.acts() {
            if let Some(why) = desk.locked()? {
                return Err(refused_locked(&why));
            }
            still_there(desk, &target)?;
            tracing::debug!(desktop = %desk.kind(), action = target.action.name(), "desktop action");
            perform(desk, &target)?
        } else {
            match target.action {
                action::Action::CursorPosition => cursor_said(desk, &state, max_edge)?,
                action::Action::Wait(secs) => format!("waited {secs} s"),
                _ => String::new(),
            }
        };
        let looked = matches!(target.action, action::Action::Screenshot);
        let acted = target.action.acts();
        // The model gets a picture when it looks or did not decline one; an action always
        // leaves one in the record, so the session's log replays what happened.
        let for_model = looked || (target.screenshot_after && !matches!(target.action, action::Action::CursorPosition));
        if !for_model && !acted {
            return Ok(ToolOutput::text(said));
        }
        if acted {
            std::thread::sleep(SETTLE);
        }
        let (image, view) = screen_picture(desk, max_edge)?;
        if !for_model {
            return Ok(ToolOutput {
                text: said,
                images: Vec::new(),
                recorded: vec![image],
            });
        }
        state.saw(view);
        let (w, h) = view.shown;
        let seen = format!(
            "screenshot {w}×{h} (the screen is {}×{}); coordinates are pixels in it",
            view.area.width, view.area.height
        );
        let text = if said.is_empty() {
            seen
        } else {
            format!("{said}\n{seen}")
        };
        Ok(ToolOutput {
            text,
            images: vec![image],
            recorded: Vec::new(),
        })
    })
    .await
}

fn refused_locked(why: &str) -> ToolError {
    ToolError::Refused(format!(
        "not done: {why}; desktop input waits until the person unlocks it"
    ))
}

/// Runs the action on the desktop; what happened, for the model.
fn perform(desk: &mut dyn Desktop, target: &Target) -> Result<String, ToolError> {
    use action::Action;
    let at = |p: Option<Point>| {
        p.ok_or_else(|| ToolError::Io("the action has no point to act at".into()))
    };
    let window = named(target.window.as_ref());
    match &target.action {
        Action::Move(_) => {
            desk.move_pointer(at(target.point)?)?;
        }
        Action::Click { button, count, .. } => {
            desk.move_pointer(at(target.point)?)?;
            for _ in 0..*count {
                desk.button(*button, true)?;
                desk.button(*button, false)?;
            }
        }
        Action::Drag { .. } => {
            let (from, to) = (at(target.point)?, at(target.end)?);
            desk.move_pointer(from)?;
            desk.button(Button::Left, true)?;
            for step in 1..=DRAG_STEPS {
                desk.move_pointer(Point {
                    x: from.x + (to.x - from.x) * step / DRAG_STEPS,
                    y: from.y + (to.y - from.y) * step / DRAG_STEPS,
                })?;
            }
            desk.button(Button::Left, false)?;
        }
        Action::Scroll {
            direction, amount, ..
        } => {
            desk.move_pointer(at(target.point)?)?;
            desk.scroll(*direction, *amount)?;
        }
        Action::Type(text) => desk.type_text(text)?,
        Action::Key { combos, .. } => {
            for combo in combos {
                desk.key(combo)?;
            }
        }
        Action::Screenshot | Action::CursorPosition | Action::Wait(_) => {}
    }
    Ok(format!(
        "{}: done ({window})",
        target.call.preview.description
    ))
}

fn cursor_said(
    desk: &mut dyn Desktop,
    state: &DesktopState,
    max_edge: u32,
) -> Result<String, ToolError> {
    let at = desk.cursor()?;
    let whole = whole_view(desk, max_edge)?;
    let view = state.view_or(whole);
    Ok(match view.to_shown(at) {
        Some((x, y)) => format!(
            "the pointer is at [{x}, {y}] in the last screenshot (screen pixel {}, {})",
            at.x, at.y
        ),
        None => format!(
            "the pointer is at screen pixel ({}, {}), outside the last screenshot",
            at.x, at.y
        ),
    })
}

/// The whole screen downsampled as the model gets it, and its view.
fn screen_picture(desk: &mut dyn Desktop, max_edge: u32) -> Result<(Image, View), ToolError> {
    let view = whole_view(desk, max_edge)?;
    let frame = desk.capture(None)?;
    Ok((picture(frame, view)?, view))
}

/// A captured frame as a PNG of the view's shown size.
fn picture(frame: backend::Frame, view: View) -> Result<Image, ToolError> {
    let (w, h) = view.shown;
    let rgb = if (frame.width, frame.height) == (w, h) {
        frame.rgb
    } else {
        downsample(&frame.rgb, frame.width, frame.height, w, h)
    };
    let png = encode_png(&rgb, w, h)
        .map_err(|e| ToolError::Io(format!("cannot encode the screenshot: {e}")))?;
    Ok(Image {
        mime_type: "image/png".into(),
        data_base64: base64::engine::general_purpose::STANDARD.encode(png),
    })
}
