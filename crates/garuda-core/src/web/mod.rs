//! The web as the tools reach it (`web_fetch`, `web_search`): the user's `[web]` settings, the
//! guard that keeps requests off the machine, its network and the server's secrets
//! (`guard.rs`, pure), the guarded GET (`fetch.rs`: checked redirects, a resolver that judges
//! every address before it is connected to, bounded bytes and time), what a body becomes for
//! the model (`page.rs`, pure) and the search backend (`search.rs`).

pub mod fetch;
pub mod guard;
pub mod page;
pub mod search;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};

pub use fetch::Fetched;
pub use guard::{AllowList, Secrets};

/// `[web]` in the user's config (a workspace's `.garuda/config.toml` cannot set it: a cloned
/// repository must not open internal hosts or skip the question).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "snake_case", deny_unknown_fields)]
pub struct WebSettings {
    /// Hosts a web tool may reach even though they are internal (loopback, private,
    /// link-local): names or addresses as URLs spell them, or `*.example.com`.
    pub allow_hosts: Vec<String>,
    /// Under `full-auto`, `web_fetch` runs without asking (it asks under every other policy).
    pub fetch_without_asking: bool,
    /// Most bytes of a body read; the rest is not downloaded and the result says it was cut.
    pub max_bytes: u64,
    /// Milliseconds to connect.
    pub connect_timeout_ms: u64,
    /// Milliseconds for a whole fetch, redirects and body included.
    pub timeout_ms: u64,
    /// The search backend (`[web.search]`).
    pub search: SearchSettings,
}

impl Default for WebSettings {
    fn default() -> Self {
        WebSettings {
            allow_hosts: Vec::new(),
            fetch_without_asking: false,
            max_bytes: 5 << 20,
            connect_timeout_ms: 10_000,
            timeout_ms: 30_000,
            search: SearchSettings::default(),
        }
    }
}

/// `[web.search]`: where `web_search` asks. No backend, no tool.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "snake_case", deny_unknown_fields)]
pub struct SearchSettings {
    /// A SearXNG instance (`https://searx.example`): its JSON API, `GET /search?q=…&format=json`.
    pub searxng_url: Option<String>,
    /// Most results listed.
    pub max_results: usize,
    /// Search through the provider's own server tool (Anthropic's `web_search_20250305`) when
    /// the session's model speaks Anthropic's Messages API: the provider searches, Garuda
    /// runs nothing and asks nothing. Other providers fall back to `searxng_url`.
    pub anthropic_server_tool: bool,
    /// Most searches the provider runs in one request (the server tool's `max_uses`).
    pub max_uses: Option<u32>,
    /// The only domains the provider's search may return (its `allowed_domains`).
    pub allowed_domains: Vec<String>,
    /// Domains the provider's search never returns (its `blocked_domains`).
    pub blocked_domains: Vec<String>,
}

impl Default for SearchSettings {
    fn default() -> Self {
        SearchSettings {
            searxng_url: None,
            max_results: 10,
            anthropic_server_tool: false,
            max_uses: None,
            allowed_domains: Vec::new(),
            blocked_domains: Vec::new(),
        }
    }
}

/// The version of Anthropic's web search server tool Garuda asks for.
pub const ANTHROPIC_WEB_SEARCH: &str = "web_search_20250305";

impl SearchSettings {
    /// The server tool's entry in an Anthropic request's tools, when the user turned it on.
    pub fn anthropic_tool(&self) -> Option<serde_json::Value> {
        if !self.anthropic_server_tool {
            return None;
        }
        let mut tool = serde_json::json!({"type": ANTHROPIC_WEB_SEARCH, "name": "web_search"});
        if let Some(n) = self.max_uses {
            tool["max_uses"] = n.into();
        }
        // The API takes one list or the other, never both: the allow-list is the narrower.
        if !self.allowed_domains.is_empty() {
            tool["allowed_domains"] = self.allowed_domains.clone().into();
        } else if !self.blocked_domains.is_empty() {
            tool["blocked_domains"] = self.blocked_domains.clone().into();
        }
        Some(tool)
    }
}

/// Most redirects a fetch follows.
pub const MAX_REDIRECTS: usize = 5;

