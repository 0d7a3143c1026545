//! Beyond one machine: `corral node` runs sessions on its host and `corral serve --nats` is the
//! control plane over any number of nodes, on NATS JetStream rather than a protocol of our own.
//!
//! - A node announces itself in the `<prefix>-nodes` key-value bucket (a heartbeat), takes
//!   commands as request/reply on `<prefix>.node.<name>.cmd` (`node`), and publishes every
//!   envelope of its sessions to the `<prefix>-events` stream on `<prefix>.events.<session>`,
//!   in seq order, each with a message id so a retry is never stored twice (`publish`).
//! - The control plane records which node runs a session in the `<prefix>-sessions` bucket
//!   before asking the node to open it (a node opens only what names it there), follows every
//!   session from the stream into mirrors its surfaces serve as they serve local sessions
//!   (`control`, `follow`), and ends the sessions of a node that stops heartbeating
//!   (`liveness`).
//!
//! docs/scale-out.md describes the topology, the subjects and what happens on each failure.

mod control;
mod follow;
mod liveness;
mod node;
mod publish;
mod wire;

pub use control::{Cluster, ClusterError};
pub use node::{NodeArgs, run as run_node};
pub use wire::OpenRequest;

use std::time::Duration;

use async_nats::jetstream;

use crate::config::Nats;
use crate::error::{Error, usage};

/// One deployment's names and timers, from `[nats]`.
#[derive(Debug, Clone)]
pub struct Deployment {
    pub prefix: String,
    pub heartbeat: Duration,
    pub dead_after: Duration,
    pub retention: Duration,
}

impl Deployment {
    pub fn from_config(nats: &Nats) -> Result<Deployment, Error> {
        let prefix = nats.prefix.clone().unwrap_or_else(|| "corral".to_string());
        if prefix.is_empty()
            || prefix.len() > 32
            || !prefix
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        {
            return Err(usage(format!(
                "[nats] prefix {prefix:?}: use 1 to 32 of a-z, 0-9, '_' and '-'"
            )));
        }
        let within = |key: &str, value: u64, max: u64| {
            if (1..=max).contains(&value) {
                Ok(value)
            } else {
                Err(usage(format!("[nats] {key} = {value}: use 1 to {max}")))
            }
        };
        let heartbeat = Duration::from_secs(within(
            "heartbeat_secs",
            nats.heartbeat_secs.unwrap_or(2),
            3600,
        )?);
        let dead_after = Duration::from_secs(within(
            "dead_after_secs",
            nats.dead_after_secs.unwrap_or(10),
            86_400,
        )?);
        if dead_after < heartbeat * 2 {
            return Err(usage(format!(
                "[nats] dead_after_secs ({}) must be at least twice heartbeat_secs ({}): one \
                 late heartbeat must not end a node's sessions",
                dead_after.as_secs(),
                heartbeat.as_secs()
            )));
        }
        let days = within("retention_days", nats.retention_days.unwrap_or(30), 3650)?;
        Ok(Deployment {
            prefix,
            heartbeat,
            dead_after,
            retention: Duration::from_secs(days * 86_400),
        })
    }

    pub fn events_subject(&self, session: &str) -> String {
        format!("{}.events.{session}", self.prefix)
    }

    fn events_prefix(&self) -> String {
        format!("{}.events.", self.prefix)
    }

    fn stream_name(&self) -> String {
        format!("{}-events", self.prefix)
    }

    fn nodes_bucket(&self) -> String {
        format!("{}-nodes", self.prefix)
    }

    fn sessions_bucket(&self) -> String {
        format!("{}-sessions", self.prefix)
    }

    pub fn node_subject(&self, node: &str) -> String {
        format!("{}.node.{node}.cmd", self.prefix)
    }
}

/// A node name: it is a subject token and a key, so `[A-Za-z0-9_-]`, at most 64.
pub fn valid_node_name(name: &str) -> bool {
    crate::session::is_valid_id(name)
}

