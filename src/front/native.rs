//! The native front: Garuda's `resource/verb` methods and the LSP lifecycle over JSON-RPC.
//!
//! Requests are decoded through the protocol's method table (`garuda_protocol::methods`),
//! which also says where each runs: the inline ones see only [`Inline`], a view of the
//! engine's in-memory state, so they cannot stall the read loop on disk; the blocking ones
//! run on the blocking pool; the spawned ones (model calls, approvals) as tasks of their own.
//! The transport runs quick and long work under separate limits; each row of the table says
//! its lane ([`Lane`]), and the front only resolves a row that may start MCP servers against
//! the config and the live sessions.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::errors::{engine_error, ws_error};
use super::wire as cv;
use super::{RpcHost, uri_to_path};
use crate::rpc::{Client, Dispatch, Flow, Handler, RequestCtx, RpcError, codes as rpc_codes};
use garuda_core::engine::{Engine, EngineEvent, Inline, NewSession, PromptOverrides};
use garuda_core::turn::TurnHost;
use garuda_protocol::methods::{
    self as m, BlockingRequest, CachedRequest, ClientMethod, InlineRequest, Lane, Method, Notice,
    Null, Request, SpawnedRequest,
};
use garuda_protocol::{self as protocol, codes};

const UNINITIALIZED: u8 = 0;
const INITIALIZING: u8 = 1;
const RUNNING: u8 = 2;
const SHUTTING_DOWN: u8 = 3;

/// What the client told us in `initialize` that later requests need.
#[derive(Debug, Default, Clone)]
pub struct ClientFacts {
    /// The editor's process id; Garuda exits when it dies.
    pub process_id: Option<u32>,
    /// The client can apply edits through `workspace/applyEdit`.
    pub apply_edit: bool,
    /// The client answers `mcp/elicit` (`capabilities.experimental.garuda.elicitation`).
    pub elicitation: bool,
    /// The client shows agents' streams (`capabilities.experimental.garuda.agentEvents`).
    pub agent_events: bool,
    /// The client answers `code/findSymbol` and `code/findReferences` from its language
    /// servers (`capabilities.experimental.garuda.codeSymbols`).
    pub code_symbols: bool,
    /// The client's name, for logs.
    pub name: Option<String>,
}

/// The native protocol handler.
pub struct NativeFront {
    engine: Arc<Engine>,
    state: Arc<AtomicU8>,
    client: Arc<OnceLock<Client>>,
    facts: Arc<OnceLock<ClientFacts>>,
    /// Cancelled when the server should stop on its own (the client's process died).
    pub stop: CancellationToken,
    /// The user's config file, watched once the client has sent `initialize`.
    config_path: Option<PathBuf>,
    /// Folder changes waiting for the task that applies them (made on first use).
    folder_changes: OnceLock<tokio::sync::mpsc::UnboundedSender<Value>>,
}

/// A method's result as the wire value, typed by the method table.
fn ok<M: Method>(r: M::Result) -> Result<Value, RpcError> {
    serde_json::to_value(r).map_err(|e| RpcError::internal(e.to_string()))
}

/// A request's answer computed off the read loop.
type Work = BoxFuture<'static, Result<Value, RpcError>>;

/// Runs `work` off the read loop in `lane`, resolved already ([`NativeFront::resolve`]).
fn off_loop(lane: Lane, work: Work) -> Dispatch {
    match lane {
        Lane::Long => Dispatch::Long(work),
        Lane::Ordered => Dispatch::Ordered(work),
        // A resolved lane is never StartsMcp, and a read-loop request never gets here.
        Lane::Quick | Lane::StartsMcp | Lane::Loop => Dispatch::Spawn(work),
    }
}

impl NativeFront {
    /// A front over a fresh engine; engine events become notifications to the client.
    pub fn new(config: garuda_core::config::Config, state_dir: PathBuf) -> Arc<NativeFront> {
        let checked = garuda_core::config::Checked {
            config: Some(config),
            problems: Vec::new(),
        };
        Self::checked(checked, state_dir, None)
    }

