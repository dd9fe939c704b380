//! Signing in to MCP servers: the OAuth 2.1 client of the MCP authorization spec.
//!
//! A Streamable HTTP server that answers 401 with a `Bearer` challenge is signed in to:
//! protected resource metadata (RFC 9728: the challenge's `resource_metadata`, then the
//! path-based and root well-known URLs), authorization server metadata (RFC 8414 and OpenID
//! discovery, with the 2025-03-26 fallbacks to the server's own origin), a client (pre-registered
//! in config, a client ID metadata document URL, or dynamic registration, RFC 7591), then the
//! authorization-code grant with PKCE S256 and `resource` indicators (RFC 8707), or the
//! client-credentials or JWT-bearer grant for headless use. Clients authenticate at the token
//! endpoint with `none`, `client_secret_basic`, `client_secret_post` or `private_key_jwt`. A 403 `insufficient_scope` asks
//! again for the union of the scopes (at most [`MAX_AUTHORIZATIONS`] times per request).
//!
//! Hand-written on the reqwest 0.12 already in the tree rather than rmcp's `auth` feature or
//! the `oauth2` crate: rmcp's `auth` pulls reqwest 0.13 (a second HTTP client and TLS stack)
//! and `oauth2` 5 brings its own HTTP layer, chrono and more, while the flow itself is a few
//! form POSTs and JSON documents; base64, url and sha2 were in the tree already.
//!
//! The person is reached through a [`SignInDoor`] the front provides (the editor opens the
//! URL, `garuda exec` prints it); the code comes back to a loopback listener (127.0.0.1, a
//! random port, `state` checked). Tokens live in a [`TokenStore`]: files of mode 0600 in the
//! user's state folder, one per server URL, never in a workspace; no token is ever logged.

mod discovery;
mod flow;
mod jwt;
mod loopback;
mod store;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};

pub use discovery::{Challenge, parse_challenge};
pub use flow::{ServerAuth, describe};
pub use store::{FileStore, MemoryStore, StoredAuth, StoredClient, StoredTokens, TokenStore};

/// Most authorizations one request may start (a first sign-in plus scope step-ups), so a
/// server that never accepts a token cannot loop the person through the browser.
pub const MAX_AUTHORIZATIONS: usize = 3;

/// Default seconds the person gets to finish signing in in the browser.
pub const DEFAULT_SIGN_IN_TIMEOUT_SECS: u64 = 300;

/// The grant a server's tokens come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OAuthGrant {
    /// The person signs in in a browser (authorization code with PKCE).
    #[default]
    AuthorizationCode,
    /// No person: the client's own credentials (`client_id` and `client_secret_env`).
    ClientCredentials,
    /// No person: a workload's signed JWT (RFC 7523), from `assertion_env` or `assertion_file`.
    JwtBearer,
}

/// `[mcp_servers.NAME.oauth]`: how Garuda signs in to one server. Every key is optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "snake_case", deny_unknown_fields)]
pub struct OAuthConfig {
    /// `false` turns sign-in off (a 401 then fails the server as before).
    pub enabled: Option<bool>,
    /// A client registered beforehand with the server's authorization server.
    pub client_id: Option<String>,
    /// Environment variable holding that client's secret.
    pub client_secret_env: Option<String>,
    /// An https URL of a client ID metadata document describing Garuda, used as the client
    /// ID where the authorization server accepts such documents.
    pub client_metadata_url: Option<String>,
    /// Scopes to ask for when the server's challenge names none.
    pub scopes: Vec<String>,
    /// How tokens are obtained (default: the person signs in).
    pub grant: OAuthGrant,
    /// Environment variable holding the JWT for the `jwt_bearer` grant.
    pub assertion_env: Option<String>,
    /// File holding the JWT for the `jwt_bearer` grant (read at each sign-in).
    pub assertion_file: Option<std::path::PathBuf>,
    /// PEM file (PKCS#8) of the pre-registered client's P-256 private key: the client then
    /// authenticates with a signed ES256 assertion (`private_key_jwt`, RFC 7523) where the
    /// server offers it.
    pub client_key_file: Option<std::path::PathBuf>,
    /// Fixed loopback port for the redirect (for a client registered with one redirect URI).
    pub callback_port: Option<u16>,
    /// Seconds the person gets to finish in the browser (default 300).
    pub sign_in_timeout_secs: Option<u64>,
}

impl OAuthConfig {
    /// False when sign-in was turned off.
    pub fn is_enabled(&self) -> bool {
        self.enabled != Some(false)
    }
}

/// A sign-in page for the person to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignInRequest {
    /// The MCP server's name in the config.
    pub server: String,
    /// The authorization URL (holds no secret: PKCE keeps the verifier here).
    pub url: String,
}

