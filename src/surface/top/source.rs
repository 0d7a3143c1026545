//! Where the sessions come from: a running server (its bus followed live, its list fetched
//! again when the bus says something changed) or the local agents directory (read about once
//! a second). Both send the app [`Update`]s and carry out its [`Command`]s in tasks of their
//! own, so the screen never waits on the network or the disk.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, mpsc, watch};

use super::app::{Command, History, Update};
use super::board::Row;
use super::client::Client;
use super::local::{Catalog, read_new};
use crate::error::Error;
use crate::event::Envelope;
use crate::model::SseParser;
use crate::session::LogTail;

/// The largest event the bus may send (an envelope of a large tool output).
const MAX_EVENT: usize = 32 << 20;

/// The list is fetched again at least this often, whatever the bus says.
const LIST_EVERY: Duration = Duration::from_secs(5);

/// How often the local directory is read.
const POLL_EVERY: Duration = Duration::from_secs(1);

/// Envelopes of a local log sent at most, when its feed opens: the feed keeps no more.
const TAIL_FIRST: usize = 5000;

pub(super) type Updates = mpsc::UnboundedSender<Update>;

pub(super) enum Source {
    Server {
        client: Client,
        /// Wakes the task that fetches the list.
        refresh: Arc<Notify>,
    },
    Local {
        dir: PathBuf,
        /// The session whose feed is open, for the poller to follow its log.
        watched: watch::Sender<Option<String>>,
    },
}

impl Source {
    pub fn server(client: Client) -> Source {
        Source::Server {
            client,
            refresh: Arc::new(Notify::new()),
        }
    }

    pub fn local(dir: PathBuf) -> Source {
        Source::Local {
            dir,
            watched: watch::Sender::new(None),
        }
    }

    pub fn label(&self) -> String {
        match self {
            Source::Server { client, .. } => client.label(),
            Source::Local { .. } => "local".into(),
        }
    }

    /// The list at start. A server that cannot be reached or refuses is an error here, before
    /// the screen is taken: the person reads why on a normal terminal.
    pub async fn first_list(&self) -> Result<Vec<Row>, Error> {
        match self {
            Source::Server { client, .. } => client
                .sessions()
                .await
                .map_err(|e| Error::Runtime(e.to_string())),
            Source::Local { dir, .. } => {
                let dir = dir.clone();
                tokio::task::spawn_blocking(move || Catalog::default().scan(&dir))
                    .await
                    .map_err(|e| Error::Runtime(format!("reading the local sessions: {e}")))
            }
        }
    }

    /// Starts following the source.
    pub fn start(&self, updates: &Updates) {
        match self {
            Source::Server { client, refresh } => {
                tokio::spawn(follow(client.clone(), updates.clone()));
                tokio::spawn(list_again(client.clone(), updates.clone(), refresh.clone()));
            }
            Source::Local { dir, watched } => {
                tokio::spawn(poll(dir.clone(), updates.clone(), watched.subscribe()));
            }
        }
    }

    /// Carries out a command in its own task; its result comes back as an update.
    pub fn run(&self, command: Command, updates: &Updates) {
        match self {
            Source::Server { client, refresh } => match command {
                Command::Refresh => refresh.notify_one(),
                command => {
                    let client = client.clone();
                    let updates = updates.clone();
                    let refresh = refresh.clone();
                    tokio::spawn(async move {
                        for update in on_server(&client, command).await {
                            let _ = updates.send(update);
                        }
                        refresh.notify_one();
                    });
                }
            },
            Source::Local { dir, watched } => match command {
                Command::Watch(id) => {
                    watched.send_replace(id);
                }
                Command::History(id) => {
                    let path = crate::session::log_path(dir, &id);
                    let updates = updates.clone();
                    tokio::task::spawn_blocking(move || {
                        let update = match crate::session::read_log(&path) {
                            Ok(log) => Update::History(id, History::Log(log)),
                            Err(e) => {
                                Update::Notice(format!("cannot read {}: {e}", path.display()))
                            }
                        };
                        let _ = updates.send(update);
                    });
                }
                // Read-only: the keys say so before anything is asked.
                Command::Refresh
                | Command::Permissions(_)
                | Command::Answer { .. }
                | Command::Cancel(_)
                | Command::Close(_) => {}
            },
        }
    }
}