    /// A front over a checked config file (its problems reported at `initialize`, its errors
    /// in every request that needs the config); `config_path` is watched from `initialize` on.
    pub fn checked(
        checked: garuda_core::config::Checked,
        state_dir: PathBuf,
        config_path: Option<PathBuf>,
    ) -> Arc<NativeFront> {
        let client: Arc<OnceLock<Client>> = Arc::new(OnceLock::new());
        let sink_client = client.clone();
        let events = Arc::new(move |ev: EngineEvent| {
            if let Some(c) = sink_client.get() {
                match ev {
                    EngineEvent::ContextChanged(cc) => c.notify(
                        m::client::ContextChanged::NAME,
                        serde_json::to_value(cv::context_changed_out(cc)).unwrap_or(Value::Null),
                    ),
                    EngineEvent::ConfigChanged(problems) => show_config(c, problems, true),
                }
            }
        });
        let engine = Arc::new(Engine::checked(checked, state_dir, events, true));
        Arc::new(NativeFront {
            config_path,
            engine,
            state: Arc::new(AtomicU8::new(UNINITIALIZED)),
            client,
            facts: Arc::new(OnceLock::new()),
            stop: CancellationToken::new(),
            folder_changes: OnceLock::new(),
        })
    }

    /// The engine behind this front.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The turn host for a request: its client, its editing capability, the approval timeout.
    fn host(&self, ctx: &RequestCtx) -> Arc<dyn TurnHost> {
        Arc::new(RpcHost {
            client: ctx.client.clone(),
            apply_edit: self.facts.get().is_some_and(|f| f.apply_edit),
            elicitation: self.facts.get().is_some_and(|f| f.elicitation),
            agent_events: self.facts.get().is_some_and(|f| f.agent_events),
            code_symbols: self.facts.get().is_some_and(|f| f.code_symbols),
            approval_timeout: std::time::Duration::from_secs(
                self.engine.config().approval.timeout_secs.max(1),
            ),
        })
    }
}

/// Requests answered on the read loop, from memory only: a free function given the engine's
/// memory-only view and the connection's state, so it cannot reach the disk by construction.
fn inline(view: &Inline<'_>, state: &AtomicU8, req: InlineRequest) -> Result<Value, RpcError> {
    match req {
        InlineRequest::Shutdown(_) => {
            state.store(SHUTTING_DOWN, Ordering::SeqCst);
            ok::<m::Shutdown>(Null::default())
        }
        InlineRequest::CloseWorkspace(p) => ok::<m::CloseWorkspace>(protocol::CloseResult {
            closed: view.close_workspace(&p.workspace_id),
        }),
        InlineRequest::ListWorkspaces(_) => ok::<m::ListWorkspaces>(protocol::ListResult {
            workspaces: view
                .workspaces()
                .into_iter()
                .map(cv::workspace_out)
                .collect(),
        }),
        // Only a live session can be running anything: nothing is loaded from disk.
        InlineRequest::CancelTurn(p) => ok::<m::CancelTurn>(protocol::Ack {
            ok: view.cancel(&p.session_id),
        }),
        // Status is in memory; a session on disk has no servers running.
        InlineRequest::McpServers(p) => match view.mcp_servers(&p.session_id) {
            Some(list) => ok::<m::McpServers>(protocol::McpServersResult {
                servers: list.into_iter().map(cv::mcp_server_out).collect(),
            }),
            None => Err(RpcError::new(
                codes::SESSION_NOT_FOUND,
                format!(
                    "session {} is not loaded; session/load it first",
                    p.session_id
                ),
            )),
        },
    }
}

impl NativeFront {
    /// Requests answered from memory when the answer is there, else on the blocking pool.
    fn cached(&self, req: CachedRequest) -> Dispatch {
        let lane = self.resolve(req.lane());
        match req {
            CachedRequest::AssemblePrompt(p) => {
                let overrides = prompt_overrides(p.options);
                match self
                    .engine
                    .inline()
                    .assemble_cached(&p.workspace_id, overrides.clone())
                {
                    Ok(Some(a)) => Dispatch::Reply(ok::<m::AssemblePrompt>(cv::assemble_out(&a))),
                    Err(e) => Dispatch::Reply(Err(ws_error(e))),
                    Ok(None) => off_loop(
                        lane,
                        self.on_pool(move |engine| {
                            let a = engine
                                .assemble(&p.workspace_id, overrides)
                                .map_err(ws_error)?;
                            ok::<m::AssemblePrompt>(cv::assemble_out(&a))
                        }),
                    ),
                }
            }
        }
    }

    /// The lane a request runs in: its row's, with a [`Lane::StartsMcp`] row long only when it
    /// would start the config's MCP servers (the config names any, and the request makes a
    /// session or names one that is not live), else quick.
    fn resolve(&self, (lane, session): (Lane, Option<&str>)) -> Lane {
        if lane != Lane::StartsMcp {
            return lane;
        }
        let starts = !self.engine.config().mcp_servers.is_empty()
            && session.is_none_or(|id| self.engine.inline().mcp_servers(id).is_none());
        if starts { Lane::Long } else { Lane::Quick }
    }

