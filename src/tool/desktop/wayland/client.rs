//! The Wayland connection: the compositor's globals, its outputs, and waiting for events
//! with a deadline (the client library's own blocking calls wait forever, and a hung
//! compositor must not hang a tool call).

use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use wayland_client::protocol::{wl_callback, wl_output, wl_registry, wl_seat, wl_shm};
use wayland_client::{Connection, Dispatch, EventQueue, Proxy, QueueHandle, WEnum};
use wayland_protocols_misc::zwp_virtual_keyboard_v1::client::{
    zwp_virtual_keyboard_manager_v1, zwp_virtual_keyboard_v1,
};
use wayland_protocols_wlr::screencopy::v1::client::{
    zwlr_screencopy_frame_v1, zwlr_screencopy_manager_v1,
};
use wayland_protocols_wlr::virtual_pointer::v1::client::{
    zwlr_virtual_pointer_manager_v1, zwlr_virtual_pointer_v1,
};

use wayland_protocols::xdg::xdg_output::zv1::client::{zxdg_output_manager_v1, zxdg_output_v1};

use super::super::backend::{DesktopEnv, Rect, failed};
use crate::tool::ToolError;

/// Longest wait for the compositor to answer one request.
pub(super) const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// A global the compositor advertises.
#[derive(Debug, Clone)]
pub(super) struct Global {
    pub name: u32,
    pub interface: String,
    pub version: u32,
}

/// An output as the compositor describes it: its place in the layout and its mode.
#[derive(Debug, Clone, Default)]
pub(super) struct Output {
    pub proxy: Option<wl_output::WlOutput>,
    pub x: i32,
    pub y: i32,
    pub mode: (i32, i32),
    pub scale: i32,
    pub name: String,
    /// Its place and size in the layout as xdg-output gives them, where the compositor offers
    /// it: wl_output's position is not the layout's on wlroots (always 0,0 there).
    pub logical: Option<Rect>,
}

impl Output {
    /// Where the output is in the layout, in the compositor's (logical) pixels.
    pub fn area(&self) -> Rect {
        if let Some(logical) = self.logical.filter(|l| l.width > 0 && l.height > 0) {
            return logical;
        }
        let scale = self.scale.max(1);
        Rect {
            x: self.x,
            y: self.y,
            width: u32::try_from(self.mode.0 / scale).unwrap_or(0),
            height: u32::try_from(self.mode.1 / scale).unwrap_or(0),
        }
    }
}

/// What one screencopy frame has said so far.
#[derive(Debug, Default)]
pub(super) struct FrameEvents {
    /// Shared-memory buffer offers: format, width, height, stride.
    pub shm: Option<(WEnum<wl_shm::Format>, u32, u32, u32)>,
    pub buffer_done: bool,
    pub y_invert: bool,
    pub ready: bool,
    pub failed: bool,
}

/// Everything events write into.
#[derive(Default)]
pub(super) struct State {
    pub globals: Vec<Global>,
    pub outputs: Vec<Output>,
    pub synced: bool,
    /// What the seat had before corral added its devices.
    pub seat: Option<wl_seat::Capability>,
    pub frame: FrameEvents,
}

pub(super) struct Client {
    pub conn: Connection,
    pub queue: EventQueue<State>,
    pub state: State,
    pub registry: wl_registry::WlRegistry,
    pub socket: PathBuf,
}

/// The socket `WAYLAND_DISPLAY` names: a path, or a name in `XDG_RUNTIME_DIR`.
pub(super) fn socket_path(env: &DesktopEnv) -> Result<PathBuf, ToolError> {
    let Some(display) = &env.wayland_display else {
        return Err(ToolError::Refused("WAYLAND_DISPLAY is not set".into()));
    };
    let display = PathBuf::from(display);
    if display.is_absolute() {
        return Ok(display);
    }
    match &env.xdg_runtime_dir {
        Some(dir) => Ok(PathBuf::from(dir).join(display)),
        None => Err(ToolError::Refused(format!(
            "WAYLAND_DISPLAY={} needs XDG_RUNTIME_DIR to find its socket, and it is not set",
            display.display()
        ))),
    }
}

