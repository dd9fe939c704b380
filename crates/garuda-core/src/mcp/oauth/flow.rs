//! One server's sign-in: its tokens, their refresh, and the grants that get new ones.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use url::Url;

use super::discovery::{Challenge, Discovered, discover, parse_challenge, read_limited};
use super::loopback::{Callback, Loopback};
use super::store::{StoredAuth, StoredClient, StoredTokens};
use super::{
    AuthContext, DEFAULT_SIGN_IN_TIMEOUT_SECS, MAX_AUTHORIZATIONS, OAuthConfig, OAuthError,
    OAuthGrant, SignInRequest,
};

/// A token this close to its expiry is refreshed before it is sent.
const REFRESH_MARGIN_SECS: u64 = 60;
/// Largest token or registration answer read.
const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// Longest wait for one answer of an authorization server (short in tests, so a hanging
/// server's test ends soon).
const HTTP_TIMEOUT: Duration = if cfg!(test) {
    Duration::from_secs(2)
} else {
    Duration::from_secs(30)
};
/// The JWT-bearer grant type (RFC 7523).
const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// Sign-in state of one MCP server, shared by its HTTP client's requests.
pub struct ServerAuth {
    name: String,
    server_url: String,
    config: OAuthConfig,
    http: reqwest::Client,
    ctx: AuthContext,
    state: tokio::sync::Mutex<StoredAuth>,
    waiting: AtomicBool,
    last_error: Mutex<Option<OAuthError>>,
    client_secret: Option<String>,
    assertion: Option<String>,
    client_key: Option<String>,
}

impl std::fmt::Debug for ServerAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerAuth")
            .field("server", &self.name)
            .field("url", &self.server_url)
            .finish()
    }
}

/// Now in Unix seconds.
fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `n` random bytes as base64url, from the OS generator (through UUID v4, whose 122 random
/// bits come from getrandom), so no random-number crate is added.
fn random_b64(uuids: usize) -> String {
    let bytes: Vec<u8> = (0..uuids)
        .flat_map(|_| *uuid::Uuid::new_v4().as_bytes())
        .collect();
    URL_SAFE_NO_PAD.encode(bytes)
}

/// The S256 code challenge of a verifier.
fn challenge_of(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// Space-separated scopes without repeats, in order.
fn join_scopes<'a>(scopes: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let mut out: Vec<&str> = Vec::new();
    for s in scopes {
        if !s.is_empty() && !out.contains(&s) {
            out.push(s);
        }
    }
    (!out.is_empty()).then(|| out.join(" "))
}

/// A token endpoint's answer.
#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    #[serde(default)]
    token_type: Option<String>,
    #[serde(default)]
    expires_in: Option<u64>,
    #[serde(default)]
    refresh_token: Option<String>,
    #[serde(default)]
    scope: Option<String>,
}

/// An OAuth error answer.
#[derive(Deserialize)]
struct ErrorAnswer {
    error: String,
    #[serde(default)]
    error_description: Option<String>,
}

/// A registration answer (RFC 7591).
#[derive(Deserialize)]
struct Registration {
    client_id: String,
    #[serde(default)]
    client_secret: Option<String>,
    #[serde(default)]
    token_endpoint_auth_method: Option<String>,
}