    /// Runs `f` on the blocking pool and answers with its result.
    fn on_pool(&self, f: impl FnOnce(&Engine) -> Result<Value, RpcError> + Send + 'static) -> Work {
        let engine = self.engine.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || f(&engine))
                .await
                .map_err(|e| RpcError::internal(e.to_string()))?
        })
    }

    /// Requests that may read or write files, on the blocking pool.
    fn blocking(
        engine: &Engine,
        facts: &FrontFacts,
        req: BlockingRequest,
    ) -> Result<Value, RpcError> {
        let err = engine_error;
        match req {
            BlockingRequest::Initialize(p) => facts.initialize(engine, p),
            BlockingRequest::OpenWorkspace(p) => {
                let path = uri_to_path(&p.root).ok_or_else(|| {
                    RpcError::invalid_params(format!(
                        "root {} is not a path or file:// URI",
                        p.root
                    ))
                })?;
                let ws = engine.open_workspace(&path).map_err(ws_error)?;
                ok::<m::OpenWorkspace>(cv::workspace_out(engine.info(&ws)))
            }
            BlockingRequest::NewSession(p) => {
                let read_only_tools = p
                    .tools
                    .iter()
                    .filter(|t| t.read_only)
                    .map(|t| t.name.clone())
                    .collect();
                let req = NewSession {
                    model: p.model,
                    policy: p.policy.map(cv::policy_in),
                    client_tools: p.tools.into_iter().map(cv::tool_spec_in).collect(),
                    read_only_tools,
                    record: None,
                    origin: garuda_core::session::SessionOrigin::Serve,
                    mcp_servers: Vec::new(),
                };
                let (session, mut warnings) =
                    engine.new_session(&p.workspace_id, req).map_err(err)?;
                // On a blocking thread: the local server's window is asked for here, once.
                warnings.extend(
                    tokio::runtime::Handle::current().block_on(engine.window_warning(&session)),
                );
                // The servers start in the background: their failures follow the answer.
                show_mcp_failures(&session, facts.client.get());
                ok::<m::NewSession>(protocol::NewSessionResult {
                    session_id: session.id().to_string(),
                    model: session.model_spec(),
                    context_window: session.planned_window(),
                    warnings,
                })
            }
            BlockingRequest::ListSessions(p) => ok::<m::ListSessions>(protocol::SessionList {
                sessions: engine
                    .list_sessions(&p.workspace_id)
                    .map_err(err)?
                    .into_iter()
                    .map(cv::session_info_out)
                    .collect(),
            }),
            BlockingRequest::LoadSession(p) => {
                let s = engine.session(&p.session_id).map_err(err)?;
                show_mcp_failures(&s, facts.client.get());
                ok::<m::LoadSession>(protocol::LoadResult {
                    session_id: s.id().to_string(),
                    workspace_id: s.workspace().id.clone(),
                    model: s.model_spec(),
                    message_count: s.message_count(),
                })
            }
            BlockingRequest::ReadMessages(p) => ok::<m::ReadMessages>(cv::history_page_out(
                engine
                    .messages(&p.session_id, p.cursor, p.limit)
                    .map_err(err)?,
            )),
            BlockingRequest::ForkSession(p) => ok::<m::ForkSession>(protocol::SessionRef {
                session_id: engine
                    .fork_session(&p.session_id, p.at_message_id.as_deref())
                    .map_err(err)?,
            }),
            BlockingRequest::DeleteSession(p) => {
                engine.delete_session(&p.session_id).map_err(err)?;
                ok::<m::DeleteSession>(protocol::Ack { ok: true })
            }
            BlockingRequest::Configure(p) => {
                let mut warnings = Vec::new();
                if let Some(model) = &p.model {
                    warnings = engine.set_model(&p.session_id, model).map_err(err)?;
                }
                if let Some(policy) = p.policy {
                    engine
                        .set_policy(&p.session_id, cv::policy_in(policy))
                        .map_err(err)?;
                }
                let s = engine.session(&p.session_id).map_err(err)?;
                ok::<m::Configure>(protocol::ConfigureResult {
                    model: s.model_spec(),
                    context_window: s.context_window(),
                    policy: cv::policy_out(s.policy()),
                    warnings,
                })
            }
            BlockingRequest::RevokePermission(p) => {
                let (revoked, allowed_always) = engine
                    .revoke_permission(&p.session_id, p.tool_name.as_deref())
                    .map_err(err)?;
                ok::<m::RevokePermission>(protocol::RevokePermissionResult {
                    revoked,
                    allowed_always,
                })
            }
            BlockingRequest::Snip(p) => ok::<m::Snip>(cv::snip_out(
                engine.snip(&p.session_id, p.message_ids).map_err(err)?,
            )),
            BlockingRequest::Memory(p) => ok::<m::Memory>(protocol::SessionMemoryResult {
                memory: engine
                    .session_memory(&p.session_id, p.text)
                    .map_err(err)?
                    .as_ref()
                    .map(cv::memory_out),
            }),
            BlockingRequest::ViewRequest(p) => ok::<m::ViewRequest>(cv::view_out(
                engine.next_request(&p.session_id).map_err(err)?,
            )),
            BlockingRequest::InspectContext(p) => ok::<m::InspectContext>(cv::inspect_out(
                engine.inspect(&p.session_id).map_err(err)?,
            )),
        }
    }

    /// Long requests, each a task of its own; `$/cancelRequest` cancels `ctx.cancel`.
    fn spawned(&self, req: SpawnedRequest, ctx: RequestCtx) -> Work {
        let engine = self.engine.clone();
        let host = self.host(&ctx);
        let cancel = ctx.cancel.clone();
        Box::pin(async move {
            match req {
                SpawnedRequest::RunTurn(p) => {
                    let input = p.input.into_iter().map(cv::block_in).collect();
                    let out = engine
                        .run_turn(&p.session_id, input, host, cancel)
                        .await
                        .map_err(engine_error)?;
                    if let Some(e) = out.error {
                        tracing::warn!("turn ended with an error: {e}");
                    }
                    ok::<m::RunTurn>(protocol::TurnResult {
                        stop_reason: cv::stop_out(out.stop_reason),
                        usage: cv::usage_out(out.usage),
                        message_ids: out.message_ids,
                    })
                }
                SpawnedRequest::Compact(p) => ok::<m::Compact>(cv::compact_out(
                    engine
                        .compact(&p.session_id, p.focus, host, cancel)
                        .await
                        .map_err(engine_error)?,
                )),
                SpawnedRequest::Collapse(p) => ok::<m::Collapse>(cv::collapse_out(
                    engine
                        .collapse(&p.session_id, &p.from_id, &p.to_id, p.summary, cancel)
                        .await
                        .map_err(engine_error)?,
                )),
            }
        })
    }
}

