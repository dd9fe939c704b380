//! The native front: Garuda's `resource/verb` methods and the LSP lifecycle over JSON-RPC.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{RpcHost, parse_params, uri_to_path};
use crate::engine::{Engine, EngineError, EngineEvent, NewSession};
use crate::fsroot::FsError;
use crate::protocol::{
    self, Ack, AssembleParams, CloseResult, CollapseParams, CompactParams, ForkParams,
    GarudaCapabilities, InitializeResult, ListResult, LoadResult, MessagesParams, NewSessionParams,
    NewSessionResult, OpenParams, ServerInfo, SessionList, SessionRef, SnipParams, TurnParams,
    TurnResult, WorkspaceRef,
};
use crate::rpc::{Client, Dispatch, Flow, Handler, RequestCtx, RpcError, codes};
use crate::turn::TurnHost;
use crate::workspace::WorkspaceError;

const UNINITIALIZED: u8 = 0;
const RUNNING: u8 = 1;
const SHUTTING_DOWN: u8 = 2;

/// What the client told us in `initialize` that later requests need.
#[derive(Debug, Default, Clone)]
pub struct ClientFacts {
    /// The editor's process id; Garuda exits when it dies.
    pub process_id: Option<u32>,
    /// The client can apply edits through `workspace/applyEdit`.
    pub apply_edit: bool,
    /// The client's name, for logs.
    pub name: Option<String>,
}

/// The native protocol handler.
pub struct NativeFront {
    engine: Arc<Engine>,
    state: AtomicU8,
    client: Arc<OnceLock<Client>>,
    facts: OnceLock<ClientFacts>,
    /// Cancelled when the server should stop on its own (the client's process died).
    pub stop: CancellationToken,
}

impl NativeFront {
    /// A front over a fresh engine; engine events become notifications to the client.
    pub fn new(config: crate::config::Config, state_dir: PathBuf) -> Arc<NativeFront> {
        let client: Arc<OnceLock<Client>> = Arc::new(OnceLock::new());
        let sink_client = client.clone();
        let events = Arc::new(move |ev: EngineEvent| {
            if let Some(c) = sink_client.get() {
                match ev {
                    EngineEvent::ContextChanged(cc) => c.notify(
                        "workspace/contextChanged",
                        serde_json::to_value(cc).unwrap_or(Value::Null),
                    ),
                }
            }
        });
        let engine = Arc::new(Engine::new(config, state_dir, events, true));
        Arc::new(NativeFront {
            engine,
            state: AtomicU8::new(UNINITIALIZED),
            client,
            facts: OnceLock::new(),
            stop: CancellationToken::new(),
        })
    }

    /// The engine behind this front.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    fn initialize(&self, params: Value) -> Result<Value, RpcError> {
        if self.state.load(Ordering::SeqCst) != UNINITIALIZED {
            return Err(RpcError::new(
                codes::INVALID_REQUEST,
                "initialize was already called",
            ));
        }
        // LSP requires `capabilities`; scripts often send `{}`, so default it.
        let mut params = if params.is_null() { json!({}) } else { params };
        if let Some(obj) = params.as_object_mut() {
            obj.entry("capabilities").or_insert(json!({}));
        }
        let init: lsp_types::InitializeParams = serde_json::from_value(params)
            .map_err(|e| RpcError::invalid_params(format!("invalid initialize params: {e}")))?;
        let apply_edit = init
            .capabilities
            .workspace
            .as_ref()
            .and_then(|w| w.apply_edit)
            .unwrap_or(false);
        let facts = ClientFacts {
            process_id: init.process_id,
            apply_edit,
            name: init.client_info.as_ref().map(|c| c.name.clone()),
        };
        let mut roots: Vec<String> = Vec::new();
        if let Some(folders) = &init.workspace_folders {
            roots.extend(folders.iter().map(|f| f.uri.as_str().to_string()));
        }
        if roots.is_empty() {
            #[allow(deprecated)]
            if let Some(u) = &init.root_uri {
                roots.push(u.as_str().to_string());
            } else if let Some(p) = &init.root_path {
                roots.push(p.clone());
            }
        }
        let mut workspaces = Vec::new();
        for r in roots {
            match uri_to_path(&r).map(|p| self.engine.open_workspace(&p)) {
                Some(Ok(ws)) => workspaces.push(self.engine.info(&ws)),
                Some(Err(e)) => tracing::warn!("workspace folder {r} not opened: {e}"),
                None => tracing::warn!("workspace folder {r} is not a file URI"),
            }
        }
        if let Some(pid) = facts.process_id {
            watch_parent(pid, self.stop.clone());
        }
        let _ = self.facts.set(facts);
        self.state.store(RUNNING, Ordering::SeqCst);
        let result = InitializeResult {
            capabilities: json!({ "experimental": { "garuda": { "protocolVersion": protocol::PROTOCOL_VERSION } } }),
            server_info: ServerInfo {
                name: "garuda".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
            garuda: GarudaCapabilities {
                protocol_version: protocol::PROTOCOL_VERSION,
                methods: protocol::METHODS.iter().map(|m| m.to_string()).collect(),
                workspaces,
            },
        };
        serde_json::to_value(result).map_err(|e| RpcError::internal(e.to_string()))
    }

