//! The ACP front: `garuda acp`, an Agent Client Protocol v1 agent over stdio.
//!
//! Editors that speak ACP (Zed, JetBrains, CodeCompanion.nvim, avante.nvim, agent-shell) start
//! `garuda acp` and exchange newline-delimited JSON-RPC; the transport is [`crate::rpc`] (it
//! detects the framing). The messages are the types of the official
//! `agent-client-protocol-schema` crate (pinned in `Cargo.toml`), so the wire follows the
//! protocol's own definitions. Each method is a row of the table in [`methods`], whose
//! schedule says where it runs (nothing that reads the disk or waits runs on the read loop)
//! and whose lane which running limit it counts against, and maps onto the same [`Engine`]
//! calls as the native front:
//!
//! | ACP | Garuda |
//! | --- | --- |
//! | `initialize` | protocol version 1 to any asked version; remembers the client's `fs`, `terminal`, `session.compaction` and `session.notices`; the config file's problems in `_meta` |
//! | `logout` | nothing to forget (keys come from the environment or config): success |
//! | `session/new` | opens `cwd` as a workspace, `Engine::new_session`; modes and config options |
//! | `session/load` | replays the visible history as `session/update`s |
//! | `session/resume` | the session without a replay |
//! | `session/fork` (unstable) | `Engine::fork_session`: a new session with the history, the source unchanged; no replay |
//! | `session/list` | the workspace's stored sessions the user wrote in, most recently active first, titled by the user's words |
//! | `session/close` | cancels its work and frees it from memory |
//! | `session/delete` | closes it and removes its transcript (`Engine::delete_session`) |
//! | `session/prompt` | `Engine::run_turn`; turn events become `session/update` |
//! | `session/set_mode` | the approval policy (`ask`, `auto-edit`, `full-auto`, `plan`) |
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
pub mod methods;
mod slash;
mod subagent;

pub use convert::ClientCaps;
pub use host::{AcpHost, send_update};

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use agent_client_protocol_schema::v1 as acp;
use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::errors::{engine_error, ws_error};
use crate::rpc::{Client, Dispatch, Flow, Handler, Id, RequestCtx, RpcError, Then, codes};
use garuda_core::config::{ConfigProblem, Severity};
use garuda_core::engine::{Engine, EngineError, EngineEvent, NewSession};
use garuda_core::message::Block;
use garuda_core::tools::Policy;
use garuda_core::turn::{LiveSession, TurnHost};
use methods::{
    self as m, AcpMethod, AcpNotice, AcpRequest, BlockingRequest, InlineRequest, Lane,
    SpawnedRequest, ok,
};

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
    front: Arc<Front>,
}

/// The front's state, shared with the requests that run off the read loop.
struct Front {
    engine: Arc<Engine>,
    /// What the client offered in `initialize`.
    caps: Mutex<ClientCaps>,
    sessions: Mutex<HashMap<String, AcpSession>>,
    /// Running `session/prompt` requests by id, for `$/cancel_request`.
    prompts: Mutex<HashMap<Id, CancellationToken>>,
    /// The model of new sessions (`$GARUDA_MODEL`); `None`: the configured one.
    model: Option<String>,
    /// `initialize` was answered: sessions may be made.
    initialized: AtomicBool,
    /// The connection, for notices about the config file.
    client: OnceLock<Client>,
    /// The user's config file, watched from `initialize` on.
    config_path: Option<PathBuf>,
    /// The session made or loaded last: an MCP sign-in, which starts in the background after
    /// the answer, is asked in its scope.
    latest_session: Mutex<Option<String>>,
}

/// MCP sign-in pages go to the client as a URL elicitation (`elicitation/create`, mode
/// `url`), for clients that declared `elicitation.url`.
struct AcpSignIn(Weak<Front>);