/// How a front shows a sign-in page to the person.
pub trait SignInDoor: Send + Sync {
    /// Hands `request.url` to the person (opens it or shows it); `Err` says why no one can be
    /// asked. Returns once handed over: the code comes back to the loopback listener.
    fn open(&self, request: SignInRequest) -> BoxFuture<'static, Result<(), String>>;

    /// False when no person can be reached at all, so no client is registered for nothing.
    fn can_ask(&self) -> bool {
        true
    }
}

/// No person can answer: every sign-in that needs a browser fails with a notice saying so.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoPerson;

impl SignInDoor for NoPerson {
    fn open(&self, _request: SignInRequest) -> BoxFuture<'static, Result<(), String>> {
        Box::pin(async { Err("no one can answer a sign-in here".to_string()) })
    }

    fn can_ask(&self) -> bool {
        false
    }
}

/// Prints the URL on stderr for a person at a terminal (`garuda exec`, `garuda mcp login`).
#[derive(Debug, Clone, Copy, Default)]
pub struct PrintUrl;

impl SignInDoor for PrintUrl {
    fn open(&self, request: SignInRequest) -> BoxFuture<'static, Result<(), String>> {
        eprintln!(
            "garuda: MCP server `{}` needs you to sign in. Open this URL in a browser:\n  {}",
            request.server, request.url
        );
        Box::pin(async { Ok(()) })
    }
}

/// No person, for tests and `garuda mcp-probe`: fetches the page and follows its redirects
/// (as a browser would when the authorization server asks nothing), so the code reaches the
/// loopback listener.
#[derive(Debug, Clone, Copy, Default)]
pub struct FollowRedirects;

impl SignInDoor for FollowRedirects {
    fn open(&self, request: SignInRequest) -> BoxFuture<'static, Result<(), String>> {
        Box::pin(async move {
            let http = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::limited(10))
                .timeout(std::time::Duration::from_secs(30))
                .build()
                .map_err(|e| e.to_string())?;
            // The answer (the loopback's page or the server's error page) is not needed: the
            // listener gets the code or the deadline passes.
            let _ = http.get(&request.url).send().await;
            Ok(())
        })
    }
}

/// What the servers of a hub sign in with: the door to the person and the token store.
#[derive(Clone)]
pub struct AuthContext {
    /// Reaches the person.
    pub door: Arc<dyn SignInDoor>,
    /// Keeps tokens and registered clients.
    pub store: Arc<dyn TokenStore>,
    /// A client secret given directly, in place of `client_secret_env` (`garuda mcp-probe`).
    pub client_secret: Option<String>,
    /// A JWT-bearer assertion given directly, in place of the config's source.
    pub assertion: Option<String>,
    /// A client private key (PEM) given directly, in place of `client_key_file`.
    pub client_key_pem: Option<String>,
}

impl std::fmt::Debug for AuthContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuthContext")
    }
}

impl Default for AuthContext {
    /// Tokens in the user's state folder; no person to ask.
    fn default() -> Self {
        AuthContext {
            door: Arc::new(NoPerson),
            store: Arc::new(FileStore::in_state_dir()),
            client_secret: None,
            assertion: None,
            client_key_pem: None,
        }
    }
}

/// Why signing in to a server failed. Messages never hold a token or a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OAuthError {
    /// A sign-in in a browser is needed and no one can answer.
    #[error(
        "MCP server `{server}` needs you to sign in, and no one can answer a sign-in here ({why}); run `garuda mcp login {server}` in a terminal, then start a new session"
    )]
    NeedsPerson {
        /// The server's name.
        server: String,
        /// What the door said.
        why: String,
    },
    /// The person did not finish in time.
    #[error("sign-in to MCP server `{server}` was not finished within {secs} s")]
    TimedOut {
        /// The server's name.
        server: String,
        /// The deadline.
        secs: u64,
    },
    /// A metadata document could not be used.
    #[error("{0}")]
    Metadata(String),
    /// The authorization server refused (an OAuth `error` answer).
    #[error("the authorization server answered `{error}`{}", description.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    Refused {
        /// The OAuth error code.
        error: String,
        /// Its description, if any.
        description: Option<String>,
    },
    /// The authorization response could not be trusted (wrong `iss`).
    #[error("{0}")]
    Response(String),
    /// The configuration cannot work with this server.
    #[error("{0}")]
    Config(String),
    /// A network failure talking to the authorization server.
    #[error("{0}")]
    Http(String),
    /// The server asked for more authorizations than [`MAX_AUTHORIZATIONS`].
    #[error(
        "MCP server `{0}` still refused the token after {MAX_AUTHORIZATIONS} authorizations (insufficient scope)"
    )]
    TooManyAttempts(String),
}