    fn workspace_open(&self, params: Value) -> Result<Value, RpcError> {
        let p: OpenParams = parse_params(params)?;
        let path = uri_to_path(&p.root).ok_or_else(|| {
            RpcError::invalid_params(format!("root {} is not a path or file:// URI", p.root))
        })?;
        let ws = self.engine.open_workspace(&path).map_err(ws_error)?;
        to_value(self.engine.info(&ws))
    }

    fn workspace_close(&self, params: Value) -> Result<Value, RpcError> {
        let p: WorkspaceRef = parse_params(params)?;
        to_value(CloseResult {
            closed: self.engine.workspaces.close(&p.workspace_id),
        })
    }

    fn workspace_list(&self) -> Result<Value, RpcError> {
        let workspaces = self
            .engine
            .workspaces
            .list()
            .iter()
            .map(|w| self.engine.info(w))
            .collect();
        to_value(ListResult { workspaces })
    }

    fn folders_changed(&self, params: Value) {
        let event = params.get("event").cloned().unwrap_or(Value::Null);
        let uris = |key: &str| -> Vec<PathBuf> {
            event
                .get(key)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|f| f.get("uri")?.as_str().and_then(uri_to_path))
                        .collect()
                })
                .unwrap_or_default()
        };
        for path in uris("removed") {
            let id = std::fs::canonicalize(&path).map(|c| crate::workspace::workspace_id(&c));
            if let Ok(id) = id {
                self.engine.workspaces.close(&id);
            }
        }
        for path in uris("added") {
            if let Err(e) = self.engine.open_workspace(&path) {
                tracing::warn!("workspace folder {} not opened: {e}", path.display());
            }
        }
    }
}

impl NativeFront {
    /// Runs `f` on the blocking pool (it may read large transcripts) and answers with its result.
    fn blocking<P, R>(&self, params: Value, f: fn(&Engine, P) -> Result<R, EngineError>) -> Dispatch
    where
        P: serde::de::DeserializeOwned + Send + 'static,
        R: serde::Serialize + Send + 'static,
    {
        let engine = self.engine.clone();
        Dispatch::Spawn(Box::pin(async move {
            let p: P = parse_params(params)?;
            let r = tokio::task::spawn_blocking(move || f(&engine, p))
                .await
                .map_err(|e| RpcError::internal(e.to_string()))?;
            to_value(r.map_err(engine_error)?)
        }))
    }