impl garuda_core::mcp::oauth::SignInDoor for AcpSignIn {
    fn open(
        &self,
        request: garuda_core::mcp::oauth::SignInRequest,
    ) -> futures_util::future::BoxFuture<'static, Result<(), String>> {
        let front = self.0.upgrade();
        Box::pin(async move {
            let front = front.ok_or("the connection is closing")?;
            if !front.caps().elicitation_url {
                return Err("the editor did not declare ACP's elicitation.url".to_string());
            }
            let client = front.client.get().cloned().ok_or("no client yet")?;
            let session = lock(&front.latest_session)
                .clone()
                .ok_or("no session to ask in")?;
            let ask = garuda_core::mcp::ElicitationRequest {
                server: request.server.clone(),
                message: "Sign in to use this server's tools".to_string(),
                mode: garuda_core::mcp::ElicitationMode::Url {
                    url: request.url,
                    elicitation_id: String::new(),
                },
                tool_call_id: None,
            };
            let params = convert::elicitation_params(&session, &ask)?;
            let answer = client
                .request(
                    <methods::CreateElicitation as methods::ClientMethod>::NAME,
                    params,
                )
                .await
                .map_err(|e| format!("the editor failed elicitation/create: {}", e.message))?;
            match convert::elicitation_answer(answer) {
                garuda_core::mcp::ElicitationAnswer::Accept(_) => Ok(()),
                garuda_core::mcp::ElicitationAnswer::Unavailable(why) => Err(why),
                _ => Err("the person declined to sign in".to_string()),
            }
        })
    }

    fn can_ask(&self) -> bool {
        self.0.upgrade().is_some_and(|f| f.caps().elicitation_url)
    }
}

/// A blocking request's answer and what follows it on the wire.
type Answer = (Result<Value, RpcError>, Option<Then>);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The maps stay consistent even if a holder panicked.
    m.lock().unwrap_or_else(|p| p.into_inner())
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

fn not_open(id: &str) -> RpcError {
    RpcError::new(RESOURCE_NOT_FOUND, format!("session {id} is not open"))
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

impl AcpFront {
    /// A front over a fresh engine; `model` overrides the configured model.
    pub fn new(
        config: garuda_core::config::Config,
        state_dir: PathBuf,
        model: Option<String>,
    ) -> Arc<AcpFront> {
        let checked = garuda_core::config::Checked {
            config: Some(config),
            problems: Vec::new(),
        };
        Self::checked(checked, state_dir, model, None)
    }

    /// A front over a checked config file: its problems go in `initialize`'s `_meta` and the
    /// log, and to every open session as a `notice` when the watched file changes.
    pub fn checked(
        checked: garuda_core::config::Checked,
        state_dir: PathBuf,
        model: Option<String>,
        config_path: Option<PathBuf>,
    ) -> Arc<AcpFront> {
        // The engine's events need the front, which needs the engine: a late link.
        let link: Arc<OnceLock<Weak<Front>>> = Arc::new(OnceLock::new());
        let sink_link = link.clone();
        let events = Arc::new(move |ev: EngineEvent| match ev {
            // ACP has no notification for changed instruction files; the next prompt picks
            // them up.
            EngineEvent::ContextChanged(_) => {}
            EngineEvent::ConfigChanged(problems) => {
                if let Some(front) = sink_link.get().and_then(Weak::upgrade) {
                    front.config_changed(problems);
                }
            }
        });
        let engine = Arc::new(Engine::checked(checked, state_dir, events, true));
        let front = Arc::new(Front {
            engine,
            caps: Mutex::new(ClientCaps::default()),
            sessions: Mutex::new(HashMap::new()),
            prompts: Mutex::new(HashMap::new()),
            model,
            initialized: AtomicBool::new(false),
            client: OnceLock::new(),
            config_path,
            latest_session: Mutex::new(None),
        });
        let _ = link.set(Arc::downgrade(&front));
        front
            .engine
            .set_sign_in_door(Arc::new(AcpSignIn(Arc::downgrade(&front))));
        Arc::new(AcpFront { front })
    }

    /// The engine behind this front.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.front.engine
    }
}

impl Front {
    fn caps(&self) -> ClientCaps {
        *lock(&self.caps)
    }

