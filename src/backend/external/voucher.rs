//! Credential vouchers: an external agent never holds the real API key. For each launch corral
//! mints a random voucher, the agent is given it as its key and the loopback [`proxy`]'s URL as
//! its API's, and the proxy checks the voucher, swaps in the real key and forwards the request
//! upstream. Only the API paths of that upstream are forwarded. A voucher is revoked when its
//! [`Voucher`] is dropped (the session's backend closes), after which it gets 401.
//!
//! What this holds: the agent's environment, its `/proc/<pid>/environ`, the files it writes and
//! every command it runs see a voucher that dies with the session and opens only the model API.
//! What it does not: a key the agent keeps in its own config or login (claude's OAuth login,
//! a key written in codex's `config.toml`) is the agent's, not corral's to hide.

pub mod agents;
mod proxy;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::OnceCell;

/// Which API an upstream speaks: it decides how the real key is sent and which paths pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// Anthropic's Messages API: `x-api-key`, or `Authorization: Bearer` for a token.
    Anthropic { bearer: bool },
    /// OpenAI and OpenAI-compatible servers: `Authorization: Bearer`.
    OpenAi,
    /// Gemini's API: `x-goog-api-key`.
    Gemini,
}

impl Api {
    /// Whether `rest` (the request path after the upstream's own base path) is one of this
    /// API's model paths. Nothing else is forwarded: no files, batches, admin or account
    /// endpoints.
    fn permits(self, rest: &str) -> bool {
        // `/v1/x` → `/x`; `/v1beta…` is Gemini's and stays whole.
        let unversioned = rest.strip_prefix("/v1").filter(|r| r.starts_with('/'));
        match self {
            Api::Anthropic { .. } => unversioned.is_some_and(|r| {
                matches!(r, "/messages" | "/messages/count_tokens" | "/models")
                    || one_segment_under(r, "/models")
            }),
            // The base URL usually ends in `/v1` already; a bare host gets `/v1/…`.
            Api::OpenAi => {
                let r = unversioned.unwrap_or(rest);
                matches!(
                    r,
                    "/responses" | "/chat/completions" | "/completions" | "/embeddings" | "/models"
                ) || one_segment_under(r, "/models")
            }
            Api::Gemini => gemini_path(rest),
        }
    }
}

/// Gemini's paths carry their version (`/v1beta/models/<model>:<method>`).
fn gemini_path(rest: &str) -> bool {
    let Some(models) = rest
        .strip_prefix("/v1beta")
        .or_else(|| rest.strip_prefix("/v1"))
    else {
        return false;
    };
    if models == "/models" {
        return true;
    }
    let Some(call) = models.strip_prefix("/models/").filter(|c| !c.contains('/')) else {
        return false;
    };
    match call.split_once(':') {
        None => !call.is_empty(),
        Some((model, method)) => {
            !model.is_empty()
                && matches!(
                    method,
                    "generateContent"
                        | "streamGenerateContent"
                        | "countTokens"
                        | "embedContent"
                        | "batchEmbedContents"
                )
        }
    }
}

/// `<under>/<one segment>`, e.g. a model's own page.
fn one_segment_under(path: &str, under: &str) -> bool {
    path.strip_prefix(under)
        .and_then(|r| r.strip_prefix('/'))
        .is_some_and(|id| !id.is_empty() && !id.contains('/'))
}

/// What a voucher stands for.
struct Grant {
    api: Api,
    upstream: reqwest::Url,
    key: String,
    session: String,
}

/// Never the key: a `?grant` in a log line must not print it.
impl std::fmt::Debug for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grant")
            .field("api", &self.api)
            .field("upstream", &self.upstream.origin().ascii_serialization())
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

/// The live vouchers, shared by the proxy and every [`Voucher`].
#[derive(Default)]
struct Registry {
    grants: Mutex<HashMap<String, Arc<Grant>>>,
}

/// Only how many: the tokens are secrets too.
impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let live = self.grants.lock().map_or(0, |g| g.len());
        write!(f, "Registry({live} live vouchers)")
    }
}

