//! The ACP front: `garuda acp`, an Agent Client Protocol v1 agent over stdio.
//!
//! Editors that speak ACP (Zed, JetBrains, CodeCompanion.nvim, avante.nvim, agent-shell) start
//! `garuda acp` and exchange newline-delimited JSON-RPC; the transport is [`crate::rpc`] (it
//! detects the framing). Each ACP method maps onto the same [`Engine`] calls as the native front:
//!
//! | ACP | Garuda |
//! | --- | --- |
//! | `initialize` | protocol version 1, `loadSession`, image and embedded-context prompts |
//! | `session/new` | opens `cwd` as a workspace, `Engine::new_session` |
//! | `session/load` | `Engine::session` + `Engine::messages`, replayed as `session/update` |
//! | `session/prompt` | `Engine::run_turn`; turn events become `session/update` |
//! | `session/cancel`, `$/cancel_request` | cancel the running turn / request |
//! | `session/request_permission` (agent → client) | approvals under the `ask` policy |
//!
//! Types are hand-written ([`types`]) instead of taken from the official
//! `agent-client-protocol-schema` crate (1.20). That crate builds with our toolchain and adds
//! only ~15 small crates, but it enables serde_json's `preserve_order` feature, and Cargo
//! unifies features across the build: every `serde_json::Value` in Garuda would become
//! insertion-ordered (IndexMap-backed). That changes the key order of all native-protocol
//! answers, the generated `protocol/schema.json` and snapshots, and grows `Value` enough to
//! trip clippy's `result_large_err` in `rpc`. The subset ACP needs here is ~300 lines of
//! serde types, checked against the spec by the Node test with the official TypeScript SDK.
//!
//! Limits:
//! - The model is `$GARUDA_MODEL` when set, else the configured `model` in
//!   `$XDG_CONFIG_HOME/garuda/config.toml` (ACP has no standard way to pick one).
//! - `additionalDirectories` are opened as extra Garuda workspaces (their instruction files
//!   are read) and named to the model in the first prompt, but the built-in tools stay
//!   confined to `cwd`: the model can be told about them, not read them.
//! - `mcpServers` (stdio and http; sse is refused) are started with the session beside the
//!   user's configured servers, as Garuda's own MCP servers are (`garuda_core::mcp`).
//! - Files are written by Garuda itself; `fs/*` and `terminal/*` client capabilities are unused.
//! - `/compact`, `/context` and `/snip` are advertised; they call the engine's compaction and
//!   context inspection when the build has them (see [`slash`]).

mod convert;
mod host;
mod slash;
pub mod types;

pub use host::{AcpHost, send_update};

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::native::engine_error;
use super::parse_params;
use crate::rpc::{Client, Dispatch, Flow, Handler, Id, RequestCtx, RpcError, codes};
use garuda_core::engine::{Engine, NewSession};
use garuda_core::message::Block;
use garuda_core::turn::TurnHost;
use types::{CancelNotification, LoadSessionRequest, NewSessionRequest, PromptRequest, StopReason};

/// The environment variable that picks the model of ACP sessions.
pub const MODEL_ENV: &str = "GARUDA_MODEL";

/// What the front remembers about a session beyond the engine.
#[derive(Debug, Default, Clone)]
struct AcpSession {
    /// `additionalDirectories` still to be named to the model in the next prompt.
    extra_dirs: Vec<PathBuf>,
}