    fn session_new(&self, params: Value) -> Result<Value, RpcError> {
        let p: NewSessionParams = parse_params(params)?;
        let req = NewSession {
            model: p.model,
            policy: p.policy,
            client_tools: p.tools,
            record: None,
        };
        let (live, warnings) = self
            .engine
            .new_session(&p.workspace_id, req)
            .map_err(engine_error)?;
        to_value(NewSessionResult {
            session_id: live.id.clone(),
            model: live.setup.model_spec.clone(),
            context_window: live.setup.model_info.context_window,
            warnings,
        })
    }

    fn session_compact(&self, params: Value, ctx: RequestCtx) -> Dispatch {
        let p: CompactParams = match parse_params(params) {
            Ok(p) => p,
            Err(e) => return Dispatch::Reply(Err(e)),
        };
        let engine = self.engine.clone();
        let host = self.host(&ctx);
        Dispatch::Spawn(Box::pin(async move {
            let r = engine
                .compact(&p.session_id, p.focus, host, ctx.cancel.clone())
                .await
                .map_err(engine_error)?;
            to_value(r)
        }))
    }

    /// The turn host for a request: its client, its editing capability, the approval timeout.
    fn host(&self, ctx: &RequestCtx) -> Arc<dyn TurnHost> {
        Arc::new(RpcHost {
            client: ctx.client.clone(),
            apply_edit: self.facts.get().is_some_and(|f| f.apply_edit),
            approval_timeout: std::time::Duration::from_secs(
                self.engine.config.approval.timeout_secs.max(1),
            ),
        })
    }

    fn turn_run(&self, params: Value, ctx: RequestCtx) -> Dispatch {
        let p: TurnParams = match parse_params(params) {
            Ok(p) => p,
            Err(e) => return Dispatch::Reply(Err(e)),
        };
        let engine = self.engine.clone();
        let host = self.host(&ctx);
        Dispatch::Spawn(Box::pin(async move {
            let out = engine
                .run_turn(&p.session_id, p.input, host, ctx.cancel.clone())
                .await
                .map_err(engine_error)?;
            if let Some(e) = out.error {
                tracing::warn!("turn ended with an error: {e}");
            }
            to_value(TurnResult {
                stop_reason: out.stop_reason,
                usage: out.usage,
                message_ids: out.message_ids,
            })
        }))
    }
}

/// Maps engine errors to protocol errors; provider errors carry their kind in `data`.
pub fn engine_error(e: EngineError) -> RpcError {
    use crate::provider::ProviderError as P;
    use crate::session::StoreError as S;
    use crate::turn::TurnError as T;
    let provider = |p: P| {
        let code = match &p {
            P::Config(_) => codes::CONFIG_ERROR,
            P::Auth { .. } => codes::AUTH_ERROR,
            // Reactive compaction already ran and one retry failed: the context itself overflows.
            P::PromptTooLong(_) => codes::CONTEXT_OVERFLOW,
            _ => codes::PROVIDER_ERROR,
        };
        RpcError {
            code,
            message: p.to_string(),
            data: Some(json!({"kind": p.kind()})),
        }
    };
    let store = |s: S| match s {
        S::NotFound(id) => {
            RpcError::new(codes::SESSION_NOT_FOUND, format!("session {id} not found"))
        }
        S::InvalidId(id) => RpcError::invalid_params(format!("invalid session id {id}")),
        e @ S::MessageNotFound(_) => RpcError::new(codes::NOT_FOUND, e.to_string()),
        e => RpcError::internal(e.to_string()),
    };
    match e {
        EngineError::Workspace(w) => ws_error(w),
        EngineError::SessionNotFound(id) => {
            RpcError::new(codes::SESSION_NOT_FOUND, format!("session {id} not found"))
        }
        EngineError::Store(s) | EngineError::Turn(T::Store(s)) => store(s),
        EngineError::Provider(p) | EngineError::Turn(T::Provider(p)) => provider(p),
        EngineError::Turn(T::Busy(id)) => RpcError::new(
            codes::BUSY,
            format!("session {id} is already running a turn; wait for it or cancel it"),
        ),
        EngineError::Turn(T::Invalid(m)) | EngineError::Invalid(m) => RpcError::invalid_params(m),
        EngineError::Turn(T::Cancelled) => RpcError::request_cancelled(),
        EngineError::Turn(T::TooLarge {
            message_tokens,
            fixed_tokens,
            window_tokens,
        }) => {
            let message = T::TooLarge {
                message_tokens,
                fixed_tokens,
                window_tokens,
            }
            .to_string();
            RpcError {
                code: codes::PROMPT_TOO_LONG,
                message,
                data: Some(json!({
                    "kind": "messageTooLarge",
                    "messageTokens": message_tokens,
                    "fixedTokens": fixed_tokens,
                    "windowTokens": window_tokens,
                })),
            }
        }
        EngineError::Config(m) => RpcError::new(codes::CONFIG_ERROR, m),
    }
}