/// Connects to NATS as `name`, authenticating with `[nats]`'s token (else
/// `CORRAL_NATS_TOKEN`) or nkey seed. The client reconnects by itself for as long as the
/// process runs.
pub async fn connect(url: &str, nats: &Nats, name: &str) -> Result<async_nats::Client, Error> {
    // No retry of the first connection: a wrong URL or credentials fail at once, with the
    // server's reason (a service manager restarts a node that started before NATS did).
    let mut options = async_nats::ConnectOptions::new()
        .name(name)
        .connection_timeout(Duration::from_secs(5))
        .request_timeout(Some(Duration::from_secs(30)));
    let token = nats
        .token
        .clone()
        .or_else(|| std::env::var("CORRAL_NATS_TOKEN").ok())
        .filter(|t| !t.is_empty());
    if let Some(token) = token {
        options = options.token(token);
    }
    if let Some(file) = &nats.nkey_seed_file {
        let seed = std::fs::read_to_string(file).map_err(|e| {
            usage(format!(
                "[nats] nkey_seed_file {}: cannot read it: {e}",
                file.display()
            ))
        })?;
        options = options.nkey(seed.trim().to_string());
    }
    let client = options
        .connect(url)
        .await
        .map_err(|e| Error::Runtime(format!("cannot connect to NATS at {url}: {e}")))?;
    tokio::time::timeout(Duration::from_secs(15), client.flush())
        .await
        .map_err(|_| Error::Runtime(format!("NATS at {url} did not answer within 15 s")))?
        .map_err(|e| Error::Runtime(format!("NATS at {url}: {e}")))?;
    Ok(client)
}

/// The deployment's stream and buckets, made if missing.
pub struct Stores {
    pub js: jetstream::Context,
    pub stream: jetstream::stream::Stream,
    pub nodes: jetstream::kv::Store,
    pub sessions: jetstream::kv::Store,
}

pub async fn stores(client: &async_nats::Client, deployment: &Deployment) -> Result<Stores, Error> {
    let js = jetstream::new(client.clone());
    let failed = |what: String| move |e: String| Error::Runtime(format!("NATS {what}: {e}"));
    let stream = js
        .get_or_create_stream(jetstream::stream::Config {
            name: deployment.stream_name(),
            subjects: vec![format!("{}>", deployment.events_prefix())],
            storage: jetstream::stream::StorageType::File,
            max_age: deployment.retention,
            // Long enough for a node to republish what it was unsure NATS stored across a
            // reconnect: the message id makes the retry a no-op.
            duplicate_window: Duration::from_secs(120),
            allow_direct: true,
            ..Default::default()
        })
        .await
        .map_err(|e| failed(format!("stream {}", deployment.stream_name()))(e.to_string()))?;
    let bucket = |name: String, history: i64| jetstream::kv::Config {
        bucket: name,
        history,
        storage: jetstream::stream::StorageType::File,
        ..Default::default()
    };
    let nodes = key_value(&js, bucket(deployment.nodes_bucket(), 1)).await?;
    let sessions = key_value(&js, bucket(deployment.sessions_bucket(), 1)).await?;
    Ok(Stores {
        js,
        stream,
        nodes,
        sessions,
    })
}

async fn key_value(
    js: &jetstream::Context,
    config: jetstream::kv::Config,
) -> Result<jetstream::kv::Store, Error> {
    let name = config.bucket.clone();
    if let Ok(store) = js.get_key_value(&name).await {
        return Ok(store);
    }
    match js.create_key_value(config).await {
        Ok(store) => Ok(store),
        // Another process made it meanwhile.
        Err(first) => js.get_key_value(&name).await.map_err(|e| {
            Error::Runtime(format!("NATS key-value bucket {name}: {first}; then: {e}"))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deployment_names_everything_under_its_prefix_and_checks_its_timers() {
        let nats = Nats {
            prefix: Some("team-b".into()),
            ..Nats::default()
        };
        let d = Deployment::from_config(&nats).unwrap();
        assert_eq!(d.events_subject("abc"), "team-b.events.abc");
        assert_eq!(d.node_subject("n1"), "team-b.node.n1.cmd");
        assert_eq!(d.stream_name(), "team-b-events");
        assert_eq!(
            (d.nodes_bucket(), d.sessions_bucket()),
            ("team-b-nodes".into(), "team-b-sessions".into())
        );
        for prefix in ["", "a.b", "a>", "A", "a b", &"x".repeat(33)] {
            let bad = Nats {
                prefix: Some(prefix.to_string()),
                ..Nats::default()
            };
            assert!(Deployment::from_config(&bad).is_err(), "{prefix:?}");
        }
        let timers = |h: u64, d: u64| Nats {
            heartbeat_secs: Some(h),
            dead_after_secs: Some(d),
            ..Nats::default()
        };
        assert!(Deployment::from_config(&timers(0, 10)).is_err());
        assert!(Deployment::from_config(&timers(5, 9)).is_err());
        assert!(Deployment::from_config(&timers(1, 3)).is_ok());
        let retention = Nats {
            retention_days: Some(0),
            ..Nats::default()
        };
        assert!(Deployment::from_config(&retention).is_err());
    }
}