/// The ACP handler.
pub struct AcpFront {
    engine: Arc<Engine>,
    client: Arc<OnceLock<Client>>,
    sessions: Mutex<HashMap<String, AcpSession>>,
    /// Running `session/prompt` requests by id, for `$/cancel_request`.
    prompts: Arc<Mutex<HashMap<Id, CancellationToken>>>,
    /// The model of new sessions (`$GARUDA_MODEL`); `None`: the configured one.
    model: Option<String>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The maps stay consistent even if a holder panicked.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn to_value<T: serde::Serialize>(v: T) -> Result<Value, RpcError> {
    serde_json::to_value(v).map_err(|e| RpcError::internal(e.to_string()))
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
            client: Arc::new(OnceLock::new()),
            sessions: Mutex::new(HashMap::new()),
            prompts: Arc::new(Mutex::new(HashMap::new())),
            model,
        })
    }

    /// The engine behind this front.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    fn initialize(&self) -> Result<Value, RpcError> {
        Ok(json!({
            "protocolVersion": types::PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": true,
                "promptCapabilities": {"image": true, "audio": false, "embeddedContext": true},
            },
            "authMethods": [],
            "agentInfo": {"name": "garuda", "version": env!("CARGO_PKG_VERSION")},
        }))
    }

    fn session_new(&self, params: Value, client: Client) -> Dispatch {
        let p: NewSessionRequest = match parse_params(params) {
            Ok(p) => p,
            Err(e) => return Dispatch::Reply(Err(e)),
        };
        if !p.cwd.is_absolute() {
            return Dispatch::Reply(Err(RpcError::invalid_params(format!(
                "cwd {} must be an absolute path",
                p.cwd.display()
            ))));
        }
        let mcp_servers = match garuda_core::mcp::from_acp(&Value::Array(p.mcp_servers.clone())) {
            Ok(s) => s,
            Err(e) => return Dispatch::Reply(Err(RpcError::invalid_params(e.to_string()))),
        };
        let engine = self.engine.clone();
        let model = self.model.clone();
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
                        model,
                        mcp_servers,
                        ..Default::default()
                    },
                )
                .map_err(engine_error)?;
            for w in warnings {
                tracing::warn!("{w}");
            }
            Ok::<_, RpcError>((live.id().to_string(), extra))
        })();
        let (id, extra) = match result {
            Ok(r) => r,
            Err(e) => return Dispatch::Reply(Err(e)),
        };
        lock(&self.sessions).insert(id.clone(), AcpSession { extra_dirs: extra });
        advertise_commands_later(client, id.clone());
        Dispatch::Reply(Ok(json!({ "sessionId": id })))
    }

    fn session_load(&self, params: Value, client: Client) -> Dispatch {
        let p: LoadSessionRequest = match parse_params(params) {
            Ok(p) => p,
            Err(e) => return Dispatch::Reply(Err(e)),
        };
        let mcp_servers = match garuda_core::mcp::from_acp(&Value::Array(p.mcp_servers.clone())) {
            Ok(s) => s,
            Err(e) => return Dispatch::Reply(Err(RpcError::invalid_params(e.to_string()))),
        };
        let engine = self.engine.clone();
        let id = p.session_id.clone();
        lock(&self.sessions).entry(id.clone()).or_default();
        Dispatch::Spawn(Box::pin(async move {
            let replay = {
                let id = id.clone();
                tokio::task::spawn_blocking(move || {
                    let live = engine.load_session(&id, mcp_servers)?;
                    let root = live.workspace().root.path().to_path_buf();
                    let tools = live.setup().tools.clone();
                    let mut updates = Vec::new();
                    let mut cursor = None;
                    loop {
                        let page = engine.messages(&id, cursor, Some(500))?;
                        for m in &page.messages {
                            updates.extend(convert::history_updates(
                                m.message.role,
                                &m.message.content,
                                &tools,
                            ));
                        }
                        match page.next_cursor {
                            Some(c) if !page.messages.is_empty() => cursor = Some(c),
                            _ => break,
                        }
                    }
                    Ok::<_, garuda_core::engine::EngineError>((root, updates))
                })
                .await
                .map_err(|e| RpcError::internal(e.to_string()))?
                .map_err(engine_error)?
            };
            let (root, updates) = replay;
            if std::fs::canonicalize(&p.cwd).ok().as_deref() != Some(root.as_path()) {
                tracing::info!(
                    "session/load: cwd {} differs from the session's workspace {}; keeping the session's",
                    p.cwd.display(),
                    root.display()
                );
            }
            for u in updates {
                send_update(&client, &id, u);
            }
            send_update(&client, &id, convert::commands());
            // The spec's LoadSessionResponse is an object (modes, models): `{}` rather than null,
            // which the TypeScript SDK would reject.
            Ok(json!({}))
        }))
    }

    fn session_prompt(&self, params: Value, ctx: RequestCtx) -> Dispatch {
        let p: PromptRequest = match parse_params(params) {
            Ok(p) => p,
            Err(e) => return Dispatch::Reply(Err(e)),
        };
        let id = p.session_id.clone();
        let engine = self.engine.clone();
        let live = match engine.session(&id) {
            Ok(l) => l,
            Err(e) => return Dispatch::Reply(Err(engine_error(e))),
        };
        let host: Arc<dyn TurnHost> = Arc::new(AcpHost {
            client: ctx.client.clone(),
            context_window: live.context_window(),
            tools: live.setup().tools.clone(),
        });
        let prompt = convert::decode_prompt(p.prompt);
        let text = convert::prompt_text(&prompt);
        if let Some(cmd) = slash::parse(&text) {
            return Dispatch::Spawn(Box::pin(async move {
                slash::run(&engine, &id, cmd, host, ctx.cancel.clone()).await;
                to_value(json!({ "stopReason": StopReason::EndTurn }))
            }));
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
        input.extend(convert::prompt_blocks(prompt));
        let prompts = self.prompts.clone();
        lock(&prompts).insert(ctx.id.clone(), ctx.cancel.clone());
        let req_id = ctx.id.clone();
        Dispatch::Spawn(Box::pin(async move {
            let out = engine.run_turn(&id, input, host, ctx.cancel.clone()).await;
            lock(&prompts).remove(&req_id);
            let out = out.map_err(engine_error)?;
            match convert::stop_reason(out.stop_reason) {
                Some(r) => to_value(json!({ "stopReason": r })),
                None => Err(RpcError::new(
                    garuda_protocol::codes::PROVIDER_ERROR,
                    out.error.unwrap_or_else(|| "the turn failed".into()),
                )),
            }
        }))
    }

    fn cancel_session(&self, params: Value) {
        let Ok(p) = parse_params::<CancelNotification>(params) else {
            tracing::warn!("session/cancel without a valid sessionId");
            return;
        };
        if let Ok(live) = self.engine.session(&p.session_id) {
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

/// Sends `available_commands_update` shortly after `session/new` answers: the client learns the
/// session id from the answer, so an update sent before it would name an unknown session.
fn advertise_commands_later(client: Client, id: String) {
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        send_update(&client, &id, convert::commands());
    });
}

impl Handler for AcpFront {
    fn request(&self, method: &str, params: Value, ctx: RequestCtx) -> Dispatch {
        let _ = self.client.set(ctx.client.clone());
        match method {
            "initialize" => Dispatch::Reply(self.initialize()),
            "authenticate" => Dispatch::Reply(Ok(serde_json::json!({}))),
            "session/new" => self.session_new(params, ctx.client),
            "session/load" => self.session_load(params, ctx.client),
            "session/prompt" => self.session_prompt(params, ctx),
            _ => Dispatch::Reply(Err(RpcError::new(
                codes::METHOD_NOT_FOUND,
                format!("unknown method {method}"),
            ))),
        }
    }

    fn notification(&self, method: &str, params: Value, client: &Client) -> Flow {
        let _ = self.client.set(client.clone());
        match method {
            "session/cancel" => self.cancel_session(params),
            "$/cancel_request" => self.cancel_request(params),
            _ => tracing::debug!("notification {method} ignored"),
        }
        Flow::Continue
    }
}