impl ServerAuth {
    /// Sign-in for server `name` at `server_url`, with what `ctx.store` kept for it.
    pub fn new(
        name: &str,
        server_url: &str,
        config: OAuthConfig,
        ctx: AuthContext,
    ) -> Result<ServerAuth, OAuthError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            // A hanging authorization server fails the sign-in instead of holding it forever.
            .timeout(HTTP_TIMEOUT)
            // No redirect is followed: a token request or a secret never goes to another place.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| OAuthError::Http(format!("cannot build the HTTP client: {e}")))?;
        let stored = ctx.store.load(server_url).unwrap_or_else(|| StoredAuth {
            server_url: server_url.to_string(),
            ..StoredAuth::default()
        });
        let client_secret = ctx.client_secret.clone().or_else(|| {
            config
                .client_secret_env
                .as_deref()
                .and_then(crate::sandbox::secret_var)
                .filter(|s| !s.is_empty())
        });
        let assertion = ctx.assertion.clone();
        let client_key = ctx.client_key_pem.clone();
        Ok(ServerAuth {
            name: name.to_string(),
            server_url: server_url.to_string(),
            config,
            http,
            ctx,
            state: tokio::sync::Mutex::new(stored),
            waiting: AtomicBool::new(false),
            last_error: Mutex::new(None),
            client_secret,
            assertion,
            client_key,
        })
    }

    /// The server's name.
    pub fn server(&self) -> &str {
        &self.name
    }

    /// True while a sign-in waits for the person (a start's timeout does not run then).
    pub fn waiting_for_person(&self) -> bool {
        self.waiting.load(Ordering::SeqCst)
    }

    /// The last sign-in failure, for the server's failure reason.
    pub fn last_error(&self) -> Option<OAuthError> {
        self.last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn record<T>(&self, r: Result<T, OAuthError>) -> Result<T, OAuthError> {
        if let Err(e) = &r {
            tracing::warn!(target: "garuda::mcp", server = %self.name, "sign-in failed: {e}");
            *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.clone());
        }
        r
    }

    /// The access token to send, refreshed first when it is about to expire; None when not
    /// signed in.
    pub async fn bearer(&self) -> Option<String> {
        let mut st = self.state.lock().await;
        let expiring = st.tokens.as_ref().is_some_and(|t| {
            t.refresh_token.is_some()
                && t.expires_at
                    .is_some_and(|at| at <= now() + REFRESH_MARGIN_SECS)
        });
        if expiring && let Err(e) = self.refresh(&mut st).await {
            tracing::info!(target: "garuda::mcp", server = %self.name,
                "could not refresh the token before it expired: {e}");
        }
        st.tokens.as_ref().map(|t| t.access_token.clone())
    }

    /// Answers a 401 or a 403 `insufficient_scope` the server sent for a request that carried
    /// `sent` (None: no token) after `attempt` authorizations: refreshes, or signs in again
    /// (with the union of the scopes on a step-up). `Ok` means: send the request again.
    pub async fn handle_challenge(
        &self,
        status: u16,
        header: &str,
        sent: Option<&str>,
        attempt: usize,
    ) -> Result<(), OAuthError> {
        let challenge = parse_challenge(header).unwrap_or_default();
        let mut st = self.state.lock().await;
        // Another request (or `garuda mcp login` elsewhere) got a new token meanwhile.
        let current = st.tokens.as_ref().map(|t| t.access_token.clone());
        if current.is_some() && current.as_deref() != sent {
            return Ok(());
        }
        if let Some(kept) = self.ctx.store.load(&self.server_url) {
            let kept_token = kept.tokens.as_ref().map(|t| t.access_token.as_str());
            if kept_token.is_some() && kept_token != sent {
                *st = kept;
                return Ok(());
            }
        }
        if attempt >= MAX_AUTHORIZATIONS {
            return self.record(Err(OAuthError::TooManyAttempts(self.name.clone())));
        }
        let step_up = status == 403;
        if !step_up && attempt == 0 && sent.is_some() && self.refresh(&mut st).await.is_ok() {
            return Ok(());
        }
        let r = self.authorize(&mut st, Some(&challenge), step_up).await;
        self.record(r)
    }

    /// Signs in now, whatever is kept (`garuda mcp login`).
    pub async fn sign_in(&self) -> Result<(), OAuthError> {
        let mut st = self.state.lock().await;
        st.tokens = None;
        let r = self.authorize(&mut st, None, false).await;
        self.record(r)
    }

    /// Forgets the tokens and client kept for this server; true when there were some.
    pub async fn sign_out(&self) -> Result<bool, OAuthError> {
        let mut st = self.state.lock().await;
        *st = StoredAuth {
            server_url: self.server_url.clone(),
            ..StoredAuth::default()
        };
        self.ctx
            .store
            .remove(&self.server_url)
            .map_err(|e| OAuthError::Config(format!("cannot remove the kept tokens: {e}")))
    }

    fn save(&self, st: &StoredAuth) {
        if let Err(e) = self.ctx.store.save(st) {
            tracing::warn!(target: "garuda::mcp", server = %self.name,
                "cannot keep the sign-in (it lasts for this session only): {e}");
        }
    }

    /// Uses the refresh token; `Err` when there is none or the server refused it (the
    /// refresh token is then dropped).
    async fn refresh(&self, st: &mut StoredAuth) -> Result<(), OAuthError> {
        let (Some(tokens), Some(client)) = (st.tokens.clone(), st.client.clone()) else {
            return Err(OAuthError::Config("not signed in".into()));
        };
        let (Some(refresh), Some(endpoint)) =
            (tokens.refresh_token.clone(), client.token_endpoint.clone())
        else {
            return Err(OAuthError::Config("no refresh token".into()));
        };
        let form = vec![
            ("grant_type", "refresh_token".to_string()),
            ("refresh_token", refresh.clone()),
        ];
        let method = client.auth_method.clone().unwrap_or_else(|| "none".into());
        match self
            .token_request(&endpoint, &client, &method, form, st.resource.clone())
            .await
        {
            Ok(mut fresh) => {
                if fresh.refresh_token.is_none() {
                    fresh.refresh_token = Some(refresh);
                }
                if fresh.scope.is_none() {
                    fresh.scope = tokens.scope;
                }
                st.tokens = Some(fresh);
                self.save(st);
                tracing::info!(target: "garuda::mcp", server = %self.name, "token refreshed");
                Ok(())
            }
            Err(e) => {
                if let Some(t) = st.tokens.as_mut() {
                    t.refresh_token = None;
                }
                Err(e)
            }
        }
    }

    /// Discovers, settles on a client, and runs the configured grant.
    async fn authorize(
        &self,
        st: &mut StoredAuth,
        challenge: Option<&Challenge>,
        step_up: bool,
    ) -> Result<(), OAuthError> {
        if !self.config.is_enabled() {
            return Err(OAuthError::Config(format!(
                "MCP server `{}` asks for sign-in, and sign-in is turned off for it (oauth.enabled = false)",
                self.name
            )));
        }
        let d = discover(&self.http, &self.server_url, challenge).await?;
        // A client belongs to one authorization server; another one gets its own.
        if st.client.as_ref().is_some_and(|c| c.issuer != d.issuer) {
            st.client = None;
            st.tokens = None;
        }
        let previous = if step_up {
            st.tokens.as_ref().and_then(|t| t.scope.clone())
        } else {
            None
        };
        let scope = self.pick_scope(&d, challenge, previous.as_deref());
        st.resource = Some(d.resource.clone());
        let tokens = match self.config.grant {
            OAuthGrant::AuthorizationCode => self.code_grant(st, &d, scope.clone()).await?,
            OAuthGrant::ClientCredentials | OAuthGrant::JwtBearer => {
                self.headless_grant(st, &d, scope.clone()).await?
            }
        };
        st.tokens = Some(StoredTokens {
            scope: tokens.scope.clone().or(scope),
            ..tokens
        });
        self.save(st);
        tracing::info!(target: "garuda::mcp", server = %self.name, "signed in");
        Ok(())
    }

    /// The scopes to ask for: the challenge's, else the config's, else the resource's
    /// `scopes_supported`, else none; a step-up adds the scopes asked for before, and
    /// `offline_access` is added where the authorization server offers it.
    fn pick_scope(
        &self,
        d: &Discovered,
        challenge: Option<&Challenge>,
        previous: Option<&str>,
    ) -> Option<String> {
        let base: Vec<String> = if let Some(s) = challenge.and_then(|c| c.scope.clone()) {
            s.split_whitespace().map(str::to_string).collect()
        } else if !self.config.scopes.is_empty() {
            self.config.scopes.clone()
        } else {
            d.resource_scopes.clone().unwrap_or_default()
        };
        let offers_offline = self.config.grant == OAuthGrant::AuthorizationCode
            && d.metadata
                .scopes_supported
                .as_ref()
                .is_some_and(|s| s.iter().any(|x| x == "offline_access"))
            && d.metadata
                .grant_types_supported
                .as_ref()
                .is_none_or(|g| g.iter().any(|x| x == "refresh_token"));
        let offline = offers_offline.then_some("offline_access");
        join_scopes(
            previous
                .into_iter()
                .flat_map(str::split_whitespace)
                .chain(base.iter().map(String::as_str))
                .chain(offline),
        )
    }

    /// The secret of `client`: its registered one, else the configured one.
    fn secret_of(&self, client: &StoredClient) -> Option<String> {
        client.client_secret.clone().or_else(|| {
            (!client.registered && self.config.client_id.as_deref() == Some(&client.client_id))
                .then(|| self.client_secret.clone())
                .flatten()
        })
    }

    /// The configured client's private key (PEM), when there is one.
    fn client_key(&self) -> Result<Option<String>, OAuthError> {
        if let Some(pem) = &self.client_key {
            return Ok(Some(pem.clone()));
        }
        let Some(path) = &self.config.client_key_file else {
            return Ok(None);
        };
        std::fs::read_to_string(path).map(Some).map_err(|e| {
            OAuthError::Config(format!(
                "cannot read client_key_file {}: {e}",
                path.display()
            ))
        })
    }

    /// The token endpoint auth method for `client` at this server: a signed assertion for a
    /// configured client with a key where the server takes one; else what registration
    /// settled on when the server takes it; else basic, post or none, as offered (RFC 8414's
    /// default is `client_secret_basic`).
    fn auth_method(&self, d: &Discovered, client: &StoredClient) -> Result<String, OAuthError> {
        let supported = d
            .metadata
            .token_endpoint_auth_methods_supported
            .clone()
            .unwrap_or_else(|| vec!["client_secret_basic".into()]);
        let offered = |m: &str| supported.iter().any(|s| s == m);
        if !client.registered && offered("private_key_jwt") && self.client_key()?.is_some() {
            return Ok("private_key_jwt".into());
        }
        if self.secret_of(client).is_none() {
            return Ok("none".into());
        }
        if let Some(m) = &client.auth_method
            && (m == "none" || offered(m))
        {
            return Ok(m.clone());
        }
        Ok(["client_secret_basic", "client_secret_post", "none"]
            .into_iter()
            .find(|m| offered(m))
            .unwrap_or("client_secret_basic")
            .to_string())
    }

    /// The client to use with `d`'s server; registers one when needed (with `redirect`).
    async fn client_for(
        &self,
        st: &mut StoredAuth,
        d: &Discovered,
        redirect: Option<&str>,
    ) -> Result<StoredClient, OAuthError> {
        if let Some(c) = &st.client
            && (!c.registered || redirect.is_none() || c.redirect_uri.as_deref() == redirect)
        {
            return Ok(c.clone());
        }
        let base = StoredClient {
            issuer: d.issuer.clone(),
            client_id: String::new(),
            client_secret: None,
            redirect_uri: None,
            auth_method: None,
            registered: false,
            token_endpoint: Some(d.metadata.token_endpoint.clone()),
        };
        if let Some(id) = &self.config.client_id {
            return Ok(StoredClient {
                client_id: id.clone(),
                ..base
            });
        }
        if let (Some(true), Some(url)) = (
            d.metadata.client_id_metadata_document_supported,
            &self.config.client_metadata_url,
        ) {
            return Ok(StoredClient {
                client_id: url.clone(),
                auth_method: Some("none".into()),
                ..base
            });
        }
        let Some(endpoint) = &d.metadata.registration_endpoint else {
            return Err(OAuthError::Config(format!(
                "the authorization server `{}` offers no client registration: register Garuda there and set `client_id` (and `client_secret_env`) in [mcp_servers.{}.oauth]",
                d.issuer, self.name
            )));
        };
        let supported = d
            .metadata
            .token_endpoint_auth_methods_supported
            .clone()
            .unwrap_or_default();
        let wanted = if supported.is_empty() || supported.iter().any(|m| m == "none") {
            "none"
        } else if supported.iter().any(|m| m == "client_secret_basic") {
            "client_secret_basic"
        } else {
            "client_secret_post"
        };
        let grant_types: Vec<&str> = match self.config.grant {
            OAuthGrant::AuthorizationCode => vec!["authorization_code", "refresh_token"],
            OAuthGrant::ClientCredentials => vec!["client_credentials"],
            OAuthGrant::JwtBearer => vec![JWT_BEARER],
        };
        let mut body = serde_json::json!({
            "client_name": "Garuda",
            "grant_types": grant_types,
            "response_types": if redirect.is_some() { vec!["code"] } else { vec![] },
            "token_endpoint_auth_method": wanted,
            "application_type": "native",
        });
        if let Some(r) = redirect {
            body["redirect_uris"] = serde_json::json!([r]);
        }
        let response = self
            .http
            .post(endpoint)
            .json(&body)
            .send()
            .await
            .map_err(|e| {
                OAuthError::Http(format!("client registration at {endpoint} failed: {e}"))
            })?;
        let status = response.status();
        let bytes = read_limited(response, MAX_ANSWER_BYTES)
            .await
            .map_err(|e| OAuthError::Http(format!("client registration at {endpoint}: {e}")))?;
        if !status.is_success() {
            return Err(refusal(&bytes).unwrap_or_else(|| {
                OAuthError::Http(format!(
                    "client registration at {endpoint} answered HTTP {status}"
                ))
            }));
        }
        let reg: Registration = serde_json::from_slice(&bytes).map_err(|e| {
            OAuthError::Metadata(format!(
                "the registration answer of {endpoint} is not usable: {e}"
            ))
        })?;
        let client = StoredClient {
            client_id: reg.client_id,
            client_secret: reg.client_secret,
            redirect_uri: redirect.map(str::to_string),
            auth_method: Some(
                reg.token_endpoint_auth_method
                    .unwrap_or_else(|| wanted.into()),
            ),
            registered: true,
            ..base
        };
        st.client = Some(client.clone());
        self.save(st);
        Ok(client)
    }

    /// The authorization-code grant: the person signs in in a browser.
    async fn code_grant(
        &self,
        st: &mut StoredAuth,
        d: &Discovered,
        scope: Option<String>,
    ) -> Result<StoredTokens, OAuthError> {
        let Some(authorize_at) = d.metadata.authorization_endpoint.clone() else {
            return Err(OAuthError::Metadata(format!(
                "the authorization server `{}` has no authorization endpoint",
                d.issuer
            )));
        };
        if d.has_metadata
            && !d
                .metadata
                .code_challenge_methods_supported
                .as_ref()
                .is_some_and(|m| m.iter().any(|x| x == "S256"))
        {
            return Err(OAuthError::Metadata(format!(
                "the authorization server `{}` does not offer PKCE with S256, which MCP requires",
                d.issuer
            )));
        }
        if !self.ctx.door.can_ask() {
            return Err(OAuthError::NeedsPerson {
                server: self.name.clone(),
                why: "no one can answer a sign-in here".into(),
            });
        }
        let kept_port = st
            .client
            .as_ref()
            .filter(|c| c.registered && c.issuer == d.issuer)
            .and_then(|c| c.redirect_uri.as_deref())
            .and_then(|u| Url::parse(u).ok())
            .and_then(|u| u.port());
        let port = self.config.callback_port.or(kept_port).unwrap_or(0);
        let listener = match Loopback::bind(port).await {
            Ok(l) => l,
            // The kept port is taken: a new port, and a new registration for it.
            Err(_) if self.config.callback_port.is_none() => Loopback::bind(0)
                .await
                .map_err(|e| OAuthError::Config(format!("cannot listen on 127.0.0.1: {e}")))?,
            Err(e) => {
                return Err(OAuthError::Config(format!(
                    "cannot listen on 127.0.0.1:{port} (oauth.callback_port): {e}"
                )));
            }
        };
        let redirect = listener.redirect_uri();
        let client = self.client_for(st, d, Some(&redirect)).await?;
        let verifier = random_b64(3);
        let state = random_b64(2);
        let mut url = Url::parse(&authorize_at).map_err(|e| {
            OAuthError::Metadata(format!("the authorization endpoint is not a URL: {e}"))
        })?;
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("response_type", "code")
                .append_pair("client_id", &client.client_id)
                .append_pair("redirect_uri", &redirect)
                .append_pair("code_challenge", &challenge_of(&verifier))
                .append_pair("code_challenge_method", "S256")
                .append_pair("state", &state)
                .append_pair("resource", &d.resource);
            if let Some(s) = &scope {
                q.append_pair("scope", s);
            }
        }
        let secs = self
            .config
            .sign_in_timeout_secs
            .unwrap_or(DEFAULT_SIGN_IN_TIMEOUT_SECS);
        self.waiting.store(true, Ordering::SeqCst);
        let answered = async {
            let open = self.ctx.door.open(SignInRequest {
                server: self.name.clone(),
                url: url.to_string(),
            });
            // The listener answers while the door is still open: a door may only return once
            // its browser got the loopback's page.
            let wait = listener.wait(&state, Duration::from_secs(secs));
            tokio::pin!(wait);
            let early = tokio::select! {
                opened = open => {
                    opened.map_err(|why| OAuthError::NeedsPerson {
                        server: self.name.clone(),
                        why,
                    })?;
                    None
                }
                got = &mut wait => Some(got),
            };
            let got = match early {
                Some(got) => got,
                None => wait.await,
            };
            got.ok_or(OAuthError::TimedOut {
                server: self.name.clone(),
                secs,
            })
        }
        .await;
        self.waiting.store(false, Ordering::SeqCst);
        let (code, iss) = match answered? {
            Callback::Code { code, iss } => (code, iss),
            Callback::Error { error, description } => {
                return Err(OAuthError::Refused { error, description });
            }
        };
        // RFC 9207: the response must come from the server the request went to, compared as
        // plain strings.
        match iss {
            Some(iss) if iss != d.metadata.issuer => {
                return Err(OAuthError::Response(format!(
                    "the authorization response names issuer `{iss}`, not `{}`; refusing it",
                    d.metadata.issuer
                )));
            }
            None if d.metadata.authorization_response_iss_parameter_supported == Some(true) => {
                return Err(OAuthError::Response(format!(
                    "the authorization server `{}` promises an `iss` in its responses and this one has none; refusing it",
                    d.issuer
                )));
            }
            _ => {}
        }
        let form = vec![
            ("grant_type", "authorization_code".to_string()),
            ("code", code),
            ("redirect_uri", redirect),
            ("code_verifier", verifier),
        ];
        self.exchange(st, d, client, form).await
    }

    /// Sends a grant's `form` to the token endpoint as `client`, and keeps the client with the
    /// auth method and endpoint that worked (a refresh uses the same).
    async fn exchange(
        &self,
        st: &mut StoredAuth,
        d: &Discovered,
        client: StoredClient,
        form: Vec<(&'static str, String)>,
    ) -> Result<StoredTokens, OAuthError> {
        let method = self.auth_method(d, &client)?;
        let tokens = self
            .token_request(
                &d.metadata.token_endpoint,
                &client,
                &method,
                form,
                Some(d.resource.clone()),
            )
            .await?;
        st.client = Some(StoredClient {
            auth_method: Some(method),
            token_endpoint: Some(d.metadata.token_endpoint.clone()),
            ..client
        });
        Ok(tokens)
    }

    /// The client-credentials or JWT-bearer grant: no person.
    async fn headless_grant(
        &self,
        st: &mut StoredAuth,
        d: &Discovered,
        scope: Option<String>,
    ) -> Result<StoredTokens, OAuthError> {
        let mut form = Vec::new();
        if self.config.grant == OAuthGrant::JwtBearer {
            let jwt = match &self.assertion {
                Some(a) => a.clone(),
                None => self.read_assertion()?,
            };
            form.push(("grant_type", JWT_BEARER.to_string()));
            form.push(("assertion", jwt));
        } else {
            form.push(("grant_type", "client_credentials".to_string()));
        }
        if let Some(s) = &scope {
            form.push(("scope", s.clone()));
        }
        let client = match (&self.config.client_id, self.config.grant) {
            (None, OAuthGrant::ClientCredentials) => {
                return Err(OAuthError::Config(format!(
                    "the client-credentials grant needs `client_id` and `client_secret_env` in [mcp_servers.{}.oauth]",
                    self.name
                )));
            }
            _ => self.client_for(st, d, None).await?,
        };
        self.exchange(st, d, client, form).await
    }

    /// The JWT for the JWT-bearer grant, from the config's variable or file.
    fn read_assertion(&self) -> Result<String, OAuthError> {
        if let Some(var) = &self.config.assertion_env {
            return crate::sandbox::secret_var(var)
                .filter(|s| !s.trim().is_empty())
                .map(|s| s.trim().to_string())
                .ok_or_else(|| OAuthError::Config(format!("assertion_env `{var}` is not set")));
        }
        if let Some(path) = &self.config.assertion_file {
            return std::fs::read_to_string(path)
                .map(|s| s.trim().to_string())
                .map_err(|e| {
                    OAuthError::Config(format!(
                        "cannot read assertion_file {}: {e}",
                        path.display()
                    ))
                });
        }
        Err(OAuthError::Config(format!(
            "the jwt_bearer grant needs `assertion_env` or `assertion_file` in [mcp_servers.{}.oauth]",
            self.name
        )))
    }

    /// POSTs a token request with the client's authentication and the `resource`.
    async fn token_request(
        &self,
        endpoint: &str,
        client: &StoredClient,
        method: &str,
        mut form: Vec<(&'static str, String)>,
        resource: Option<String>,
    ) -> Result<StoredTokens, OAuthError> {
        if let Some(r) = resource {
            form.push(("resource", r));
        }
        let mut request = self
            .http
            .post(endpoint)
            .header(reqwest::header::ACCEPT, "application/json");
        let secret = self.secret_of(client);
        match (method, secret) {
            ("client_secret_basic", Some(secret)) => {
                // RFC 6749 section 2.3.1: both parts form-encoded before the Basic encoding.
                let enc = |s: &str| {
                    url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>()
                };
                let pair = format!("{}:{}", enc(&client.client_id), enc(&secret));
                request = request.header(
                    reqwest::header::AUTHORIZATION,
                    format!("Basic {}", STANDARD.encode(pair)),
                );
            }
            ("client_secret_post", Some(secret)) => {
                form.push(("client_id", client.client_id.clone()));
                form.push(("client_secret", secret));
            }
            ("private_key_jwt", _) => {
                let pem = self.client_key()?.ok_or_else(|| {
                    OAuthError::Config("private_key_jwt needs `client_key_file`".into())
                })?;
                let assertion =
                    super::jwt::client_assertion(&pem, &client.client_id, &client.issuer, now())?;
                form.push(("client_id", client.client_id.clone()));
                form.push((
                    "client_assertion_type",
                    "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".to_string(),
                ));
                form.push(("client_assertion", assertion));
            }
            _ => form.push(("client_id", client.client_id.clone())),
        }
        let response = request.form(&form).send().await.map_err(|e| {
            OAuthError::Http(format!("the token request to {endpoint} failed: {e}"))
        })?;
        let status = response.status();
        let bytes = read_limited(response, MAX_ANSWER_BYTES)
            .await
            .map_err(|e| OAuthError::Http(format!("the token answer of {endpoint}: {e}")))?;
        if !status.is_success() {
            return Err(refusal(&bytes).unwrap_or_else(|| {
                OAuthError::Http(format!(
                    "the token endpoint {endpoint} answered HTTP {status}"
                ))
            }));
        }
        let answer: TokenAnswer = serde_json::from_slice(&bytes).map_err(|_| {
            // serde's message could quote the body, and the body holds a token.
            OAuthError::Metadata(format!("the token answer of {endpoint} is not usable"))
        })?;
        if let Some(kind) = &answer.token_type
            && !kind.eq_ignore_ascii_case("bearer")
        {
            return Err(OAuthError::Config(format!(
                "the token endpoint {endpoint} gave a `{kind}` token; only Bearer tokens are supported"
            )));
        }
        Ok(StoredTokens {
            access_token: answer.access_token,
            refresh_token: answer.refresh_token,
            expires_at: answer.expires_in.map(|s| now() + s),
            scope: answer.scope,
        })
    }
}

/// An OAuth error answer as [`OAuthError::Refused`].
fn refusal(bytes: &[u8]) -> Option<OAuthError> {
    let e: ErrorAnswer = serde_json::from_slice(bytes).ok()?;
    Some(OAuthError::Refused {
        error: e.error,
        description: e.error_description,
    })
}

/// What is kept for `server_url` in `store`, in one line for `garuda doctor`.
pub fn describe(store: &dyn super::TokenStore, server_url: &str) -> String {
    match store.load(server_url).and_then(|a| a.tokens) {
        None => "not signed in".to_string(),
        Some(t) => {
            let expiry = match t.expires_at {
                Some(at) if at <= now() => "token expired".to_string(),
                Some(at) => format!("token expires in {} min", (at - now()).div_ceil(60)),
                None => "token without expiry".to_string(),
            };
            let refresh = if t.refresh_token.is_some() {
                ", refreshable"
            } else {
                ""
            };
            format!("signed in ({expiry}{refresh})")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce_and_scopes() {
        // RFC 7636 appendix B.
        assert_eq!(
            challenge_of("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        let v = random_b64(3);
        assert!(v.len() >= 43 && v.len() <= 128, "{v}");
        assert_ne!(random_b64(2), random_b64(2));
        assert_eq!(join_scopes("a b a c".split(' ')).as_deref(), Some("a b c"));
        assert_eq!(join_scopes([""]), None);
    }
}
