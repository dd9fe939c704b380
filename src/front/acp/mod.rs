//! The ACP front: `garuda acp`, an Agent Client Protocol v1 agent over stdio.
//!
//! Editors that speak ACP (Zed, JetBrains, CodeCompanion.nvim, avante.nvim, agent-shell) start
//! `garuda acp` and exchange newline-delimited JSON-RPC; the transport is [`crate::rpc`] (it
//! detects the framing). The messages are the types of the official
//! `agent-client-protocol-schema` crate (pinned in `Cargo.toml`), so the wire follows the
//! protocol's own definitions. Each method maps onto the same [`Engine`] calls as the native
//! front:
//!
//! | ACP | Garuda |
//! | --- | --- |
//! | `initialize` | protocol version 1; remembers the client's `fs`, `terminal` and `session.compaction` |
//! | `session/new` | opens `cwd` as a workspace, `Engine::new_session`; modes and config options |
//! | `session/load` | replays the visible history as `session/update`s |
//! | `session/resume` | the session without a replay |
//! | `session/list` | the workspace's stored sessions, newest first, with titles |
//! | `session/close` | cancels its work and frees it from memory |
//! | `session/prompt` | `Engine::run_turn`; turn events become `session/update` |
//! | `session/set_mode` | the approval policy (`ask`, `auto-edit`, `full-auto`) |
//! | `session/set_config_option` | `model` (category `model`) or `mode` |
//! | `session/cancel`, `$/cancel_request` | cancel the running turn / request |
//!
//! Serde note: the schema crate turns on serde_json's `preserve_order` for the whole build
//! (Cargo unifies features), so every `serde_json::Value` in Garuda keeps insertion order.
//! Output stays deterministic (the order is the code's or the input's); request bodies to
//! providers are built from structs and `json!` literals in a fixed order.
//!
//! Limits:
//! - The start model is `$GARUDA_MODEL` when set, else the configured one; the `model`
//!   config option switches it later.
//! - `additionalDirectories` are opened as extra Garuda workspaces (their instruction files
//!   are read) and named to the model in the first prompt, but the built-in tools stay
//!   confined to `cwd`.
//! - `mcpServers` (stdio and http; sse is refused) are started with the session beside the
//!   user's configured servers, as Garuda's own MCP servers are (`garuda_core::mcp`).

mod convert;
mod host;
mod slash;

pub use convert::ClientCaps;
pub use host::{AcpHost, send_update};

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol_schema::v1 as acp;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::native::engine_error;
use super::parse_params;
use crate::rpc::{Client, Dispatch, Flow, Handler, Id, RequestCtx, RpcError, codes};
use garuda_core::engine::{Engine, EngineError, NewSession};
use garuda_core::message::Block;
use garuda_core::tools::Policy;
use garuda_core::turn::{LiveSession, TurnHost};

/// The environment variable that picks the model of ACP sessions.
pub const MODEL_ENV: &str = "GARUDA_MODEL";

/// ACP's "resource not found", for unknown sessions.
const RESOURCE_NOT_FOUND: i64 = -32002;

/// Sessions one `session/list` page holds.
const LIST_PAGE: usize = 100;

/// What the front remembers about a session beyond the engine.
#[derive(Debug, Default, Clone)]
struct AcpSession {
    /// `additionalDirectories` still to be named to the model in the next prompt.
    extra_dirs: Vec<PathBuf>,
}