fn to_value<T: serde::Serialize>(v: T) -> Result<Value, RpcError> {
    serde_json::to_value(v).map_err(|e| RpcError::internal(e.to_string()))
}

/// Maps engine errors to protocol errors.
pub fn ws_error(e: WorkspaceError) -> RpcError {
    match e {
        WorkspaceError::NotOpen(id) => RpcError::new(
            codes::WORKSPACE_NOT_OPEN,
            format!("workspace {id} is not open; call workspace/open first"),
        ),
        WorkspaceError::Config(c) => RpcError::new(codes::CONFIG_ERROR, c.to_string()),
        WorkspaceError::Root(FsError::OutsideRoot(p)) => RpcError::new(
            codes::OUTSIDE_ROOT,
            format!("{}: outside the workspace root", p.display()),
        ),
        WorkspaceError::Root(e @ FsError::NotFound(_)) => {
            RpcError::new(codes::NOT_FOUND, e.to_string())
        }
        WorkspaceError::Root(e) => RpcError::invalid_params(e.to_string()),
    }
}

/// Polls the editor's process; when it is gone, Garuda stops (LSP's processId contract).
fn watch_parent(pid: u32, stop: CancellationToken) {
    let Some(pid) = rustix::process::Pid::from_raw(pid as i32) else {
        return;
    };
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            if let Err(e) = rustix::process::test_kill_process(pid) {
                if e == rustix::io::Errno::SRCH {
                    tracing::info!("client process {} is gone; exiting", pid.as_raw_nonzero());
                    stop.cancel();
                    return;
                }
            }
        }
    });
}