/// One command against the server; what to tell the app.
async fn on_server(client: &Client, command: Command) -> Vec<Update> {
    let failed = |what: &str, e: super::client::ClientError| Update::Notice(format!("{what}: {e}"));
    match command {
        Command::Refresh => Vec::new(),
        Command::Permissions(id) => match client.permissions(&id).await {
            Ok(requests) => vec![Update::Permissions(id, requests)],
            Err(e) => vec![
                Update::Permissions(id, Vec::new()),
                failed("cannot read the request", e),
            ],
        },
        Command::Answer {
            id,
            request,
            decision,
        } => match client.answer(&id, &request, decision).await {
            Ok(()) => vec![Update::Notice(format!("answered: {}", decision.as_str()))],
            Err(e) => vec![failed("the answer was not taken", e)],
        },
        Command::Cancel(id) => match client.cancel(&id).await {
            Ok(true) => vec![Update::Notice("interrupted the running turn".into())],
            Ok(false) => vec![Update::Notice("no turn was running".into())],
            Err(e) => vec![failed("cannot interrupt", e)],
        },
        Command::Close(id) => match client.close(&id).await {
            Ok(()) => vec![Update::Notice("closed".into())],
            Err(e) => vec![failed("cannot close", e)],
        },
        Command::History(id) => match client.messages(&id).await {
            Ok(messages) => vec![Update::History(id, History::Messages(messages))],
            Err(e) => vec![failed("cannot read the history", e)],
        },
        Command::Watch(Some(id)) => match client.messages(&id).await {
            Ok(messages) => vec![Update::Earlier(id, messages)],
            Err(e) => vec![failed("cannot read the earlier conversation", e)],
        },
        Command::Watch(None) => Vec::new(),
    }
}

/// Follows the server's bus for as long as the app runs: from the start of what its ring
/// holds, then live; after a drop, again from the last id seen, retrying with a growing
/// pause (1 s to 10 s).
async fn follow(client: Client, updates: Updates) {
    let mut after = 0u64;
    let mut pause = Duration::from_secs(1);
    loop {
        let why = match client.events(after).await {
            Ok(mut response) => {
                if updates.send(Update::Stream(None)).is_err() {
                    return;
                }
                pause = Duration::from_secs(1);
                read_bus(&mut response, &mut after, &updates).await
            }
            Err(e) => e.to_string(),
        };
        if updates.send(Update::Stream(Some(why))).is_err() {
            return;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(10));
    }
}

/// Delivers the bus's envelopes until it ends; why it ended.
async fn read_bus(response: &mut reqwest::Response, after: &mut u64, updates: &Updates) -> String {
    let mut parser = SseParser::new(MAX_EVENT);
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => return "the server ended the stream".into(),
            Err(e) => return format!("the stream broke: {e}"),
        };
        if parser.push(&chunk).is_err() {
            return format!("an event larger than {MAX_EVENT} bytes");
        }
        loop {
            let event = match parser.next_event() {
                Ok(Some(event)) => event,
                Ok(None) => break,
                Err(_) => return format!("an event larger than {MAX_EVENT} bytes"),
            };
            if let Some(id) = event.id.as_deref().and_then(|i| i.trim().parse().ok()) {
                *after = id;
            }
            match serde_json::from_str::<Envelope>(&event.data) {
                Ok(envelope) => {
                    if updates.send(Update::Bus(Box::new(envelope))).is_err() {
                        return "closed".into();
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, "an event on the bus that is not an envelope")
                }
            }
        }
    }
}

/// Fetches the list when woken (a burst of wake-ups fetches once) and every few seconds.
async fn list_again(client: Client, updates: Updates, wake: Arc<Notify>) {
    loop {
        tokio::select! {
            () = wake.notified() => {}
            () = tokio::time::sleep(LIST_EVERY) => {}
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
        let update = match client.sessions().await {
            Ok(rows) => {
                if updates.send(Update::Sessions(rows)).is_err() {
                    return;
                }
                Update::Listing(None)
            }
            Err(e) => Update::Listing(Some(e.to_string())),
        };
        if updates.send(update).is_err() {
            return;
        }
    }
}

/// Reads the local directory about once a second, and the log of the watched session.
async fn poll(dir: PathBuf, updates: Updates, mut watched: watch::Receiver<Option<String>>) {
    // The watched session, and its log once it could be opened.
    let mut state = Some((Catalog::default(), None::<(String, Option<LogTail>)>));
    loop {
        let want = watched.borrow_and_update().clone();
        let Some((mut catalog, mut tail)) = state.take() else {
            return;
        };
        let dir_now = dir.clone();
        let read = tokio::task::spawn_blocking(move || {
            let rows = catalog.scan(&dir_now);
            if tail.as_ref().map(|(id, _)| id) != want.as_ref() {
                tail = want.map(|id| (id, None));
            }
            let mut new = None;
            if let Some((id, log)) = &mut tail {
                if log.is_none() {
                    *log = LogTail::open(&crate::session::log_path(&dir_now, id)).ok();
                }
                if let Some(log) = log {
                    let mut envelopes = read_new(log);
                    let skip = envelopes.len().saturating_sub(TAIL_FIRST);
                    envelopes.drain(..skip);
                    new = Some((id.clone(), envelopes));
                }
            }
            (catalog, tail, rows, new)
        })
        .await;
        let Ok((catalog, tail, rows, new)) = read else {
            return;
        };
        state = Some((catalog, tail));
        if updates.send(Update::Sessions(rows)).is_err() {
            return;
        }
        if let Some((id, envelopes)) = new
            && !envelopes.is_empty()
            && updates.send(Update::Tail(id, envelopes)).is_err()
        {
            return;
        }
        tokio::select! {
            () = tokio::time::sleep(POLL_EVERY) => {}
            _ = watched.changed() => {}
        }
    }
}