/// The ACP handler.
pub struct AcpFront {
    engine: Arc<Engine>,
    /// What the client offered in `initialize`.
    caps: Mutex<ClientCaps>,
    sessions: Arc<Mutex<HashMap<String, AcpSession>>>,
    /// Running `session/prompt` requests by id, for `$/cancel_request`.
    prompts: Arc<Mutex<HashMap<Id, CancellationToken>>>,
    /// The model of new sessions (`$GARUDA_MODEL`); `None`: the configured one.
    model: Option<String>,
    /// `initialize` was answered: sessions may be made.
    initialized: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The maps stay consistent even if a holder panicked.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn to_value<T: serde::Serialize>(v: T) -> Result<Value, RpcError> {
    serde_json::to_value(v).map_err(|e| RpcError::internal(e.to_string()))
}

/// An engine error as ACP expects it: an unknown session is "resource not found".
fn acp_error(e: EngineError) -> RpcError {
    match e {
        EngineError::SessionNotFound(id) => {
            RpcError::new(RESOURCE_NOT_FOUND, format!("session {id} not found"))
        }
        other => engine_error(other),
    }
}

/// ISO 8601 (UTC, seconds) of unix milliseconds, for `updatedAt`.
fn iso8601(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = garuda_core::workspace::civil_date(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A title from the first user text, as the store makes it (one line, at most 80
/// characters), so the live title and `session/list` agree.
fn title_of(text: &str) -> Option<String> {
    let t = garuda_core::session::store::excerpt(text, 80);
    (!t.is_empty()).then_some(t)
}

impl AcpFront {
    /// A front over a fresh engine; `model` overrides the configured model.
    pub fn new(
        config: garuda_core::config::Config,
        state_dir: PathBuf,
        model: Option<String>,
    ) -> Arc<AcpFront> {
        // ACP has no notification for changed instruction files; the next prompt picks them up.
        let engine = Arc::new(Engine::new(config, state_dir, Arc::new(|_| {}), true));
        Arc::new(AcpFront {
            engine,
            caps: Mutex::new(ClientCaps::default()),
            sessions: Arc::new(Mutex::new(HashMap::new())),
            prompts: Arc::new(Mutex::new(HashMap::new())),
            model,
            initialized: AtomicBool::new(false),
        })
    }

    /// The engine behind this front.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    fn caps(&self) -> ClientCaps {
        *lock(&self.caps)
    }

    fn initialize(&self, params: Value) -> Result<Value, RpcError> {
        let p: acp::InitializeRequest = parse_params(params)?;
        *lock(&self.caps) = ClientCaps::of(&p.client_capabilities);
        self.initialized.store(true, Ordering::Release);
        let session = acp::SessionCapabilities::new()
            .list(acp::SessionListCapabilities::new())
            .resume(acp::SessionResumeCapabilities::new())
            .close(acp::SessionCloseCapabilities::new())
            .additional_directories(acp::SessionAdditionalDirectoriesCapabilities::new());
        let caps = acp::AgentCapabilities::new()
            .load_session(true)
            .prompt_capabilities(
                acp::PromptCapabilities::new()
                    .image(true)
                    .audio(false)
                    .embedded_context(true),
            )
            .session_capabilities(session);
        // Garuda speaks v1 whatever the client asks for; a client without v1 disconnects.
        to_value(
            acp::InitializeResponse::new(agent_client_protocol_schema::ProtocolVersion::V1)
                .agent_capabilities(caps)
                .agent_info(acp::Implementation::new(
                    "garuda",
                    env!("CARGO_PKG_VERSION"),
                )),
        )
    }

    /// The modes and config options of a session, as `session/new|load|resume` answer them.
    fn settings(
        &self,
        live: &LiveSession,
    ) -> (acp::SessionModeState, Vec<acp::SessionConfigOption>) {
        let policy = live.policy();
        (
            convert::modes(policy),
            convert::config_options(&live.model_spec(), &self.engine.known_models(), policy),
        )
    }

    fn session_new(&self, params: Value) -> Dispatch {
        let p: acp::NewSessionRequest = match parse_params(params) {
            Ok(p) => p,
            Err(e) => return Dispatch::Reply(Err(e)),
        };
        if !p.cwd.is_absolute() {
            return Dispatch::Reply(Err(RpcError::invalid_params(format!(
                "cwd {} must be an absolute path",
                p.cwd.display()
            ))));
        }
        let mcp_servers = match mcp_servers_of(&p.mcp_servers) {
            Ok(s) => s,
            Err(e) => return Dispatch::Reply(Err(e)),
        };
        let engine = self.engine.clone();
        let result = (|| {
            let ws = engine
                .open_workspace(&p.cwd)
                .map_err(super::native::ws_error)?;
            let mut extra = Vec::new();
            for dir in &p.additional_directories {
                match engine.open_workspace(dir) {
                    Ok(w) => extra.push(w.root.path().to_path_buf()),
                    Err(e) => {
                        tracing::warn!("additional directory {} not opened: {e}", dir.display())
                    }
                }
            }
            let (live, warnings) = engine
                .new_session(
                    &ws.id,
                    NewSession {
                        model: self.model.clone(),
                        origin: garuda_core::session::SessionOrigin::Acp,
                        mcp_servers,
                        ..Default::default()
                    },
                )
                .map_err(engine_error)?;
            for w in warnings {
                tracing::warn!("{w}");
            }
            Ok::<_, RpcError>((live, extra))
        })();
        let (live, extra) = match result {
            Ok(r) => r,
            Err(e) => return Dispatch::Reply(Err(e)),
        };
        let id = live.id().to_string();
        lock(&self.sessions).insert(id.clone(), AcpSession { extra_dirs: extra });
        let (modes, options) = self.settings(&live);
        let answer = to_value(
            acp::NewSessionResponse::new(id.clone())
                .modes(modes)
                .config_options(options),
        );
        // The client learns the session id from the answer: the commands follow it.
        Dispatch::ReplyThen(
            answer,
            Box::new(move |client: &Client| send_update(client, &id, convert::commands())),
        )
    }

    fn session_load(&self, params: Value, client: Client) -> Dispatch {
        let p: acp::LoadSessionRequest = match parse_params(params) {
            Ok(p) => p,
            Err(e) => return Dispatch::Reply(Err(e)),
        };
        let mcp_servers = match mcp_servers_of(&p.mcp_servers) {
            Ok(s) => s,
            Err(e) => return Dispatch::Reply(Err(e)),
        };
        let engine = self.engine.clone();
        let id = p.session_id.0.to_string();
        let caps = self.caps();
        let front_sessions = self.sessions.clone();
        Dispatch::Spawn(Box::pin(async move {
            let (updates, live) = {
                let id = id.clone();
                let engine = engine.clone();
                tokio::task::spawn_blocking(move || {
                    let live = engine.load_session(&id, mcp_servers)?;
                    let root = live.workspace().root.path().to_path_buf();
                    let tools = live.setup().tools.clone();
                    let mut entries = Vec::new();
                    let mut cursor = None;
                    loop {
                        let page = engine.messages(&id, cursor, Some(500))?;
                        let empty = page.messages.is_empty();
                        entries.extend(page.messages);
                        match page.next_cursor {
                            Some(c) if !empty => cursor = Some(c),
                            _ => break,
                        }
                    }
                    let updates = convert::history(&entries, &tools, &root, caps);
                    Ok::<_, EngineError>((updates, live))
                })
                .await
                .map_err(|e| RpcError::internal(e.to_string()))?
                .map_err(acp_error)?
            };
            let root = live.workspace().root.path();
            if std::fs::canonicalize(&p.cwd).ok().as_deref() != Some(root) {
                tracing::info!(
                    "session/load: cwd {} differs from the session's workspace {}; keeping the session's",
                    p.cwd.display(),
                    root.display()
                );
            }
            lock(&front_sessions).entry(id.clone()).or_default();
            for u in updates {
                send_update(&client, &id, u);
            }
            send_update(&client, &id, convert::commands());
            if let Some(title) = stored_title(&engine, &live) {
                send_update(&client, &id, session_info(title));
            }
            let policy = live.policy();
            let options =
                convert::config_options(&live.model_spec(), &engine.known_models(), policy);
            to_value(
                acp::LoadSessionResponse::new()
                    .modes(convert::modes(policy))
                    .config_options(options),
            )
        }))
    }

    fn session_resume(&self, params: Value, client: Client) -> Dispatch {
        let p: acp::ResumeSessionRequest = match parse_params(params) {
            Ok(p) => p,
            Err(e) => return Dispatch::Reply(Err(e)),
        };
        let engine = self.engine.clone();
        let id = p.session_id.0.to_string();
        lock(&self.sessions).entry(id.clone()).or_default();
        Dispatch::Spawn(Box::pin(async move {
            let live = {
                let engine = engine.clone();
                let id = id.clone();
                tokio::task::spawn_blocking(move || engine.session(&id))
                    .await
                    .map_err(|e| RpcError::internal(e.to_string()))?
                    .map_err(acp_error)?
            };
            send_update(&client, &id, convert::commands());
            let policy = live.policy();
            let options =
                convert::config_options(&live.model_spec(), &engine.known_models(), policy);
            to_value(
                acp::ResumeSessionResponse::new()
                    .modes(convert::modes(policy))
                    .config_options(options),
            )
        }))
    }

    fn session_list(&self, params: Value) -> Dispatch {
        let p: acp::ListSessionsRequest = match parse_params(params) {
            Ok(p) => p,
            Err(e) => return Dispatch::Reply(Err(e)),
        };
        let engine = self.engine.clone();
        Dispatch::Spawn(Box::pin(async move {
            tokio::task::spawn_blocking(move || list_sessions(&engine, p))
                .await
                .map_err(|e| RpcError::internal(e.to_string()))?
        }))
    }

    fn session_close(&self, params: Value) -> Dispatch {
        let p: acp::CloseSessionRequest = match parse_params(params) {
            Ok(p) => p,
            Err(e) => return Dispatch::Reply(Err(e)),
        };
        let id = p.session_id.0.to_string();
        let known = lock(&self.sessions).remove(&id).is_some();
        let freed = self.engine.close_session(&id);
        if !known && !freed {
            return Dispatch::Reply(Err(RpcError::new(
                RESOURCE_NOT_FOUND,
                format!("session {id} is not open"),
            )));
        }
        Dispatch::Reply(to_value(acp::CloseSessionResponse::new()))
    }

    fn set_mode(&self, params: Value) -> Dispatch {
        let p: acp::SetSessionModeRequest = match parse_params(params) {
            Ok(p) => p,
            Err(e) => return Dispatch::Reply(Err(e)),
        };
        let policy: Policy = match p.mode_id.0.parse() {
            Ok(p) => p,
            Err(e) => return Dispatch::Reply(Err(RpcError::invalid_params(format!("{e}")))),
        };
        let id = p.session_id.0.to_string();
        match self.engine.sessions.live(&id) {
            Some(live) => live.set_policy(policy),
            None => {
                return Dispatch::Reply(Err(RpcError::new(
                    RESOURCE_NOT_FOUND,
                    format!("session {id} is not open"),
                )));
            }
        }
        Dispatch::Reply(to_value(acp::SetSessionModeResponse::new()))
    }

    fn set_config_option(&self, params: Value, client: Client) -> Dispatch {
        let p: acp::SetSessionConfigOptionRequest = match parse_params(params) {
            Ok(p) => p,
            Err(e) => return Dispatch::Reply(Err(e)),
        };
        let id = p.session_id.0.to_string();
        let engine = self.engine.clone();
        Dispatch::Spawn(Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let live = engine.sessions.live(&id).ok_or_else(|| {
                    RpcError::new(RESOURCE_NOT_FOUND, format!("session {id} is not open"))
                })?;
                let Some(value) = p.value.as_value_id().map(|v| v.0.to_string()) else {
                    return Err(RpcError::invalid_params(format!(
                        "{} takes one of its listed values, not a boolean",
                        p.config_id.0
                    )));
                };
                match &*p.config_id.0 {
                    convert::MODEL_OPTION => {
                        for w in engine.set_model(&id, &value).map_err(|e| match e {
                            EngineError::SessionNotFound(_) => acp_error(e),
                            other => RpcError::invalid_params(format!(
                                "model {value} cannot be used: {other}"
                            )),
                        })? {
                            tracing::warn!("{w}");
                        }
                    }
                    convert::MODE_OPTION => {
                        let policy: Policy = value
                            .parse()
                            .map_err(|e| RpcError::invalid_params(format!("{e}")))?;
                        live.set_policy(policy);
                        send_update(
                            &client,
                            &id,
                            acp::SessionUpdate::CurrentModeUpdate(acp::CurrentModeUpdate::new(
                                policy.name(),
                            )),
                        );
                    }
                    other => {
                        return Err(RpcError::invalid_params(format!(
                            "unknown config option {other}: Garuda has `model` and `mode`"
                        )));
                    }
                }
                let options = convert::config_options(
                    &live.model_spec(),
                    &engine.known_models(),
                    live.policy(),
                );
                to_value(acp::SetSessionConfigOptionResponse::new(options))
            })
            .await
            .map_err(|e| RpcError::internal(e.to_string()))?
        }))
    }

    fn session_prompt(&self, params: Value, ctx: RequestCtx) -> Dispatch {
        let p: acp::PromptRequest = match parse_params(params) {
            Ok(p) => p,
            Err(e) => return Dispatch::Reply(Err(e)),
        };
        let id = p.session_id.0.to_string();
        let engine = self.engine.clone();
        let live = match engine.session(&id) {
            Ok(l) => l,
            Err(e) => return Dispatch::Reply(Err(acp_error(e))),
        };
        let host = Arc::new(AcpHost::new(
            ctx.client.clone(),
            live.context_window(),
            live.setup().tools.clone(),
            live.workspace().root.clone(),
            self.caps(),
            id.clone(),
        ));
        let text = convert::prompt_text(&p.prompt);
        if let Some(cmd) = slash::parse(&text) {
            return Dispatch::Spawn(Box::pin(async move {
                let host: Arc<dyn TurnHost> = host;
                slash::run(&engine, &id, cmd, host, ctx.cancel.clone()).await;
                to_value(acp::PromptResponse::new(acp::StopReason::EndTurn))
            }));
        }
        if !live.has_user_words()
            && let Some(title) = title_of(&text)
        {
            send_update(&ctx.client, &id, session_info(title));
        }
        let extra = lock(&self.sessions)
            .get_mut(&id)
            .map(|s| std::mem::take(&mut s.extra_dirs))
            .unwrap_or_default();
        let mut input = Vec::new();
        if !extra.is_empty() {
            let list: Vec<String> = extra.iter().map(|d| format!("- {}", d.display())).collect();
            input.push(Block::text(format!(
                "The editor also opened these directories (outside the workspace root; your file tools cannot reach them):\n{}",
                list.join("\n")
            )));
        }
        input.extend(convert::prompt_blocks(p.prompt));
        let prompts = self.prompts.clone();
        lock(&prompts).insert(ctx.id.clone(), ctx.cancel.clone());
        let req_id = ctx.id.clone();
        Dispatch::Spawn(Box::pin(async move {
            let out = engine.run_turn(&id, input, host, ctx.cancel.clone()).await;
            lock(&prompts).remove(&req_id);
            let out = out.map_err(acp_error)?;
            match convert::stop_reason(out.stop_reason) {
                Some(r) => to_value(acp::PromptResponse::new(r)),
                None => Err(RpcError::new(
                    garuda_protocol::codes::PROVIDER_ERROR,
                    out.error.unwrap_or_else(|| "the turn failed".into()),
                )),
            }
        }))
    }

    fn cancel_session(&self, params: Value) {
        let Ok(p) = parse_params::<acp::CancelNotification>(params) else {
            tracing::warn!("session/cancel without a valid sessionId");
            return;
        };
        if let Some(live) = self.engine.sessions.live(&p.session_id.0) {
            live.cancel();
        }
    }

    fn cancel_request(&self, params: Value) {
        let id = params
            .get("requestId")
            .cloned()
            .and_then(|v| serde_json::from_value::<Id>(v).ok());
        match id.and_then(|id| lock(&self.prompts).get(&id).cloned()) {
            Some(t) => t.cancel(),
            None => tracing::debug!("$/cancel_request for a request not in flight"),
        }
    }
}