/// What `initialize` needs besides the engine: the lifecycle state and the client's facts.
struct FrontFacts {
    state: Arc<AtomicU8>,
    facts: Arc<OnceLock<ClientFacts>>,
    stop: CancellationToken,
    client: Arc<OnceLock<Client>>,
    /// The engine and the config file to watch, for `initialize`.
    watch: Option<(Arc<Engine>, PathBuf)>,
}

/// MCP sign-in pages go to the editor's `window/showDocument`, to open in the browser.
struct ShowDocument(Client);

impl garuda_core::mcp::oauth::SignInDoor for ShowDocument {
    fn open(
        &self,
        request: garuda_core::mcp::oauth::SignInRequest,
    ) -> BoxFuture<'static, Result<(), String>> {
        let client = self.0.clone();
        Box::pin(async move {
            let params = protocol::ShowDocumentParams {
                uri: request.url,
                external: true,
                take_focus: Some(true),
            };
            let params = serde_json::to_value(params).map_err(|e| e.to_string())?;
            let answer = client
                .request(m::client::ShowDocument::NAME, params)
                .await
                .map_err(|e| format!("the editor failed window/showDocument: {}", e.message))?;
            match serde_json::from_value::<protocol::ShowDocumentResult>(answer) {
                Ok(r) if r.success => Ok(()),
                Ok(_) => Err("the editor could not open the sign-in page".to_string()),
                Err(e) => Err(format!(
                    "the editor answered window/showDocument wrongly: {e}"
                )),
            }
        })
    }
}

impl FrontFacts {
    /// LSP `initialize`: records the client's facts and opens its workspace folders.
    fn initialize(&self, engine: &Engine, params: Value) -> Result<Value, RpcError> {
        let answer = self.initialize_inner(engine, params);
        // A failed initialize may be sent again.
        let next = if answer.is_ok() {
            RUNNING
        } else {
            UNINITIALIZED
        };
        self.state.store(next, Ordering::SeqCst);
        answer
    }