impl Client {
    /// Connects to the compositor and learns its globals and outputs.
    pub fn connect(env: &DesktopEnv) -> Result<Client, ToolError> {
        let socket = socket_path(env)?;
        let stream = UnixStream::connect(&socket).map_err(|e| {
            failed(format!(
                "cannot connect to the Wayland compositor at {}: {e}",
                socket.display()
            ))
        })?;
        let conn = Connection::from_socket(stream)
            .map_err(|e| failed(format!("Wayland connection to {}: {e}", socket.display())))?;
        let queue = conn.new_event_queue();
        let registry = conn.display().get_registry(&queue.handle(), ());
        let mut client = Client {
            conn,
            queue,
            state: State::default(),
            registry,
            socket,
        };
        client.sync()?;
        let outputs: Vec<Global> = client.globals_named("wl_output");
        let qh = client.queue.handle();
        for (index, global) in outputs.iter().enumerate() {
            let proxy: wl_output::WlOutput =
                client
                    .registry
                    .bind(global.name, global.version.min(4), &qh, index);
            client.state.outputs.push(Output {
                proxy: Some(proxy),
                scale: 1,
                ..Output::default()
            });
        }
        let manager = client.bind::<zxdg_output_manager_v1::ZxdgOutputManagerV1, _>(3, ());
        if let Some(manager) = &manager {
            for (index, output) in client.state.outputs.iter().enumerate() {
                if let Some(proxy) = &output.proxy {
                    manager.get_xdg_output(proxy, &qh, index);
                }
            }
        }
        // Outputs describe themselves in answer to the bind.
        client.sync()?;
        Ok(client)
    }

    pub fn globals_named(&self, interface: &str) -> Vec<Global> {
        self.state
            .globals
            .iter()
            .filter(|g| g.interface == interface)
            .cloned()
            .collect()
    }

    /// Binds the one global of this interface at no more than `max_version`.
    pub fn bind<I, U>(&self, max_version: u32, data: U) -> Option<I>
    where
        I: Proxy + 'static,
        U: Send + Sync + 'static,
        State: Dispatch<I, U>,
    {
        let global = self
            .state
            .globals
            .iter()
            .find(|g| g.interface == I::interface().name)?;
        Some(self.registry.bind(
            global.name,
            global.version.min(max_version),
            &self.queue.handle(),
            data,
        ))
    }

    /// Sends everything queued and waits until the compositor has handled it.
    pub fn sync(&mut self) -> Result<(), ToolError> {
        self.state.synced = false;
        self.conn.display().sync(&self.queue.handle(), ());
        self.wait_for(|state| state.synced, "to answer")
    }

    /// Dispatches events until `done` holds, at most [`ANSWER_TIMEOUT`].
    pub fn wait_for(&mut self, done: impl Fn(&State) -> bool, what: &str) -> Result<(), ToolError> {
        let deadline = Instant::now() + ANSWER_TIMEOUT;
        let error = |e: &dyn std::fmt::Display| {
            failed(format!(
                "Wayland compositor at {}: {e}",
                self.socket.display()
            ))
        };
        loop {
            self.queue
                .dispatch_pending(&mut self.state)
                .map_err(|e| error(&e))?;
            if done(&self.state) {
                return Ok(());
            }
            self.conn.flush().map_err(|e| error(&e))?;
            let Some(guard) = self.queue.prepare_read() else {
                continue;
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(failed(format!(
                    "the Wayland compositor at {} did not {what} within {}s",
                    self.socket.display(),
                    ANSWER_TIMEOUT.as_secs()
                )));
            }
            let timeout = rustix::event::Timespec::try_from(left).map_err(|e| error(&e))?;
            let fd = guard.connection_fd();
            let mut fds = [rustix::event::PollFd::new(
                &fd,
                rustix::event::PollFlags::IN,
            )];
            let ready = match rustix::event::poll(&mut fds, Some(&timeout)) {
                Ok(ready) => ready,
                Err(rustix::io::Errno::INTR) => 0,
                Err(e) => return Err(error(&e)),
            };
            if ready > 0 {
                match guard.read() {
                    Ok(_) => {}
                    Err(wayland_client::backend::WaylandError::Io(e))
                        if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(error(&e)),
                }
            }
        }
    }
}

impl Dispatch<wl_registry::WlRegistry, ()> for State {
    fn event(
        state: &mut Self,
        _: &wl_registry::WlRegistry,
        event: wl_registry::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        match event {
            wl_registry::Event::Global {
                name,
                interface,
                version,
            } => state.globals.push(Global {
                name,
                interface,
                version,
            }),
            wl_registry::Event::GlobalRemove { name } => state.globals.retain(|g| g.name != name),
            _ => {}
        }
    }
}