/// A `session_info_update` carrying a title.
fn session_info(title: String) -> acp::SessionUpdate {
    acp::SessionUpdate::SessionInfoUpdate(acp::SessionInfoUpdate::new().title(title))
}

/// The title the store gives a session (an excerpt of its first user text).
fn stored_title(engine: &Engine, live: &LiveSession) -> Option<String> {
    let root = live.workspace().root.path().display().to_string();
    let list = engine.store().list_workspace(&root).ok()?;
    let s = list.into_iter().find(|s| s.id == live.id())?;
    s.title.filter(|t| !t.is_empty())
}

/// `session/list`: the stored sessions of `cwd` (of every workspace without it), newest
/// first, a page at a time (the cursor is the offset).
fn list_sessions(engine: &Engine, p: acp::ListSessionsRequest) -> Result<Value, RpcError> {
    let mut list = match &p.cwd {
        Some(cwd) => {
            if !cwd.is_absolute() {
                return Err(RpcError::invalid_params(format!(
                    "cwd {} must be an absolute path",
                    cwd.display()
                )));
            }
            let ws = engine
                .open_workspace(cwd)
                .map_err(super::native::ws_error)?;
            engine.list_sessions(&ws.id).map_err(engine_error)?
        }
        None => engine
            .store()
            .list()
            .map_err(|e| engine_error(EngineError::Store(e)))?,
    };
    list.sort_by(|a, b| b.created.cmp(&a.created).then_with(|| b.id.cmp(&a.id)));
    let start = match p.cursor.as_deref() {
        None => 0,
        Some(c) => c
            .parse::<usize>()
            .map_err(|_| RpcError::invalid_params(format!("invalid cursor {c:?}")))?,
    };
    let end = (start + LIST_PAGE).min(list.len());
    let sessions = list
        .get(start..end)
        .unwrap_or_default()
        .iter()
        .map(|s| {
            acp::SessionInfo::new(s.id.clone(), PathBuf::from(&s.workspace_root))
                .title(s.title.clone())
                .updated_at(iso8601(s.created))
        })
        .collect();
    let next = (end < list.len()).then(|| end.to_string());
    to_value(acp::ListSessionsResponse::new(sessions).next_cursor(next))
}