    fn initialize_inner(&self, engine: &Engine, params: Value) -> Result<Value, RpcError> {
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
        let garuda_flag = |name: &str| {
            init.capabilities
                .experimental
                .as_ref()
                .and_then(|e| e.pointer(&format!("/garuda/{name}")))
                .and_then(Value::as_bool)
                .unwrap_or(false)
        };
        let facts = ClientFacts {
            process_id: init.process_id,
            apply_edit,
            elicitation: garuda_flag("elicitation"),
            agent_events: garuda_flag("agentEvents"),
            code_symbols: garuda_flag("codeSymbols"),
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
            match uri_to_path(&r).map(|p| engine.open_workspace(&p)) {
                Some(Ok(ws)) => workspaces.push(cv::workspace_out(engine.info(&ws))),
                Some(Err(e)) => tracing::warn!("workspace folder {r} not opened: {e}"),
                None => tracing::warn!("workspace folder {r} is not a file URI"),
            }
        }
        if let Some(pid) = facts.process_id {
            watch_parent(pid, self.stop.clone());
        }
        let show_document = init
            .capabilities
            .window
            .as_ref()
            .and_then(|w| w.show_document.as_ref())
            .is_some_and(|d| d.support);
        if show_document && let Some(client) = self.client.get() {
            engine.set_sign_in_door(Arc::new(ShowDocument(client.clone())));
        }
        if let Some((engine, path)) = &self.watch {
            engine.watch_config(path.clone());
        }
        // LSP lets a server show messages while it answers `initialize`.
        let problems = engine.config_problems();
        if let Some(client) = self.client.get() {
            show_config(client, problems.clone(), false);
        }
        let _ = self.facts.set(facts);
        ok::<m::Initialize>(protocol::InitializeResult {
            capabilities: json!({ "experimental": { "garuda": { "protocolVersion": protocol::PROTOCOL_VERSION } } }),
            server_info: protocol::ServerInfo {
                name: "garuda".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
            garuda: protocol::GarudaCapabilities {
                protocol_version: protocol::PROTOCOL_VERSION,
                methods: protocol::METHODS.iter().map(|m| m.to_string()).collect(),
                workspaces,
                config_problems: problems.into_iter().map(cv::config_problem_out).collect(),
            },
        })
    }
}

fn prompt_overrides(o: Option<protocol::AssembleOptions>) -> PromptOverrides {
    let o = o.unwrap_or_default();
    PromptOverrides {
        model: o.model,
        features: o.features.map(cv::features_in),
        limits: o.limits.map(cv::limits_in),
    }
}

impl NativeFront {
    /// Queues a `workspace/didChangeWorkspaceFolders`: canonicalizing and opening folders reads
    /// the disk, so one task applies the changes on the blocking pool, one at a time in arrival
    /// order, and the read loop goes on.
    fn queue_folder_change(&self, params: Value) {
        let tx = self.folder_changes.get_or_init(|| {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Value>();
            let engine = self.engine.clone();
            tokio::spawn(async move {
                while let Some(params) = rx.recv().await {
                    let engine = engine.clone();
                    let applied =
                        tokio::task::spawn_blocking(move || folders_changed(&engine, params));
                    if let Err(e) = applied.await {
                        tracing::error!("workspace folder change failed: {e}");
                    }
                }
            });
            tx
        });
        if tx.send(params).is_err() {
            tracing::warn!("workspace folder change dropped: the server is stopping");
        }
    }
}

/// Closes the removed folders' workspaces, then opens the added ones (blocking pool).
fn folders_changed(engine: &Engine, params: Value) {
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
        let id = std::fs::canonicalize(&path).map(|c| garuda_core::workspace::workspace_id(&c));
        if let Ok(id) = id {
            engine.inline().close_workspace(&id);
        }
    }
    for path in uris("added") {
        if let Err(e) = engine.open_workspace(&path) {
            tracing::warn!("workspace folder {} not opened: {e}", path.display());
        }
    }
}

/// Tells the user about the config file's problems, one `window/showMessage` each; after a
/// reload (`reloaded`) a file without problems is announced as in force.
fn show_config(client: &Client, problems: Vec<garuda_core::config::ConfigProblem>, reloaded: bool) {
    let notify = |p: protocol::ShowMessageParams| {
        client.notify(
            m::client::ShowMessage::NAME,
            serde_json::to_value(p).unwrap_or(Value::Null),
        )
    };
    if problems.is_empty() && reloaded {
        notify(protocol::ShowMessageParams {
            kind: 3,
            message: "Garuda config reloaded: no problems; new sessions use it".into(),
            config_problem: None,
        });
    }
    for p in problems {
        notify(cv::show_problem(p));
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
            if let Err(e) = rustix::process::test_kill_process(pid)
                && e == rustix::io::Errno::SRCH
            {
                tracing::info!("client process {} is gone; exiting", pid.as_raw_nonzero());
                stop.cancel();
                return;
            }
        }
    });
}