impl Registry {
    fn get(&self, token: &str) -> Option<Arc<Grant>> {
        let grants = self.grants.lock().unwrap_or_else(PoisonError::into_inner);
        grants.get(token).cloned()
    }

    fn insert(&self, token: String, grant: Grant) {
        let mut grants = self.grants.lock().unwrap_or_else(PoisonError::into_inner);
        grants.insert(token, Arc::new(grant));
    }

    fn revoke(&self, token: &str) -> Option<Arc<Grant>> {
        let mut grants = self.grants.lock().unwrap_or_else(PoisonError::into_inner);
        grants.remove(token)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum VoucherError {
    #[error("the credential proxy cannot listen on 127.0.0.1: {0}")]
    Listen(std::io::Error),
    #[error("the credential proxy cannot build its HTTP client: {0}")]
    Client(String),
    #[error("no random bytes for a voucher: {0}")]
    Random(String),
    #[error("the upstream is not a URL an API can be reached at (http or https with a host)")]
    Upstream,
}

/// One minted voucher: its token and the proxy URL the agent uses instead of the upstream's.
/// Dropping it revokes the token.
pub struct Voucher {
    token: String,
    base_url: String,
    registry: Arc<Registry>,
}

impl std::fmt::Debug for Voucher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Voucher")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl Voucher {
    /// What the agent is given as its API key.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The proxy's URL with the upstream's own base path: the agent's API base URL.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }
}

impl Drop for Voucher {
    fn drop(&mut self) {
        if let Some(grant) = self.registry.revoke(&self.token) {
            tracing::debug!(session = %grant.session, "voucher revoked");
        }
    }
}

/// The loopback proxy: one per corral process, started with the first voucher.
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    registry: Arc<Registry>,
}

impl Proxy {
    /// Starts a proxy on an ephemeral loopback port, served on the current runtime.
    pub async fn start() -> Result<Arc<Proxy>, VoucherError> {
        let registry = Arc::new(Registry::default());
        let addr = proxy::serve(registry.clone()).await?;
        Ok(Arc::new(Proxy { addr, registry }))
    }

    /// The proxy every session of this process shares. Starting it also makes this process
    /// undumpable: it holds the real keys (in its environment and in memory), and the agents it
    /// runs are the same user, so without this one could read `/proc/<corral>/environ` or
    /// attach to it. A program an agent starts is dumpable again (exec resets it), so nothing
    /// of theirs changes.
    pub async fn shared() -> Result<Arc<Proxy>, VoucherError> {
        static SHARED: OnceCell<Arc<Proxy>> = OnceCell::const_new();
        SHARED
            .get_or_try_init(|| async {
                if let Err(e) = nix::sys::prctl::set_dumpable(false) {
                    tracing::warn!(error = %e, "cannot make corral undumpable: agents of the same user could read the keys in its environment");
                }
                Proxy::start().await
            })
            .await
            .cloned()
    }

    #[cfg(test)]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A new voucher for `key` at `upstream` (its base URL, path included), for `session`.
    pub fn mint(
        &self,
        api: Api,
        upstream: &str,
        key: String,
        session: &str,
    ) -> Result<Voucher, VoucherError> {
        let upstream = reqwest::Url::parse(upstream)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
            .ok_or(VoucherError::Upstream)?;
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| VoucherError::Random(e.to_string()))?;
        let token: String = std::iter::once("corral-voucher-".to_string())
            .chain(bytes.iter().map(|b| format!("{b:02x}")))
            .collect();
        let base_path = upstream.path().trim_end_matches('/');
        let base_url = format!("http://{}{base_path}", self.addr);
        self.registry.insert(
            token.clone(),
            Grant {
                api,
                upstream,
                key,
                session: session.to_string(),
            },
        );
        Ok(Voucher {
            token,
            base_url,
            registry: self.registry.clone(),
        })
    }
}

#[cfg(test)]
#[path = "voucher/tests.rs"]
mod tests;