    /// The memory-only view inline requests get.
    fn inline_view(&self) -> InlineView<'_> {
        InlineView {
            engine: self.engine.inline(),
            caps: &self.caps,
            sessions: &self.sessions,
            initialized: &self.initialized,
        }
    }

    /// Starts watching the user's config file (its first look at the disk runs off the
    /// read loop).
    fn watch_config(&self) {
        if let Some(path) = self.config_path.clone() {
            let engine = self.engine.clone();
            tokio::task::spawn_blocking(move || engine.watch_config(path));
        }
    }

    /// Requests that read or write files or wait for MCP servers, on the blocking pool.
    fn blocking(&self, req: BlockingRequest, client: &Client) -> Answer {
        match req {
            BlockingRequest::NewSession(p) => self.session_new(p),
            BlockingRequest::LoadSession(p) => (self.session_load(p, client), None),
            BlockingRequest::ResumeSession(p) => (self.session_resume(p, client), None),
            BlockingRequest::ForkSession(p) => self.session_fork(p),
            BlockingRequest::ListSessions(p) => (list_sessions(&self.engine, p), None),
            BlockingRequest::DeleteSession(p) => {
                let id = p.session_id.0.to_string();
                lock(&self.sessions).remove(&id);
                // ACP: deleting a session that is unknown or already gone SHOULD succeed
                // silently (the client's list may be older than the store).
                let deleted = match self.engine.delete_session(&id) {
                    Err(EngineError::SessionNotFound(_)) => Ok(()),
                    other => other.map_err(acp_error),
                };
                (
                    deleted
                        .and_then(|()| ok::<m::DeleteSession>(acp::DeleteSessionResponse::new())),
                    None,
                )
            }
            BlockingRequest::SetConfigOption(p) => (self.set_config_option(p, client), None),
        }
    }

    /// Requests that run as a task of their own; `$/cancel_request` cancels `ctx.cancel`.
    fn spawned(
        self: &Arc<Self>,
        req: SpawnedRequest,
        ctx: RequestCtx,
    ) -> BoxFuture<'static, Result<Value, RpcError>> {
        match req {
            SpawnedRequest::Prompt(p) => {
                let front = self.clone();
                Box::pin(async move { front.session_prompt(p, ctx).await })
            }
        }
    }

    fn session_new(&self, p: acp::NewSessionRequest) -> Answer {
        let result = (|| {
            if !p.cwd.is_absolute() {
                return Err(RpcError::invalid_params(format!(
                    "cwd {} must be an absolute path",
                    p.cwd.display()
                )));
            }
            let mcp_servers = mcp_servers_of(&p.mcp_servers)?;
            let engine = &self.engine;
            let ws = engine.open_workspace(&p.cwd).map_err(ws_error)?;
            let extra = open_extra(engine, &p.additional_directories);
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
            let mut warnings = warnings;
            // On a blocking thread, as in the native front: a local server is asked for its
            // window here, once, and a fixed part over half of it is a warning.
            warnings
                .extend(tokio::runtime::Handle::current().block_on(engine.window_warning(&live)));
            for w in &warnings {
                tracing::warn!("{w}");
            }
            // The config file's warnings (unknown keys) are in force for this session too.
            warnings.extend(engine.config_problems().iter().map(ToString::to_string));
            Ok::<_, RpcError>((live, extra, warnings))
        })();
        let (live, extra, warnings) = match result {
            Ok(r) => r,
            Err(e) => return (Err(e), None),
        };
        let id = live.id().to_string();
        lock(&self.sessions).insert(id.clone(), AcpSession { extra_dirs: extra });
        *lock(&self.latest_session) = Some(id.clone());
        let (modes, options) = self.settings(&live);
        let answer = ok::<m::NewSession>(
            acp::NewSessionResponse::new(id.clone())
                .modes(modes)
                .config_options(options),
        );
        // The client learns the session id from the answer: the commands follow it.
        let notices = self.caps().notices;
        let then: Then = Box::new(move |client: &Client| {
            send_update(client, &id, convert::commands());
            // No sandbox, an unknown model: shown when the client can show them, else only
            // logged (above).
            if notices {
                for w in warnings {
                    let n = convert::notice(acp::NoticeSeverity::Warning, &w, None);
                    send_update(client, &id, n);
                }
            }
            mcp_failures_later(&live, client, &id, notices);
        });
        (answer, Some(then))
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

    fn session_load(&self, p: acp::LoadSessionRequest, client: &Client) -> Result<Value, RpcError> {
        let mcp_servers = mcp_servers_of(&p.mcp_servers)?;
        let engine = &self.engine;
        let id = p.session_id.0.to_string();
        let caps = self.caps();
        *lock(&self.latest_session) = Some(id.clone());
        let live = engine.load_session(&id, mcp_servers).map_err(acp_error)?;
        let root = live.workspace().root.path().to_path_buf();
        let tools = live.tools();
        let mut entries = Vec::new();
        let mut cursor = None;
        loop {
            let page = engine.messages(&id, cursor, Some(500)).map_err(acp_error)?;
            let empty = page.messages.is_empty();
            entries.extend(page.messages);
            match page.next_cursor {
                Some(c) if !empty => cursor = Some(c),
                _ => break,
            }
        }
        let updates = convert::history(&entries, &tools, &root, caps);
        if std::fs::canonicalize(&p.cwd).ok().as_deref() != Some(root.as_path()) {
            tracing::info!(
                "session/load: cwd {} differs from the session's workspace {}; keeping the session's",
                p.cwd.display(),
                root.display()
            );
        }
        lock(&self.sessions).entry(id.clone()).or_default();
        for u in updates {
            send_update(client, &id, u);
        }
        send_update(client, &id, convert::commands());
        mcp_failures_later(&live, client, &id, caps.notices);
        if let Some(title) = stored_title(engine, &live) {
            send_update(client, &id, session_info(title));
        }
        let (modes, options) = self.settings(&live);
        ok::<m::LoadSession>(
            acp::LoadSessionResponse::new()
                .modes(modes)
                .config_options(options),
        )
    }

    /// `session/fork`: a new session with the source's stored history (the source is not
    /// touched), brought into memory without a replay (the client has the history already),
    /// with the source's approval policy when the source is live.
    fn session_fork(&self, p: acp::ForkSessionRequest) -> Answer {
        let result = (|| {
            if !p.cwd.is_absolute() {
                return Err(RpcError::invalid_params(format!(
                    "cwd {} must be an absolute path",
                    p.cwd.display()
                )));
            }
            let mcp_servers = mcp_servers_of(&p.mcp_servers)?;
            let engine = &self.engine;
            let source = p.session_id.0.to_string();
            let policy = engine.session_in_memory(&source).map(|s| s.policy());
            // A non-UUID id is invalid params (acp_error), as for load, resume and delete.
            let id = engine.fork_session(&source, None).map_err(|e| match e {
                EngineError::Store(garuda_core::session::StoreError::NotFound(_)) => {
                    acp_error(EngineError::SessionNotFound(source.clone()))
                }
                other => acp_error(other),
            })?;
            let (live, warnings) = engine
                .resume_session(
                    &id,
                    garuda_core::engine::ResumeSession {
                        policy,
                        mcp_servers,
                        ..Default::default()
                    },
                )
                .map_err(acp_error)?;
            let root = live.workspace().root.path().to_path_buf();
            if std::fs::canonicalize(&p.cwd).ok().as_deref() != Some(root.as_path()) {
                tracing::info!(
                    "session/fork: cwd {} differs from the session's workspace {}; keeping the session's",
                    p.cwd.display(),
                    root.display()
                );
            }
            for w in &warnings {
                tracing::warn!("session {id}: {w}");
            }
            let extra = open_extra(engine, &p.additional_directories);
            Ok::<_, RpcError>((live, extra))
        })();
        let (live, extra) = match result {
            Ok(r) => r,
            Err(e) => return (Err(e), None),
        };
        let id = live.id().to_string();
        lock(&self.sessions).insert(id.clone(), AcpSession { extra_dirs: extra });
        let (modes, options) = self.settings(&live);
        let title = stored_title(&self.engine, &live);
        let answer = ok::<m::ForkSession>(
            acp::ForkSessionResponse::new(id.clone())
                .modes(modes)
                .config_options(options),
        );
        // The client learns the new id from the answer: the commands and title follow it.
        let notices = self.caps().notices;
        let then: Then = Box::new(move |client: &Client| {
            send_update(client, &id, convert::commands());
            if let Some(title) = title {
                send_update(client, &id, session_info(title));
            }
            mcp_failures_later(&live, client, &id, notices);
        });
        (answer, Some(then))
    }

    fn session_resume(
        &self,
        p: acp::ResumeSessionRequest,
        client: &Client,
    ) -> Result<Value, RpcError> {
        let id = p.session_id.0.to_string();
        lock(&self.sessions).entry(id.clone()).or_default();
        *lock(&self.latest_session) = Some(id.clone());
        // The client's MCP servers for the session, as for session/load (a session already in
        // memory keeps its own).
        let mcp_servers = mcp_servers_of(&p.mcp_servers)?;
        let live = self
            .engine
            .load_session(&id, mcp_servers)
            .map_err(acp_error)?;
        send_update(client, &id, convert::commands());
        mcp_failures_later(&live, client, &id, self.caps().notices);
        let (modes, options) = self.settings(&live);
        ok::<m::ResumeSession>(
            acp::ResumeSessionResponse::new()
                .modes(modes)
                .config_options(options),
        )
    }

    fn set_config_option(
        &self,
        p: acp::SetSessionConfigOptionRequest,
        client: &Client,
    ) -> Result<Value, RpcError> {
        let id = p.session_id.0.to_string();
        let engine = &self.engine;
        let live = engine.session_in_memory(&id).ok_or_else(|| not_open(&id))?;
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
                    other => {
                        RpcError::invalid_params(format!("model {value} cannot be used: {other}"))
                    }
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
                    client,
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
        let options =
            convert::config_options(&live.model_spec(), &engine.known_models(), live.policy());
        ok::<m::SetConfigOption>(acp::SetSessionConfigOptionResponse::new(options))
    }

    /// `session/prompt`: a session not in memory is loaded on the blocking pool first.
    async fn session_prompt(
        &self,
        p: acp::PromptRequest,
        ctx: RequestCtx,
    ) -> Result<Value, RpcError> {
        let id = p.session_id.0.to_string();
        let engine = self.engine.clone();
        let live = match engine.session_in_memory(&id) {
            Some(live) => live,
            None => {
                let (engine, id) = (engine.clone(), id.clone());
                tokio::task::spawn_blocking(move || engine.session(&id))
                    .await
                    .map_err(|e| RpcError::internal(e.to_string()))?
                    .map_err(acp_error)?
            }
        };
        // The MCP servers may still be starting: the host classifies calls by the list the
        // turn will offer, so it is fixed first (the turn's own wait is then a no-op).
        live.settle_mcp(&ctx.cancel).await;
        let mut host = AcpHost::new(
            ctx.client.clone(),
            live.context_window(),
            (*live.tools()).clone(),
            live.workspace().root.clone(),
            self.caps(),
            id.clone(),
        );
        host.models = Some((live.model_spec(), self.engine.known_models()));
        let host = Arc::new(host);
        let text = convert::prompt_text(&p.prompt);
        if let Some(cmd) = slash::parse(&text) {
            let host: Arc<dyn TurnHost> = host;
            slash::run(&engine, &id, cmd, host, ctx.cancel.clone()).await;
            return ok::<m::Prompt>(acp::PromptResponse::new(acp::StopReason::EndTurn));
        }
        let blocks = convert::prompt_blocks(p.prompt);
        if !live.has_user_words()
            && let Some(title) = garuda_core::session::store::title_of_blocks(&blocks)
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
        input.extend(blocks);
        lock(&self.prompts).insert(ctx.id.clone(), ctx.cancel.clone());
        let out = engine.run_turn(&id, input, host, ctx.cancel.clone()).await;
        lock(&self.prompts).remove(&ctx.id);
        let out = out.map_err(acp_error)?;
        match convert::stop_reason(out.stop_reason) {
            Some(r) => ok::<m::Prompt>(acp::PromptResponse::new(r)),
            None => Err(RpcError::new(
                garuda_protocol::codes::PROVIDER_ERROR,
                out.error.unwrap_or_else(|| "the turn failed".into()),
            )),
        }
    }

    /// The watched config file changed: the log always hears of it, every open session as a
    /// `notice` when the client shows them.
    fn config_changed(&self, problems: Vec<ConfigProblem>) {
        if problems.is_empty() {
            tracing::info!("config file reloaded: no problems; new sessions use it");
        }
        for p in &problems {
            tracing::warn!("config: {p}");
        }
        let Some(client) = self.client.get().filter(|_| self.caps().notices) else {
            return;
        };
        let ids: Vec<String> = lock(&self.sessions).keys().cloned().collect();
        for id in ids {
            if problems.is_empty() {
                let n = convert::notice(
                    acp::NoticeSeverity::Info,
                    "Garuda config reloaded: no problems",
                    Some("New sessions use it; this one keeps its settings.".into()),
                );
                send_update(client, &id, n);
            }
            for p in &problems {
                let severity = match p.severity {
                    Severity::Warning => acp::NoticeSeverity::Warning,
                    Severity::Error => acp::NoticeSeverity::Error,
                };
                send_update(client, &id, convert::notice(severity, &p.to_string(), None));
            }
        }
    }

    fn notification(&self, notice: AcpNotice) {
        match notice {
            AcpNotice::Cancel(p) => {
                if let Some(live) = self.engine.session_in_memory(&p.session_id.0) {
                    live.cancel();
                }
            }
            AcpNotice::CancelRequest(p) => {
                let id = serde_json::to_value(&p.request_id)
                    .ok()
                    .and_then(|v| serde_json::from_value::<Id>(v).ok());
                match id.and_then(|id| lock(&self.prompts).get(&id).cloned()) {
                    Some(t) => t.cancel(),
                    None => tracing::debug!("$/cancel_request for a request not in flight"),
                }
            }
        }
    }
}