impl Handler for NativeFront {
    fn request(&self, method: &str, params: Value, ctx: RequestCtx) -> Dispatch {
        let _ = self.client.set(ctx.client.clone());
        let req = match Request::parse(method, params) {
            Ok(Some(r)) => r,
            Ok(None) => {
                return Dispatch::Reply(Err(RpcError::new(
                    rpc_codes::METHOD_NOT_FOUND,
                    format!("unknown method {method}"),
                )));
            }
            Err(e) => {
                return Dispatch::Reply(Err(RpcError::invalid_params(format!(
                    "invalid params: {e}"
                ))));
            }
        };
        let is_initialize = matches!(req, Request::Blocking(BlockingRequest::Initialize(_)));
        let state = self.state.load(Ordering::SeqCst);
        if is_initialize {
            if self
                .state
                .compare_exchange(
                    UNINITIALIZED,
                    INITIALIZING,
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                )
                .is_err()
            {
                return Dispatch::Reply(Err(RpcError::new(
                    rpc_codes::INVALID_REQUEST,
                    "initialize was already called",
                )));
            }
        } else if state != RUNNING {
            return Dispatch::Reply(Err(if state == SHUTTING_DOWN {
                RpcError::invalid_request(format!("{method}: the server is shutting down"))
            } else {
                RpcError::not_initialized(format!(
                    "{method}: the server is not initialized; send initialize first"
                ))
            }));
        }
        match req {
            Request::Inline(r) => Dispatch::Reply(inline(&self.engine.inline(), &self.state, r)),
            Request::Cached(r) => self.cached(r),
            Request::Blocking(r) => {
                let lane = self.resolve(r.lane());
                let facts = FrontFacts {
                    state: self.state.clone(),
                    facts: self.facts.clone(),
                    stop: self.stop.clone(),
                    client: self.client.clone(),
                    watch: is_initialize
                        .then(|| self.config_path.clone().map(|p| (self.engine.clone(), p)))
                        .flatten(),
                };
                off_loop(
                    lane,
                    self.on_pool(move |engine| Self::blocking(engine, &facts, r)),
                )
            }
            Request::Spawned(r) => {
                let lane = self.resolve(r.lane());
                off_loop(lane, self.spawned(r, ctx))
            }
        }
    }

    fn notification(&self, method: &str, params: Value, client: &Client) -> Flow {
        let _ = self.client.set(client.clone());
        match Notice::parse(method, params) {
            Ok(Some(Notice::Exit(_))) => {
                Flow::Exit(if self.state.load(Ordering::SeqCst) == SHUTTING_DOWN {
                    0
                } else {
                    1
                })
            }
            _ if self.state.load(Ordering::SeqCst) != RUNNING => {
                tracing::debug!("{method} before initialize: ignored");
                Flow::Continue
            }
            Ok(Some(Notice::Initialized(_))) => Flow::Continue,
            Ok(Some(Notice::DidChangeWorkspaceFolders(p))) => {
                self.queue_folder_change(p);
                Flow::Continue
            }
            Ok(None) => {
                tracing::debug!("notification {method} ignored");
                Flow::Continue
            }
            // A notification has no answer to carry the error: the log is all there is.
            Err(e) => {
                tracing::warn!("{method}: invalid params: {e}");
                Flow::Continue
            }
        }
    }
}

/// Once a session's MCP servers are up or failed, each failure as a warning
/// (`window/showMessage`) to the client, and in the log.
fn show_mcp_failures(session: &garuda_core::turn::LiveSession, client: Option<&Client>) {
    let (Some(hub), Some(client)) = (&session.setup().mcp, client) else {
        return;
    };
    let client = client.clone();
    hub.when_started(move |failures| {
        for message in failures {
            tracing::warn!("{message}");
            client.notify(
                m::client::ShowMessage::NAME,
                serde_json::to_value(protocol::ShowMessageParams {
                    kind: 2,
                    message,
                    config_problem: None,
                })
                .unwrap_or(Value::Null),
            );
        }
    });
}