/// Why a web tool did not answer with a page.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebError {
    /// The URL or query holds the value of a secret of the server's.
    #[error(
        "refused: it carries the value of the secret {0}; never put secrets, code or file contents into URLs or queries"
    )]
    Secret(String),
    /// Not http or https.
    #[error("refused: only http and https URLs are fetched, not {0}:")]
    Scheme(String),
    /// A user name or password in the URL.
    #[error("refused: URLs with a user name or password are not fetched")]
    Credentials,
    /// No host to ask.
    #[error("the URL names no host")]
    NoHost,
    /// Not a URL.
    #[error("invalid URL {0:?}: {1}")]
    BadUrl(String, String),
    /// An internal host, named or as an address.
    #[error(
        "refused: {host} is {why}; web tools reach public hosts only (the user's config can allow a host: [web] allow_hosts)"
    )]
    Internal {
        /// The host as the URL names it.
        host: String,
        /// What kind of address it is.
        why: &'static str,
    },
    /// A name that resolves to an internal address.
    #[error(
        "refused: {host} resolves to {addr}, {why}; web tools reach public hosts only (the user's config can allow a host: [web] allow_hosts)"
    )]
    Resolved {
        /// The name.
        host: String,
        /// The address it resolved to.
        addr: String,
        /// What kind of address it is.
        why: &'static str,
    },
    /// More redirects than [`MAX_REDIRECTS`].
    #[error("stopped after {0} redirects")]
    Redirects(usize),
    /// A redirect without a usable `Location`.
    #[error("a redirect ({0}) without a usable Location")]
    BadRedirect(u16),
    /// The deadline passed.
    #[error(
        "timed out after {ms} ms ({got} bytes had arrived); the server is too slow or the page too large"
    )]
    Timeout {
        /// The deadline.
        ms: u64,
        /// Bytes of the body that had arrived.
        got: u64,
    },
    /// A type the tools do not read.
    #[error("refused: the page is {0}; web_fetch reads HTML, text and JSON only")]
    ContentType(String),
    /// The connection or the protocol failed.
    #[error("request failed: {0}")]
    Http(String),
    /// The search backend answered something else than its JSON.
    #[error("the search backend's answer could not be read: {0}")]
    Backend(String),
    /// The turn was cancelled.
    #[error("cancelled")]
    Cancelled,
}

/// What a session's web tools share: the settings, the guard's lists and one HTTP client
/// whose resolver applies them (built at the first call).
#[derive(Debug)]
pub struct Web {
    /// The user's `[web]` settings.
    pub settings: WebSettings,
    allow: AllowList,
    secrets: Secrets,
    hosts: Arc<BTreeMap<String, IpAddr>>,
    client: OnceLock<Result<reqwest::Client, String>>,
}

impl Web {
    /// The web of a session whose user config says `settings` and whose secrets are
    /// `secrets`.
    pub fn new(settings: WebSettings, secrets: Secrets) -> Arc<Web> {
        Web::with_hosts(settings, secrets, BTreeMap::new())
    }

    /// [`Web::new`] with names its resolver answers itself, as `/etc/hosts` would (the
    /// answers are judged like any other): a test's name that resolves inside.
    pub fn with_hosts(
        settings: WebSettings,
        secrets: Secrets,
        hosts: BTreeMap<String, IpAddr>,
    ) -> Arc<Web> {
        Arc::new(Web {
            allow: AllowList::new(&settings.allow_hosts),
            settings,
            secrets,
            hosts: Arc::new(hosts),
            client: OnceLock::new(),
        })
    }

    /// This web for `web_search`: the search backend is the user's own choice of server, so
    /// its host is reachable even if internal (for the search's requests, not `web_fetch`'s).
    pub fn for_search(&self) -> Arc<Web> {
        let mut settings = self.settings.clone();
        if let Some(host) = settings
            .search
            .searxng_url
            .as_deref()
            .and_then(|u| url::Url::parse(u).ok())
            .and_then(|u| u.host_str().map(str::to_string))
        {
            settings.allow_hosts.push(host);
        }
        Web::with_hosts(settings, self.secrets.clone(), (*self.hosts).clone())
    }

    /// The allow-list in force.
    pub fn allow(&self) -> &AllowList {
        &self.allow
    }

    /// The secrets looked for.
    pub fn secrets(&self) -> &Secrets {
        &self.secrets
    }
}