/// The session's MCP servers start in the background: once they are up or failed, each
/// failure is logged and, for clients with `session.notices`, a `warning` notice (after the
/// answer that named the session, as the `then` of that answer calls this).
fn mcp_failures_later(live: &LiveSession, client: &Client, id: &str, notices: bool) {
    let Some(hub) = &live.setup().mcp else { return };
    let (client, id) = (client.clone(), id.to_string());
    hub.when_started(move |failures| {
        for w in failures {
            tracing::warn!("session {id}: {w}");
            if notices {
                let n = convert::notice(acp::NoticeSeverity::Warning, &w, None);
                send_update(&client, &id, n);
            }
        }
    });
}

/// A `session_info_update` carrying a title.
fn session_info(title: String) -> acp::SessionUpdate {
    acp::SessionUpdate::SessionInfoUpdate(acp::SessionInfoUpdate::new().title(title))
}

/// The title the store gives a session (an excerpt of its first user text).
/// Opens `dirs` (ACP's `additionalDirectories`) as extra workspaces; the roots of those that
/// opened, to be named to the model in the next prompt.
fn open_extra(engine: &Engine, dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut extra = Vec::new();
    for dir in dirs {
        match engine.open_workspace(dir) {
            Ok(w) => extra.push(w.root.path().to_path_buf()),
            Err(e) => tracing::warn!("additional directory {} not opened: {e}", dir.display()),
        }
    }
    extra
}

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
            // ACP: a `cwd` that does not exist has no sessions; the list MUST be empty, not
            // an error.
            if !cwd.is_dir() {
                return ok::<m::ListSessions>(acp::ListSessionsResponse::new(Vec::new()));
            }
            let ws = engine.open_workspace(cwd).map_err(ws_error)?;
            engine.list_sessions(&ws.id).map_err(engine_error)?
        }
        None => engine
            .store()
            .list()
            .map_err(|e| engine_error(EngineError::Store(e)))?,
    };
    // A session the user never wrote in (its transcript holds only what Garuda set up) is
    // nothing to resume; the rest by last activity.
    list.retain(|s| s.title.is_some());
    garuda_core::session::store::sort_newest_first(&mut list);
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
            // An agent's sub-session says whose it is, so a history list can hide or nest it.
            let meta = s.parent.as_ref().map(|p| {
                let mut meta = acp::Meta::new();
                meta.insert(
                    "garuda".into(),
                    serde_json::json!({
                        "parentSessionId": p.session_id,
                        // Shown in history lists: format characters escaped.
                        "agent": garuda_core::text::escape_format_chars(&p.agent),
                    }),
                );
                meta
            });
            acp::SessionInfo::new(s.id.clone(), PathBuf::from(&s.workspace_root))
                .title(s.title.clone())
                .updated_at(iso8601(s.updated))
                .meta(meta)
        })
        .collect();
    let next = (end < list.len()).then(|| end.to_string());
    ok::<m::ListSessions>(acp::ListSessionsResponse::new(sessions).next_cursor(next))
}