impl Handler for AcpFront {
    fn request(&self, method: &str, params: Value, ctx: RequestCtx) -> Dispatch {
        match method {
            "initialize" => Dispatch::Reply(self.initialize(params)),
            _ if !self.initialized.load(Ordering::Acquire) => Dispatch::Reply(Err(RpcError::new(
                codes::SERVER_NOT_INITIALIZED,
                format!("{method} before initialize; send initialize first"),
            ))),
            // `initialize` offers no auth methods, so no method id can be valid.
            "authenticate" => Dispatch::Reply(Err(RpcError::invalid_params(
                "authenticate: this agent offers no authentication methods (authMethods is empty)",
            ))),
            "session/new" => self.session_new(params),
            "session/load" => self.session_load(params, ctx.client),
            "session/resume" => self.session_resume(params, ctx.client),
            "session/list" => self.session_list(params),
            "session/close" => self.session_close(params),
            "session/prompt" => self.session_prompt(params, ctx),
            "session/set_mode" => self.set_mode(params),
            "session/set_config_option" => self.set_config_option(params, ctx.client),
            _ => Dispatch::Reply(Err(RpcError::new(
                codes::METHOD_NOT_FOUND,
                format!("unknown method {method}"),
            ))),
        }
    }

    fn notification(&self, method: &str, params: Value, _client: &Client) -> Flow {
        match method {
            "session/cancel" => self.cancel_session(params),
            "$/cancel_request" => self.cancel_request(params),
            _ => tracing::debug!("notification {method} ignored"),
        }
        Flow::Continue
    }
}

/// The client's `mcpServers` as Garuda's server entries; an entry Garuda cannot start (an
/// `sse` server, a malformed one) is an invalid-params error.
fn mcp_servers_of(
    servers: &[acp::McpServer],
) -> Result<Vec<(String, garuda_core::mcp::McpServerConfig)>, RpcError> {
    let v = serde_json::to_value(servers).map_err(|e| RpcError::internal(e.to_string()))?;
    garuda_core::mcp::from_acp(&v).map_err(|e| RpcError::invalid_params(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_titles() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso8601(1_764_547_200_000), "2025-12-01T00:00:00Z");
        assert_eq!(iso8601(951_782_400_000 + 3_661_000), "2000-02-29T01:01:01Z");
        assert_eq!(
            title_of("\n  fix the bug  \nplease"),
            Some("fix the bug please".into())
        );
        assert_eq!(title_of("  \n"), None);
        assert_eq!(title_of(&"x".repeat(90)).unwrap().chars().count(), 81);
    }
}