impl Handler for NativeFront {
    fn request(&self, method: &str, params: Value, ctx: RequestCtx) -> Dispatch {
        let _ = self.client.set(ctx.client.clone());
        let state = self.state.load(Ordering::SeqCst);
        if method == "initialize" {
            return Dispatch::Reply(self.initialize(params));
        }
        if state == UNINITIALIZED {
            return Dispatch::Reply(Err(RpcError::new(
                codes::SERVER_NOT_INITIALIZED,
                format!("{method}: the server is not initialized; send initialize first"),
            )));
        }
        if state == SHUTTING_DOWN {
            return Dispatch::Reply(Err(RpcError::new(
                codes::INVALID_REQUEST,
                format!("{method}: the server is shutting down"),
            )));
        }
        match method {
            "shutdown" => {
                self.state.store(SHUTTING_DOWN, Ordering::SeqCst);
                Dispatch::Reply(Ok(Value::Null))
            }
            "workspace/open" => Dispatch::Reply(self.workspace_open(params)),
            "workspace/close" => Dispatch::Reply(self.workspace_close(params)),
            "workspace/list" => Dispatch::Reply(self.workspace_list()),
            "prompt/assemble" => {
                let p: AssembleParams = match parse_params(params) {
                    Ok(p) => p,
                    Err(e) => return Dispatch::Reply(Err(e)),
                };
                // A warm prompt is answered on the read loop; only a cold one reads files.
                match self
                    .engine
                    .assemble_cached(&p.workspace_id, p.options.clone())
                {
                    Ok(Some(res)) => return Dispatch::Reply(to_value(res)),
                    Ok(None) => {}
                    Err(e) => return Dispatch::Reply(Err(ws_error(e))),
                }
                let engine = self.engine.clone();
                Dispatch::Spawn(Box::pin(async move {
                    let res = tokio::task::spawn_blocking(move || {
                        engine.assemble(&p.workspace_id, p.options)
                    })
                    .await
                    .map_err(|e| RpcError::internal(e.to_string()))?;
                    to_value(res.map_err(ws_error)?)
                }))
            }
            "session/new" => Dispatch::Reply(self.session_new(params)),
            "session/list" => Dispatch::Reply((|| {
                let p: WorkspaceRef = parse_params(params)?;
                let sessions = self
                    .engine
                    .list_sessions(&p.workspace_id)
                    .map_err(engine_error)?;
                to_value(SessionList { sessions })
            })()),
            "session/load" => self.blocking(params, |engine, p: SessionRef| {
                let live = engine.session(&p.session_id)?;
                let ws = &live.setup.workspace;
                let count = live
                    .state
                    .try_lock()
                    .map(|s| {
                        s.records
                            .iter()
                            .filter(|r| r.as_message().is_some())
                            .count()
                    })
                    .unwrap_or(0);
                Ok(LoadResult {
                    session_id: live.id.clone(),
                    workspace_id: ws.id.clone(),
                    model: live.setup.model_spec.clone(),
                    message_count: count as u64,
                })
            }),
            "session/messages" => self.blocking(params, |engine, p: MessagesParams| {
                engine.messages(&p.session_id, p.cursor, p.limit)
            }),
            "session/fork" => self.blocking(params, |engine, p: ForkParams| {
                Ok(SessionRef {
                    session_id: engine.fork_session(&p.session_id, p.at_message_id.as_deref())?,
                })
            }),
            "session/delete" => self.blocking(params, |engine, p: SessionRef| {
                engine.delete_session(&p.session_id)?;
                Ok(Ack { ok: true })
            }),
            "turn/run" => self.turn_run(params, ctx),
            "session/compact" => self.session_compact(params, ctx),
            "session/snip" => self.blocking(params, |engine, p: SnipParams| {
                engine.snip(&p.session_id, p.message_ids)
            }),
            "session/collapse" => {
                let engine = self.engine.clone();
                Dispatch::Spawn(Box::pin(async move {
                    let p: CollapseParams = parse_params(params)?;
                    let r = engine
                        .collapse(&p.session_id, &p.from_id, &p.to_id, p.summary, ctx.cancel)
                        .await
                        .map_err(engine_error)?;
                    to_value(r)
                }))
            }
            "session/view" => self.blocking(params, |engine, p: SessionRef| {
                engine.next_request(&p.session_id)
            }),
            "context/inspect" => self.blocking(params, |engine, p: SessionRef| {
                engine.inspect(&p.session_id)
            }),
            "turn/cancel" => Dispatch::Reply((|| {
                let p: SessionRef = parse_params(params)?;
                let live = self.engine.session(&p.session_id).map_err(engine_error)?;
                to_value(Ack { ok: live.cancel() })
            })()),
            _ => Dispatch::Reply(Err(RpcError::new(
                codes::METHOD_NOT_FOUND,
                format!("unknown method {method}"),
            ))),
        }
    }

    fn notification(&self, method: &str, params: Value, client: &Client) -> Flow {
        let _ = self.client.set(client.clone());
        match method {
            "exit" => Flow::Exit(if self.state.load(Ordering::SeqCst) == SHUTTING_DOWN {
                0
            } else {
                1
            }),
            _ if self.state.load(Ordering::SeqCst) == UNINITIALIZED => {
                tracing::debug!("{method} before initialize: ignored");
                Flow::Continue
            }
            "initialized" => Flow::Continue,
            "workspace/didChangeWorkspaceFolders" => {
                self.folders_changed(params);
                Flow::Continue
            }
            _ => {
                tracing::debug!("notification {method} ignored");
                Flow::Continue
            }
        }
    }
}