impl Handler for AcpFront {
    fn request(&self, method: &str, params: Value, ctx: RequestCtx) -> Dispatch {
        let front = &self.front;
        let _ = front.client.set(ctx.client.clone());
        if method != m::Initialize::NAME && !front.initialized.load(Ordering::Acquire) {
            return Dispatch::Reply(Err(RpcError::not_initialized(format!(
                "{method} before initialize; send initialize first"
            ))));
        }
        let params = if method == m::Initialize::NAME {
            methods::tolerant_version(params)
        } else {
            params
        };
        if let Err(e) = methods::check_config_value(method, &params) {
            return Dispatch::Reply(Err(e));
        }
        let req = match AcpRequest::parse(method, params) {
            Ok(Some(r)) => r,
            Ok(None) => {
                let message = if AcpNotice::names().contains(&method) {
                    format!(
                        "{method} is a notification: send it without an `id` (nothing answers it)"
                    )
                } else {
                    format!("unknown method {method}")
                };
                return Dispatch::Reply(Err(RpcError::new(codes::METHOD_NOT_FOUND, message)));
            }
            Err(e) => return Dispatch::Reply(Err(e)),
        };
        match req {
            AcpRequest::Inline(r) => {
                // The first `initialize` starts watching the config file (inline requests
                // run one at a time, on the read loop).
                let first = matches!(r, InlineRequest::Initialize(_))
                    && !front.initialized.load(Ordering::Acquire);
                let answer = inline(&front.inline_view(), r);
                if first && answer.is_ok() {
                    front.watch_config();
                }
                Dispatch::Reply(answer)
            }
            AcpRequest::Blocking(r) => {
                let lane = r.lane();
                let front = front.clone();
                let client = ctx.client;
                let work: BoxFuture<'static, Answer> = Box::pin(async move {
                    tokio::task::spawn_blocking(move || front.blocking(r, &client))
                        .await
                        .unwrap_or_else(|e| (Err(RpcError::internal(e.to_string())), None))
                });
                match lane {
                    Lane::Long => Dispatch::LongThen(work),
                    // A read-loop request never gets here.
                    Lane::Quick | Lane::Loop => Dispatch::SpawnThen(work),
                }
            }
            AcpRequest::Spawned(r) => {
                let lane = r.lane();
                let work = front.spawned(r, ctx);
                match lane {
                    Lane::Long => Dispatch::Long(work),
                    Lane::Quick | Lane::Loop => Dispatch::Spawn(work),
                }
            }
        }
    }

    fn notification(&self, method: &str, params: Value, _client: &Client) -> Flow {
        match AcpNotice::parse(method, params) {
            Ok(Some(n)) => self.front.notification(n),
            Ok(None) => tracing::debug!("notification {method} ignored"),
            Err(e) => tracing::warn!("{method}: {}", e.message),
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

/// What an inline request may touch: the engine's memory-only view and the front's own maps
/// in memory. The read-loop handlers get only this, so none can reach the disk.
struct InlineView<'a> {
    engine: garuda_core::engine::Inline<'a>,
    caps: &'a Mutex<ClientCaps>,
    sessions: &'a Mutex<HashMap<String, AcpSession>>,
    initialized: &'a AtomicBool,
}

/// A request answered on the read loop, from memory only.
fn inline(v: &InlineView<'_>, req: InlineRequest) -> Result<Value, RpcError> {
    match req {
        InlineRequest::Initialize(p) => initialize(v, p),
        // `initialize` offers no auth methods, so no method id can be valid.
        InlineRequest::Authenticate(_) => Err(RpcError::invalid_params(
            "authenticate: this agent offers no authentication methods (authMethods is empty)",
        )),
        InlineRequest::Logout(_) => ok::<m::Logout>(acp::LogoutResponse::new()),
        InlineRequest::CloseSession(p) => {
            let id = p.session_id.0.to_string();
            let known = lock(v.sessions).remove(&id).is_some();
            let freed = v.engine.close_session(&id);
            if !known && !freed {
                return Err(not_open(&id));
            }
            ok::<m::CloseSession>(acp::CloseSessionResponse::new())
        }
        InlineRequest::SetMode(p) => {
            let policy: Policy = p
                .mode_id
                .0
                .parse()
                .map_err(|e| RpcError::invalid_params(format!("{e}")))?;
            let id = p.session_id.0.to_string();
            if !v.engine.set_policy(&id, policy) {
                return Err(not_open(&id));
            }
            ok::<m::SetMode>(acp::SetSessionModeResponse::new())
        }
    }
}

/// `initialize`: the client's capabilities are kept and the agent's answered.
fn initialize(v: &InlineView<'_>, p: acp::InitializeRequest) -> Result<Value, RpcError> {
    *lock(v.caps) = ClientCaps::of(&p.client_capabilities);
    let session = acp::SessionCapabilities::new()
        .list(acp::SessionListCapabilities::new())
        .resume(acp::SessionResumeCapabilities::new())
        .close(acp::SessionCloseCapabilities::new())
        .delete(acp::SessionDeleteCapabilities::new())
        // Unstable in ACP: only clients built with the unstable schema read it.
        .fork(acp::SessionForkCapabilities::new())
        .additional_directories(acp::SessionAdditionalDirectoriesCapabilities::new());
    let caps = acp::AgentCapabilities::new()
        .load_session(true)
        .prompt_capabilities(
            acp::PromptCapabilities::new()
                .image(true)
                .audio(false)
                .embedded_context(true),
        )
        .session_capabilities(session)
        // Streamable HTTP servers start like stdio ones; the older SSE transport does not.
        .mcp_capabilities(acp::McpCapabilities::new().http(true).sse(false))
        .auth(acp::AgentAuthCapabilities::new().logout(acp::LogoutCapabilities::new()));
    v.initialized.store(true, Ordering::Release);
    // ACP has no connection-level notice: the config file's problems ride in `_meta`
    // (and the log); sessions get them as notices when the file changes.
    let problems = v.engine.config_problems();
    let meta = (!problems.is_empty()).then(|| {
        let list: Vec<_> = problems
            .into_iter()
            .map(crate::front::wire::config_problem_out)
            .collect();
        let mut meta = acp::Meta::new();
        meta.insert(
            "garuda".into(),
            serde_json::json!({ "configProblems": list }),
        );
        meta
    });
    // Garuda speaks v1 whatever the client asks for (the latest it knows, as the spec
    // says); a client without v1 disconnects.
    ok::<m::Initialize>(
        acp::InitializeResponse::new(agent_client_protocol_schema::ProtocolVersion::V1)
            .agent_capabilities(caps)
            .agent_info(acp::Implementation::new(
                "garuda",
                env!("CARGO_PKG_VERSION"),
            ))
            .meta(meta),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_titles() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso8601(1_764_547_200_000), "2025-12-01T00:00:00Z");
        assert_eq!(iso8601(951_782_400_000 + 3_661_000), "2000-02-29T01:01:01Z");
        let title_of = |t: &str| {
            garuda_core::session::store::title_of_blocks(&[garuda_core::message::Block::text(t)])
        };
        assert_eq!(
            title_of("\n  fix the bug  \nplease"),
            Some("fix the bug please".into())
        );
        assert_eq!(title_of("  \n"), None);
        assert_eq!(title_of(&"x".repeat(90)).unwrap().chars().count(), 81);
    }
}