impl Dispatch<wl_callback::WlCallback, ()> for State {
    fn event(
        state: &mut Self,
        _: &wl_callback::WlCallback,
        event: wl_callback::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let wl_callback::Event::Done { .. } = event {
            state.synced = true;
        }
    }
}

impl Dispatch<wl_output::WlOutput, usize> for State {
    fn event(
        state: &mut Self,
        _: &wl_output::WlOutput,
        event: wl_output::Event,
        index: &usize,
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        let Some(output) = state.outputs.get_mut(*index) else {
            return;
        };
        match event {
            wl_output::Event::Geometry { x, y, .. } => (output.x, output.y) = (x, y),
            wl_output::Event::Mode {
                flags: WEnum::Value(flags),
                width,
                height,
                ..
            } if flags.contains(wl_output::Mode::Current) => output.mode = (width, height),
            wl_output::Event::Scale { factor } => output.scale = factor,
            wl_output::Event::Name { name } => output.name = name,
            _ => {}
        }
    }
}

impl Dispatch<zxdg_output_manager_v1::ZxdgOutputManagerV1, ()> for State {
    fn event(
        _: &mut Self,
        _: &zxdg_output_manager_v1::ZxdgOutputManagerV1,
        _: zxdg_output_manager_v1::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
    }
}

impl Dispatch<zxdg_output_v1::ZxdgOutputV1, usize> for State {
    fn event(
        state: &mut Self,
        _: &zxdg_output_v1::ZxdgOutputV1,
        event: zxdg_output_v1::Event,
        index: &usize,
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        let Some(output) = state.outputs.get_mut(*index) else {
            return;
        };
        let logical = output.logical.get_or_insert(Rect {
            x: 0,
            y: 0,
            width: 0,
            height: 0,
        });
        match event {
            zxdg_output_v1::Event::LogicalPosition { x, y } => (logical.x, logical.y) = (x, y),
            zxdg_output_v1::Event::LogicalSize { width, height } => {
                logical.width = u32::try_from(width).unwrap_or(0);
                logical.height = u32::try_from(height).unwrap_or(0);
            }
            _ => {}
        }
    }
}

impl Dispatch<zwlr_screencopy_frame_v1::ZwlrScreencopyFrameV1, ()> for State {
    fn event(
        state: &mut Self,
        _: &zwlr_screencopy_frame_v1::ZwlrScreencopyFrameV1,
        event: zwlr_screencopy_frame_v1::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        use zwlr_screencopy_frame_v1::Event;
        let frame = &mut state.frame;
        match event {
            Event::Buffer {
                format,
                width,
                height,
                stride,
            } => frame.shm = Some((format, width, height, stride)),
            Event::BufferDone => frame.buffer_done = true,
            Event::Flags {
                flags: WEnum::Value(flags),
            } => frame.y_invert = flags.contains(zwlr_screencopy_frame_v1::Flags::YInvert),
            Event::Ready { .. } => frame.ready = true,
            Event::Failed => frame.failed = true,
            _ => {}
        }
    }
}

impl Dispatch<wl_seat::WlSeat, ()> for State {
    fn event(
        state: &mut Self,
        _: &wl_seat::WlSeat,
        event: wl_seat::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let wl_seat::Event::Capabilities {
            capabilities: WEnum::Value(capabilities),
        } = event
        {
            state.seat = Some(capabilities);
        }
    }
}
wayland_client::delegate_noop!(State: ignore wl_shm::WlShm);
wayland_client::delegate_noop!(State: ignore wayland_client::protocol::wl_shm_pool::WlShmPool);
wayland_client::delegate_noop!(State: ignore wayland_client::protocol::wl_buffer::WlBuffer);
wayland_client::delegate_noop!(State: zwlr_virtual_pointer_manager_v1::ZwlrVirtualPointerManagerV1);
wayland_client::delegate_noop!(State: zwlr_virtual_pointer_v1::ZwlrVirtualPointerV1);
wayland_client::delegate_noop!(State: zwp_virtual_keyboard_manager_v1::ZwpVirtualKeyboardManagerV1);
wayland_client::delegate_noop!(State: zwp_virtual_keyboard_v1::ZwpVirtualKeyboardV1);
wayland_client::delegate_noop!(State: zwlr_screencopy_manager_v1::ZwlrScreencopyManagerV1);

/// Whether a compositor answers at the environment's `WAYLAND_DISPLAY`.
pub(crate) fn probe(env: &DesktopEnv) -> Result<(), ToolError> {
    Client::connect(env).map(|_| ())
}
