//! The MCP servers of one session: started together, listed in a fixed order, called with
//! a timeout, watched, and stopped with the session.
//!
//! Invariants the rest of Garuda relies on:
//! - The tool list is fixed once, before the session's first request ([`McpHub::settle`]),
//!   and changes only when the caller asks ([`McpHub::apply_tool_changes`], at compaction), so the request prefix stays
//!   byte-identical and the provider's prompt cache keeps hitting.
//! - A server that fails to start or dies is reported once ([`McpHub::take_events`]); the
//!   session goes on without it, and a new session (a new hub) starts it again.
//! - Stdio servers run in their own process group, which is killed when the hub goes, so a
//!   server's own children (`npx` starts `node`) do not outlive the session. A server that
//!   calls `setsid` itself escapes this; none of the common ones do.
//! - A server's stderr goes to the log (target `garuda::mcp`), never to Garuda's stdout.
//!   The last lines are kept to explain a failed start.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    ClientConfig, ElicitRequestParams, ElicitResult, ElicitationCapability, ErrorData,
    FormElicitationCapability, GetTaskParams, Implementation, InputRequest, InputRequests,
    InputResponses, TASKS_EXTENSION_ID, Task, TaskPayload, Tool, UpdateTaskParams,
    UrlElicitationCapability,
};
use rmcp::model::{ProtocolVersion, ServerNotification, SubscriptionFilter};
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, ClientServiceExt, NotificationContext,
    RequestContext, RunningService,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, Peer, RoleClient, ServiceError};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::config::{McpServerConfig, McpTransport};
use super::convert::{McpToolResult, convert_result};
use super::elicit::{self, ElicitationAnswer, Elicitor, Relay};
use super::http::McpHttpClient;
use super::naming::assign_names;
use crate::message::ToolSpec;

/// Variables a stdio server inherits from Garuda's environment; everything else (provider
/// keys above all) stays out unless the server's `env` names it.
pub const BASE_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TMPDIR",
    "TZ",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
    "XDG_RUNTIME_DIR",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
];

/// Lines of a server's stderr kept to explain a failure.
const STDERR_TAIL: usize = 5;
/// Longest stderr line kept (characters).
const STDERR_LINE: usize = 300;
/// How long a stopping server gets after SIGTERM before SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(2);
/// What a wait for the starts allows beyond the longest startup timeout: a failed start
/// waits up to 600 ms more for its exit status and stderr.
const START_GRACE: Duration = Duration::from_secs(2);
/// Connect timeout for Streamable HTTP servers.
const HTTP_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where a server is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpServerState {
    /// Configured with `enabled = false`; never started.
    Disabled,
    /// Starting: spawned or connecting, not yet listed its tools.
    Starting,
    /// Running; its tools are in the session.
    Ready,
    /// Did not start (bad config, bad command, error, timeout).
    Failed {
        /// Why, for the person.
        reason: String,
    },
    /// Was ready, then stopped (process exit or lost connection).
    Exited {
        /// Why, for the person.
        reason: String,
    },
}

/// One server as `mcp/servers` lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServerStatus {
    /// Its name in the config (or in ACP's `mcpServers`).
    pub name: String,
    /// `stdio`, `http`, or `invalid` for a config entry that cannot be used.
    pub transport: String,
    /// Its state.
    pub state: McpServerState,
    /// Tools it contributes to the session's current list (before the first turn fixes the
    /// list: the tools it offers).
    pub tool_count: usize,
    /// Milliseconds from start to a listed tool set, once ready.
    pub startup_ms: Option<u64>,
}

/// An MCP tool as the session exposes it.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    /// The name the model calls (`mcp__SERVER__TOOL`, sanitized).
    pub name: String,
    /// The server's config name.
    pub server: String,
    /// The tool's own MCP name.
    pub tool: String,
    /// The definition sent to the provider.
    pub spec: ToolSpec,
    /// True when the config marks the server or the tool read-only (no approval needed);
    /// otherwise the tool counts as a command.
    pub read_only: bool,
}

/// Something the model or the person should hear about once.
#[derive(Debug, Clone, PartialEq)]
pub enum McpEvent {
    /// A server did not start.
    ServerFailed {
        /// The server.
        server: String,
        /// Why.
        reason: String,
    },
    /// A ready server stopped.
    ServerExited {
        /// The server.
        server: String,
        /// Why.
        reason: String,
    },
    /// A server became ready after the session's list was fixed; its tools are not yet in it.
    ServerLate {
        /// The server.
        server: String,
        /// How many tools it offers.
        tools: usize,
    },
    /// A server's tool list changed (`notifications/tools/list_changed`); not yet applied.
    ToolsChanged {
        /// The server.
        server: String,
        /// Exposed names of new tools.
        added: Vec<String>,
        /// Exposed names of tools gone.
        removed: Vec<String>,
        /// Exposed names of tools whose definition changed.
        changed: Vec<String>,
    },
}

impl McpEvent {
    /// The text for a `<garuda_note>` to the model.
    pub fn note(&self) -> String {
        match self {
            McpEvent::ServerFailed { server, reason } => format!(
                "MCP server `{server}` failed to start ({reason}); its tools are not available in this session."
            ),
            McpEvent::ServerExited { server, reason } => format!(
                "MCP server `{server}` stopped ({reason}); calls to its tools fail for the rest of this session."
            ),
            McpEvent::ServerLate { server, tools } => format!(
                "MCP server `{server}` finished starting after this session's first request; its {tools} tool(s) take effect after the next compaction."
            ),
            McpEvent::ToolsChanged {
                server,
                added,
                removed,
                changed,
            } => {
                let mut parts = Vec::new();
                for (what, names) in [("added", added), ("removed", removed), ("changed", changed)]
                {
                    if !names.is_empty() {
                        parts.push(format!("{what}: {}", names.join(", ")));
                    }
                }
                format!(
                    "MCP server `{server}` changed its tools ({}); the new list takes effect after the next compaction.",
                    parts.join("; ")
                )
            }
        }
    }
}

/// Why a tool call did not produce a result. The text is written for the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpCallError {
    /// No tool of that name in the session's list.
    #[error("no MCP tool named `{0}` in this session")]
    UnknownTool(String),
    /// The server is not running.
    #[error("MCP server `{server}` is not available: {reason}")]
    Unavailable {
        /// The server.
        server: String,
        /// Why.
        reason: String,
    },
    /// The arguments are not a JSON object.
    #[error("arguments for `{0}` must be a JSON object")]
    BadArguments(String),
    /// No answer within the call timeout; the request was cancelled at the server.
    #[error(
        "`{tool}` on MCP server `{server}` did not answer within {ms} ms; the call was cancelled"
    )]
    Timeout {
        /// The server.
        server: String,
        /// The tool's MCP name.
        tool: String,
        /// The timeout.
        ms: u64,
    },
    /// The turn was cancelled; the request was cancelled at the server.
    #[error("cancelled")]
    Cancelled,
    /// The server answered with an error.
    #[error("MCP server `{server}` failed the call to `{tool}`: {message}")]
    Failed {
        /// The server.
        server: String,
        /// The tool's MCP name.
        tool: String,
        /// The server's message.
        message: String,
    },
}

/// Orders and names the tools of ready servers: by server name, then tool name, so the same
/// servers with the same tools always give the same list, whatever order they listed them in.
/// A tool name a server lists twice is taken once.
pub fn build_tools(listings: &[(&str, &McpServerConfig, &[Tool])]) -> Vec<McpTool> {
    let mut rows: Vec<(&str, &McpServerConfig, &Tool)> = listings
        .iter()
        .flat_map(|(s, c, tools)| tools.iter().map(move |t| (*s, *c, t)))
        .collect();
    rows.sort_by(|a, b| (a.0, a.2.name.as_ref()).cmp(&(b.0, b.2.name.as_ref())));
    rows.dedup_by(|a, b| a.0 == b.0 && a.2.name == b.2.name);
    let pairs: Vec<(&str, &str)> = rows.iter().map(|(s, _, t)| (*s, t.name.as_ref())).collect();
    let names = assign_names(&pairs);
    rows.into_iter()
        .zip(names)
        .map(|((server, config, tool), name)| McpTool {
            spec: tool_spec(&name, server, tool),
            read_only: config.tool_is_read_only(&tool.name),
            name,
            server: server.to_string(),
            tool: tool.name.to_string(),
        })
        .collect()
}

/// The provider-facing definition of an MCP tool.
fn tool_spec(name: &str, server: &str, tool: &Tool) -> ToolSpec {
    let description = tool
        .description
        .as_deref()
        .filter(|d| !d.trim().is_empty())
        .map(str::to_string)
        .or_else(|| tool.title.clone())
        .unwrap_or_else(|| format!("Tool `{}` of MCP server `{server}`.", tool.name));
    let mut schema = (*tool.input_schema).clone();
    // Providers require an object schema; some servers leave `type` out for no-argument tools.
    schema
        .entry("type")
        .or_insert_with(|| Value::String("object".into()));
    ToolSpec {
        name: name.to_string(),
        description,
        input_schema: Value::Object(schema),
    }
}

/// Our side of the MCP connection: identifies Garuda, hears notifications and passes
/// elicitation requests to the tool call in flight.
#[derive(Clone)]
struct Handler {
    server: String,
    dirty: Arc<AtomicBool>,
    relay: Arc<Relay>,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::info!(target: "garuda::mcp", server = %self.server, "tools/list_changed");
        self.dirty.store(true, Ordering::SeqCst);
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(answer_elicitation(&self.server, &self.relay, request).await)
    }

    fn get_info(&self) -> ClientConfig {
        // Elicitation, both modes: the turn's client answers, or Garuda declines with a reason.
        // No roots or sampling: Garuda answers neither.
        let mut caps = ClientCapabilities::default();
        let mut elicitation = ElicitationCapability::new();
        elicitation.form = Some(FormElicitationCapability::new());
        elicitation.url = Some(UrlElicitationCapability::new());
        caps.elicitation = Some(elicitation);
        // Tasks (SEP-2663): a server may run a tool call as a task, which `call` polls.
        caps.extensions
            .get_or_insert_with(Default::default)
            .insert(TASKS_EXTENSION_ID.to_string(), Default::default());
        ClientConfig::new(
            caps,
            Implementation::new("garuda", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// Passes a server's elicitation to the tool call in flight and answers with the outcome.
async fn answer_elicitation(
    server: &str,
    relay: &Relay,
    request: ElicitRequestParams,
) -> ElicitResult {
    let answer = match elicit::from_params(server, request) {
        Some(request) => relay.ask(request).await,
        None => ElicitationAnswer::Unavailable("an elicitation mode Garuda does not know".into()),
    };
    elicit::to_result(server, answer)
}

/// Answers the input requests of an `input_required` result or task: elicitations go to the
/// person; Garuda offers no sampling and no roots, so those fail the call.
async fn answer_inputs(
    server: &str,
    relay: &Relay,
    requests: InputRequests,
) -> Result<InputResponses, ServiceError> {
    let mut out = InputResponses::new();
    for (key, request) in requests {
        let InputRequest::Elicitation(request) = request else {
            return Err(ServiceError::McpError(ErrorData::invalid_request(
                "the server asked for sampling or roots, which Garuda does not offer",
                None,
            )));
        };
        let result = answer_elicitation(server, relay, request.params).await;
        let value = serde_json::to_value(result)
            .map_err(|e| ServiceError::McpError(ErrorData::internal_error(e.to_string(), None)))?;
        out.insert(key, value);
    }
    Ok(out)
}

/// Shortest and longest wait between two `tasks/get` polls (the server's `pollIntervalMs`
/// is honoured within these); the default when it gives none.
const POLL_MIN: Duration = Duration::from_millis(10);
const POLL_MAX: Duration = Duration::from_secs(5);
const POLL_DEFAULT: Duration = Duration::from_millis(500);
/// How long a turn's cancel waits for the server to acknowledge `tasks/cancel`.
const TASK_CANCEL_WAIT: Duration = Duration::from_secs(2);

/// A tool call on a server that offers tasks (SEP-2663): `tools/call`, answering
/// `input_required` rounds; when the server makes it a task, `tasks/get` is polled (at the
/// server's `pollIntervalMs`), in-task input requests are answered with `tasks/update`, and the
/// outcome is the task's. `task` holds the task's id while it runs, so a cancelled or timed
/// out call can send `tasks/cancel`.
async fn call_with_tasks(
    peer: &Peer<RoleClient>,
    server: &str,
    relay: &Relay,
    mut params: CallToolRequestParams,
    task: &Mutex<Option<String>>,
) -> Result<CallToolResult, ServiceError> {
    const MAX_ROUNDS: usize = 10;
    for round in 0..MAX_ROUNDS {
        match peer.call_tool_once(params.clone()).await? {
            CallToolResponse::Complete(result) => return Ok(result),
            CallToolResponse::InputRequired(r) => {
                let asked = r.input_requests.unwrap_or_default();
                if asked.is_empty() && r.request_state.is_none() {
                    return Err(ServiceError::UnexpectedResponse);
                }
                if asked.is_empty() {
                    // Only state to carry back: the server is not ready yet.
                    tokio::time::sleep(POLL_MIN * (1 << round.min(4))).await;
                }
                let answers = answer_inputs(server, relay, asked).await?;
                params.input_responses = (!answers.is_empty()).then_some(answers);
                params.request_state = r.request_state;
            }
            CallToolResponse::Task(created) => {
                return poll_task(peer, server, relay, created.task, task).await;
            }
            _ => return Err(ServiceError::UnexpectedResponse),
        }
    }
    Err(ServiceError::InputRequiredRoundsExceeded {
        max_rounds: MAX_ROUNDS,
    })
}

/// Polls a task to its end (see [`call_with_tasks`]).
async fn poll_task(
    peer: &Peer<RoleClient>,
    server: &str,
    relay: &Relay,
    created: Task,
    slot: &Mutex<Option<String>>,
) -> Result<CallToolResult, ServiceError> {
    let id = created.task_id.clone();
    *lock(slot) = Some(id.clone());
    tracing::debug!(target: "garuda::mcp", server, task = %id, "tools/call runs as a task");
    let mut interval = created.poll_interval_ms;
    // The server may list an input request again until it has taken the answer.
    let mut answered = std::collections::BTreeSet::new();
    let outcome = loop {
        let wait = interval.map_or(POLL_DEFAULT, Duration::from_millis);
        tokio::time::sleep(wait.clamp(POLL_MIN, POLL_MAX)).await;
        let got = peer.get_task(GetTaskParams::new(id.clone())).await?.task;
        interval = got.task.poll_interval_ms.or(interval);
        match got.payload {
            TaskPayload::Completed { result } => {
                break serde_json::from_value::<CallToolResult>(Value::Object(result)).map_err(
                    |e| {
                        ServiceError::McpError(ErrorData::internal_error(
                            format!("the task's result is not a tool result: {e}"),
                            None,
                        ))
                    },
                );
            }
            TaskPayload::Failed { error } => {
                let data = serde_json::from_value::<ErrorData>(Value::Object(error.clone()))
                    .unwrap_or_else(|_| {
                        ErrorData::internal_error(Value::Object(error).to_string(), None)
                    });
                break Err(ServiceError::McpError(data));
            }
            TaskPayload::Cancelled => {
                break Err(ServiceError::McpError(ErrorData::internal_error(
                    "the server cancelled the task",
                    None,
                )));
            }
            TaskPayload::InputRequired { input_requests } => {
                let fresh: InputRequests = input_requests
                    .into_iter()
                    .filter(|(k, _)| !answered.contains(k))
                    .collect();
                if fresh.is_empty() {
                    continue;
                }
                answered.extend(fresh.keys().cloned());
                let answers = answer_inputs(server, relay, fresh).await?;
                peer.update_task(UpdateTaskParams::new(id.clone(), answers))
                    .await?;
            }
            _ => {}
        }
    };
    lock(slot).take();
    outcome
}

/// A spawned stdio server's process group.
struct Child {
    pgid: i32,
    exited: Arc<AtomicBool>,
    status: watch::Receiver<Option<String>>,
}

impl Child {
    fn signal(&self, sig: rustix::process::Signal) {
        // After the leader is reaped its pid could in principle be reused; the waiter kills
        // the group and sets `exited` at that moment, so later signals are skipped.
        if self.exited.load(Ordering::SeqCst) {
            return;
        }
        if let Some(pid) = rustix::process::Pid::from_raw(self.pgid) {
            let _ = rustix::process::kill_process_group(pid, sig);
        }
    }
}

/// One configured server and everything known about it.
struct Server {
    name: String,
    config: McpServerConfig,
    transport: Result<McpTransport, String>,
    state: Mutex<McpServerState>,
    startup_ms: Mutex<Option<u64>>,
    /// Shared with the calls in flight, which drive `input_required` rounds through it.
    service: Mutex<Option<Arc<RunningService<RoleClient, Handler>>>>,
    peer: Mutex<Option<Peer<RoleClient>>>,
    child: Mutex<Option<Child>>,
    listed: Mutex<Vec<Tool>>,
    /// When the last listing goes stale, from the server's cache hint (`ttlMs`); None: no
    /// hint, the listing holds until `tools/list_changed`.
    expires: Mutex<Option<Instant>>,
    dirty: Arc<AtomicBool>,
    reported: AtomicBool,
    stderr: Arc<Mutex<VecDeque<String>>>,
    /// True once the child's stderr reached its end (so the tail is complete).
    stderr_eof: watch::Sender<bool>,
}

/// Locks a mutex, taking the data even if a panicking thread poisoned it (the data here is
/// plain state that stays consistent between statements).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Server {
    fn state(&self) -> McpServerState {
        lock(&self.state).clone()
    }

    fn peer(&self) -> Option<Peer<RoleClient>> {
        lock(&self.peer).clone()
    }

    /// Moves a ready server to `Exited` and reports it once.
    fn mark_exited(&self, reason: String, events: &Mutex<Vec<McpEvent>>) {
        {
            let mut st = lock(&self.state);
            if *st != McpServerState::Ready {
                return;
            }
            *st = McpServerState::Exited {
                reason: reason.clone(),
            };
        }
        tracing::warn!(target: "garuda::mcp", server = %self.name, "stopped: {reason}");
        lock(&self.peer).take();
        if !self.reported.swap(true, Ordering::SeqCst) {
            lock(events).push(McpEvent::ServerExited {
                server: self.name.clone(),
                reason,
            });
        }
    }

    /// Waits briefly for the child's stderr to end, so a dead server's last words are read.
    async fn stderr_settled(&self) {
        let mut eof = self.stderr_eof.subscribe();
        let _ = tokio::time::timeout(Duration::from_millis(300), eof.wait_for(|done| *done)).await;
    }

    fn stderr_tail(&self) -> Option<String> {
        let tail = lock(&self.stderr);
        (!tail.is_empty()).then(|| tail.iter().cloned().collect::<Vec<_>>().join(" | "))
    }
}

struct Inner {
    servers: Vec<Arc<Server>>,
    cwd: Option<PathBuf>,
    defer_share: f64,
    snapshot: Mutex<Arc<Vec<McpTool>>>,
    events: Arc<Mutex<Vec<McpEvent>>>,
    relay: Arc<Relay>,
    /// True once every start has ended (ready or failed).
    started: watch::Sender<bool>,
    /// True once the session fixed its list ([`McpHub::settle`]): a server ready after that
    /// is reported, and its tools wait for the next compaction.
    settled: Arc<AtomicBool>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // No runtime may be left here, so only synchronous signals: kill every group still up.
        for s in &self.servers {
            if let Some(c) = lock(&s.child).as_ref() {
                c.signal(rustix::process::Signal::KILL);
            }
        }
    }
}

/// The MCP servers of one session.
#[derive(Clone)]
pub struct McpHub {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for McpHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHub")
            .field("servers", &self.servers())
            .finish()
    }
}

impl McpHub {
    /// A hub for `servers` (name, config), none started yet. Stdio servers run in `cwd` unless
    /// their config names one (normally the workspace root).
    pub fn new(
        servers: impl IntoIterator<Item = (String, McpServerConfig)>,
        cwd: Option<PathBuf>,
        defer_share: f64,
    ) -> McpHub {
        let mut list: Vec<(String, McpServerConfig)> = servers.into_iter().collect();
        list.sort_by(|a, b| a.0.cmp(&b.0));
        // A name given twice (user config and ACP): the later entry wins.
        list.reverse();
        list.dedup_by(|a, b| a.0 == b.0);
        list.reverse();
        let servers = list
            .into_iter()
            .map(|(name, config)| {
                let transport = config.transport(&name).map_err(|e| e.to_string());
                let state = match (&transport, config.enabled) {
                    (Err(e), _) => McpServerState::Failed { reason: e.clone() },
                    (Ok(_), false) => McpServerState::Disabled,
                    (Ok(_), true) => McpServerState::Starting,
                };
                Arc::new(Server {
                    name,
                    config,
                    transport,
                    state: Mutex::new(state),
                    startup_ms: Mutex::new(None),
                    service: Mutex::new(None),
                    peer: Mutex::new(None),
                    child: Mutex::new(None),
                    listed: Mutex::new(Vec::new()),
                    expires: Mutex::new(None),
                    dirty: Arc::new(AtomicBool::new(false)),
                    reported: AtomicBool::new(false),
                    stderr: Arc::new(Mutex::new(VecDeque::new())),
                    stderr_eof: watch::Sender::new(false),
                })
            })
            .collect();
        McpHub {
            inner: Arc::new(Inner {
                servers,
                cwd,
                defer_share,
                snapshot: Mutex::new(Arc::new(Vec::new())),
                events: Arc::new(Mutex::new(Vec::new())),
                relay: Relay::new(),
                started: watch::Sender::new(false),
                settled: Arc::new(AtomicBool::new(false)),
            }),
        }
    }

    /// Starts every enabled server at once and waits until each is ready or failed (each
    /// within its `startup_timeout_ms`), then fixes the session's tool list.
    pub async fn start(&self) {
        self.start_servers().await;
        self.settle();
    }

    /// Starts every enabled server and waits until each is ready or failed, leaving the
    /// session's list to [`Self::settle`].
    pub(crate) async fn start_servers(&self) {
        let settled = self.inner.settled.clone();
        let starts = self.inner.servers.iter().filter_map(|s| {
            let events = self.inner.events.clone();
            let cwd = self.inner.cwd.clone();
            let relay = self.inner.relay.clone();
            match s.state() {
                McpServerState::Starting => {
                    Some(start_server(s.clone(), cwd, events, relay, settled.clone()))
                }
                McpServerState::Failed { reason } => {
                    // A config entry that cannot be used is reported like a failed start.
                    if !s.reported.swap(true, Ordering::SeqCst) {
                        lock(&self.inner.events).push(McpEvent::ServerFailed {
                            server: s.name.clone(),
                            reason,
                        });
                    }
                    None
                }
                _ => None,
            }
        });
        futures_util::future::join_all(starts).await;
        self.inner.started.send_replace(true);
    }

    /// True while a server is still starting (a start begun by [`Self::start_background`]).
    pub fn is_starting(&self) -> bool {
        !*self.inner.started.borrow()
    }

    /// Waits until every start has ended, at most the longest `startup_timeout_ms` of the
    /// servers (and a grace for the failure's explanation); true when they all ended.
    pub async fn wait_started(&self) -> bool {
        let ms = self
            .inner
            .servers
            .iter()
            .map(|s| s.config.startup_timeout_ms)
            .max()
            .unwrap_or(0);
        let limit = Duration::from_millis(ms) + START_GRACE;
        let mut rx = self.inner.started.subscribe();
        tokio::time::timeout(limit, rx.wait_for(|done| *done))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Fixes the session's tool list at what the ready servers offer now, once: the list
    /// the first model request carries. A server that becomes ready later is reported
    /// ([`McpEvent::ServerLate`]) and its tools enter at the next compaction, like a
    /// changed list. True when this call fixed it.
    pub fn settle(&self) -> bool {
        if self.inner.settled.swap(true, Ordering::SeqCst) {
            return false;
        }
        *lock(&self.inner.snapshot) = Arc::new(self.current_tools());
        true
    }

    /// True once [`Self::settle`] fixed the list.
    pub fn is_settled(&self) -> bool {
        self.inner.settled.load(Ordering::SeqCst)
    }

    /// Calls `f` with a warning per server that failed to start, once every start has
    /// ended (at once when they have), on the MCP runtime: how a front tells the person
    /// about failures after `session/new` has answered.
    pub fn when_started(&self, f: impl FnOnce(Vec<String>) + Send + 'static) {
        let hub = self.clone();
        let report = move || {
            let failures = hub
                .servers()
                .into_iter()
                .filter_map(|s| match s.state {
                    McpServerState::Failed { reason } => {
                        Some(format!("MCP server {} failed to start: {reason}", s.name))
                    }
                    _ => None,
                })
                .collect();
            f(failures)
        };
        if !self.is_starting() {
            return report();
        }
        match super::runtime() {
            Some(rt) => {
                let hub = self.clone();
                rt.spawn(async move {
                    hub.wait_started().await;
                    report();
                });
            }
            None => report(),
        }
    }

    /// Marks every server that is still starting as failed with `reason` (the runtime is
    /// gone), reporting each once; no start is pending after it.
    pub(crate) fn fail_all(&self, reason: &str) {
        for s in &self.inner.servers {
            let mut st = lock(&s.state);
            if *st == McpServerState::Starting {
                *st = McpServerState::Failed {
                    reason: reason.to_string(),
                };
                if !s.reported.swap(true, Ordering::SeqCst) {
                    lock(&self.inner.events).push(McpEvent::ServerFailed {
                        server: s.name.clone(),
                        reason: reason.to_string(),
                    });
                }
            }
        }
        self.inner.started.send_replace(true);
    }

    /// Every configured server with its state, in name order. Before the list is fixed
    /// ([`Self::settle`]), a ready server's count is what it offers.
    pub fn servers(&self) -> Vec<McpServerStatus> {
        let snapshot = if self.is_settled() {
            self.tools()
        } else {
            Arc::new(self.current_tools())
        };
        self.inner
            .servers
            .iter()
            .map(|s| McpServerStatus {
                name: s.name.clone(),
                transport: s
                    .transport
                    .as_ref()
                    .map_or("invalid", McpTransport::kind)
                    .to_string(),
                state: s.state(),
                tool_count: snapshot.iter().filter(|t| t.server == s.name).count(),
                startup_ms: *lock(&s.startup_ms),
            })
            .collect()
    }

    /// The session's tool list: fixed by [`Self::settle`], changed only by [`Self::apply_tool_changes`].
    pub fn tools(&self) -> Arc<Vec<McpTool>> {
        lock(&self.inner.snapshot).clone()
    }

    /// The definitions of [`Self::tools`], in order.
    pub fn tool_specs(&self) -> Vec<ToolSpec> {
        self.tools().iter().map(|t| t.spec.clone()).collect()
    }

    /// The tool the model calls `name`, if the session has it.
    pub fn find(&self, name: &str) -> Option<McpTool> {
        self.tools().iter().find(|t| t.name == name).cloned()
    }

    /// Whether `tools`' definitions are deferred behind the search tool at a window of
    /// `context_window` tokens: they may take the `[mcp] defer_share` of it.
    pub fn defer_plan(&self, tools: &[McpTool], context_window: u64) -> super::DeferPlan {
        let specs: Vec<crate::message::ToolSpec> = tools.iter().map(|t| t.spec.clone()).collect();
        super::defer::plan(&specs, context_window, self.inner.defer_share)
    }

    /// Installs `tools` (a list [`Self::current_tools`] gave) as the session's.
    pub fn install_tools(&self, tools: Vec<McpTool>) {
        *lock(&self.inner.snapshot) = Arc::new(tools);
    }

    /// The list the ready servers offer now (what [`Self::apply_tool_changes`] would install).
    pub fn current_tools(&self) -> Vec<McpTool> {
        let ready: Vec<(&Server, Vec<Tool>)> = self
            .inner
            .servers
            .iter()
            .filter(|s| s.state() == McpServerState::Ready)
            .map(|s| (s.as_ref(), lock(&s.listed).clone()))
            .collect();
        let listings: Vec<(&str, &McpServerConfig, &[Tool])> = ready
            .iter()
            .map(|(s, tools)| (s.name.as_str(), &s.config, tools.as_slice()))
            .collect();
        build_tools(&listings)
    }

    /// True when the servers now offer a different list than the session's.
    pub fn has_tool_changes(&self) -> bool {
        *self.tools() != self.current_tools()
    }

    /// Installs the servers' current tool list as the session's (call when the request prefix
    /// is rebuilt anyway, i.e. at compaction). True when it changed.
    pub fn apply_tool_changes(&self) -> bool {
        let now = self.current_tools();
        let mut snap = lock(&self.inner.snapshot);
        if **snap == now {
            return false;
        }
        *snap = Arc::new(now);
        true
    }

    /// Events not yet reported, each once: failed starts, stopped servers, and tool-list
    /// changes. A server that sent `tools/list_changed`, or whose last listing is past its
    /// cache hint (`ttlMs`), is listed again here (the turn start calls this), and a change
    /// is reported only when the list really differs (servers also send it when nothing
    /// did). The session's list itself changes only at [`Self::apply_tool_changes`].
    pub async fn take_events(&self) -> Vec<McpEvent> {
        let now = Instant::now();
        for s in &self.inner.servers {
            let stale = lock(&s.expires).is_some_and(|at| at <= now);
            if !s.dirty.swap(false, Ordering::SeqCst) && !stale {
                continue;
            }
            let Some(peer) = s.peer() else { continue };
            let limit = Duration::from_millis(s.config.startup_timeout_ms.max(1));
            let listed = match tokio::time::timeout(limit, peer.list_all_tools_with_cache_hint())
                .await
            {
                Ok(Ok(list)) => {
                    *lock(&s.expires) = expiry(list.ttl_ms);
                    list.items
                }
                Ok(Err(e)) => {
                    tracing::warn!(target: "garuda::mcp", server = %s.name, "tools/list again failed: {e}");
                    self.note_call_error(s, &e);
                    continue;
                }
                Err(_) => {
                    tracing::warn!(target: "garuda::mcp", server = %s.name, "tools/list again timed out");
                    continue;
                }
            };
            let before = self.current_tools();
            *lock(&s.listed) = listed;
            let after = self.current_tools();
            let of = |list: &[McpTool]| -> Vec<McpTool> {
                list.iter()
                    .filter(|t| t.server == s.name)
                    .cloned()
                    .collect()
            };
            let (before, after) = (of(&before), of(&after));
            let added: Vec<String> = after
                .iter()
                .filter(|t| !before.iter().any(|b| b.tool == t.tool))
                .map(|t| t.name.clone())
                .collect();
            let removed: Vec<String> = before
                .iter()
                .filter(|b| !after.iter().any(|t| t.tool == b.tool))
                .map(|t| t.name.clone())
                .collect();
            let changed: Vec<String> = after
                .iter()
                .filter(|t| before.iter().any(|b| b.tool == t.tool && b != *t))
                .map(|t| t.name.clone())
                .collect();
            if !(added.is_empty() && removed.is_empty() && changed.is_empty()) {
                lock(&self.inner.events).push(McpEvent::ToolsChanged {
                    server: s.name.clone(),
                    added,
                    removed,
                    changed,
                });
            }
        }
        std::mem::take(&mut *lock(&self.inner.events))
    }

    /// Calls the tool the model knows as `name` with `arguments` (a JSON object or null),
    /// within the server's `call_timeout_ms` (time spent waiting for the person's answer to
    /// an elicitation does not count). Cancelling `cancel` or the timeout drops the request,
    /// which sends `notifications/cancelled` to the server. Elicitation requests that arrive
    /// meanwhile go to `elicitor`; `input_required` results (2026-07-28) are answered the
    /// same way and the call retried.
    pub async fn call(
        &self,
        name: &str,
        arguments: Value,
        cancel: &CancellationToken,
        elicitor: &dyn Elicitor,
    ) -> Result<McpToolResult, McpCallError> {
        let tool = self
            .find(name)
            .ok_or_else(|| McpCallError::UnknownTool(name.to_string()))?;
        let server = self
            .inner
            .servers
            .iter()
            .find(|s| s.name == tool.server)
            .ok_or_else(|| McpCallError::UnknownTool(name.to_string()))?;
        let unavailable = |reason: String| McpCallError::Unavailable {
            server: server.name.clone(),
            reason,
        };
        let service = match server.state() {
            McpServerState::Ready => lock(&server.service)
                .clone()
                .ok_or_else(|| unavailable("not connected".into()))?,
            McpServerState::Exited { reason } | McpServerState::Failed { reason } => {
                return Err(unavailable(reason));
            }
            other => return Err(unavailable(format!("{other:?}").to_lowercase())),
        };
        let mut params = CallToolRequestParams::new(tool.tool.clone());
        match arguments {
            Value::Object(map) => params = params.with_arguments(map),
            Value::Null => {}
            _ => return Err(McpCallError::BadArguments(name.to_string())),
        }
        let ms = server.config.call_timeout_ms.max(1);
        let started = Instant::now();
        // The task the server made of this call, while it runs (tasks servers only).
        let task = Mutex::new(None);
        let tasks = service
            .peer()
            .peer_info()
            .is_some_and(|i| i.capabilities.supports_tasks());
        let outcome = {
            let _active = Active::enter(&self.inner.relay);
            let call = async {
                if tasks {
                    let relay = &self.inner.relay;
                    call_with_tasks(service.peer(), &server.name, relay, params, &task).await
                } else {
                    service.call_tool(params).await
                }
            };
            tokio::pin!(call);
            let sleep = tokio::time::sleep(Duration::from_millis(ms));
            tokio::pin!(sleep);
            'call: loop {
                let pending = async { self.inner.relay.rx.lock().await.recv().await };
                tokio::select! {
                    r = &mut call => break Ok(r),
                    _ = &mut sleep => break Err(McpCallError::Timeout {
                        server: server.name.clone(),
                        tool: tool.tool.clone(),
                        ms,
                    }),
                    _ = cancel.cancelled() => break Err(McpCallError::Cancelled),
                    Some(p) = pending => {
                        let asked = Instant::now();
                        let answer = tokio::select! {
                            a = elicitor.elicit(p.request) => a,
                            _ = cancel.cancelled() => break 'call Err(McpCallError::Cancelled),
                        };
                        let _ = p.answer.send(answer);
                        // The person's time does not count against the call's timeout.
                        let deadline = sleep.deadline() + asked.elapsed();
                        sleep.as_mut().reset(deadline);
                    }
                }
            }
        };
        tracing::debug!(target: "garuda::mcp", server = %server.name, tool = %tool.tool,
            ms = started.elapsed().as_millis() as u64, "tools/call");
        let pending_task = lock(&task).take();
        match outcome {
            Err(e) => {
                // Dropping the call cancelled its request; a task goes on at the server
                // unless it is told.
                if let Some(id) = pending_task {
                    let cancel = service
                        .peer()
                        .cancel_task(CancelTaskParams::new(id.clone()));
                    match tokio::time::timeout(TASK_CANCEL_WAIT, cancel).await {
                        Ok(Ok(())) => {
                            tracing::debug!(target: "garuda::mcp", server = %server.name, task = %id, "tasks/cancel")
                        }
                        Ok(Err(e)) => {
                            tracing::warn!(target: "garuda::mcp", server = %server.name, task = %id, "tasks/cancel failed: {e}")
                        }
                        Err(_) => {
                            tracing::warn!(target: "garuda::mcp", server = %server.name, task = %id, "tasks/cancel not acknowledged")
                        }
                    }
                }
                Err(e)
            }
            Ok(Ok(result)) => Ok(convert_result(&server.name, &tool.tool, &result)),
            Ok(Err(e)) => {
                if self.note_call_error(server, &e) {
                    return Err(unavailable(server_lost(&e)));
                }
                Err(McpCallError::Failed {
                    server: server.name.clone(),
                    tool: tool.tool.clone(),
                    message: match e {
                        ServiceError::McpError(data) => data.message.to_string(),
                        other => other.to_string(),
                    },
                })
            }
        }
    }

    /// Marks the server stopped when `e` means the connection is gone; true then.
    fn note_call_error(&self, server: &Server, e: &ServiceError) -> bool {
        if matches!(
            e,
            ServiceError::TransportClosed | ServiceError::TransportSend(_)
        ) {
            let mut reason = server_lost(e);
            if let Some(tail) = server.stderr_tail() {
                reason.push_str(&format!("; stderr: {tail}"));
            }
            server.mark_exited(reason, &self.inner.events);
            return true;
        }
        false
    }

    /// Stops every server: closes the connections, then SIGTERM to each stdio server's
    /// process group and SIGKILL after a grace period. Dropping the hub kills at once.
    pub async fn shutdown(&self) {
        let stops = self.inner.servers.iter().map(|s| async move {
            lock(&s.peer).take();
            let service = lock(&s.service).take();
            match service.map(Arc::try_unwrap) {
                Some(Ok(mut service)) => {
                    let _ = service.close_with_timeout(TERM_GRACE).await;
                }
                // A call still holds it: cancelling ends the connection under that call.
                Some(Err(shared)) => shared.cancellation_token().cancel(),
                None => {}
            }
            let status = lock(&s.child).as_ref().map(|c| {
                c.signal(rustix::process::Signal::TERM);
                c.status.clone()
            });
            if let Some(mut status) = status {
                let exited = tokio::time::timeout(TERM_GRACE, status.wait_for(Option::is_some));
                if exited.await.is_err()
                    && let Some(c) = lock(&s.child).as_ref()
                {
                    c.signal(rustix::process::Signal::KILL);
                }
            }
            let mut st = lock(&s.state);
            if *st == McpServerState::Ready {
                *st = McpServerState::Exited {
                    reason: "session ended".into(),
                };
            }
        });
        futures_util::future::join_all(stops).await;
    }
}

/// Counts a call in flight on the relay while it lives.
struct Active<'a>(&'a Relay);

impl<'a> Active<'a> {
    fn enter(relay: &'a Relay) -> Active<'a> {
        relay.active.fetch_add(1, Ordering::SeqCst);
        Active(relay)
    }
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
}

/// When a listing with cache hint `ttl_ms` goes stale (None: no hint).
fn expiry(ttl_ms: Option<u64>) -> Option<Instant> {
    ttl_ms.map(|ms| {
        let now = Instant::now();
        now.checked_add(Duration::from_millis(ms)).unwrap_or(now)
    })
}

/// rmcp's error text without the Rust type names it puts in brackets.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '[' => depth += 1,
            ']' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Words for a lost connection.
fn server_lost(e: &ServiceError) -> String {
    match e {
        ServiceError::TransportClosed => "the connection closed (the server exited?)".into(),
        other => format!("the connection failed: {other}"),
    }
}

/// Starts one server within its startup timeout and records the outcome.
async fn start_server(
    server: Arc<Server>,
    cwd: Option<PathBuf>,
    events: Arc<Mutex<Vec<McpEvent>>>,
    relay: Arc<Relay>,
    settled: Arc<AtomicBool>,
) {
    let t0 = Instant::now();
    let ms = server.config.startup_timeout_ms.max(1);
    let outcome = tokio::time::timeout(
        Duration::from_millis(ms),
        connect(&server, cwd, events.clone(), relay),
    )
    .await;
    let result = match outcome {
        Ok(r) => r,
        Err(_) => Err(format!("did not start within {ms} ms")),
    };
    match result {
        Ok((service, tools, ttl_ms)) => {
            *lock(&server.expires) = expiry(ttl_ms);
            let elapsed = t0.elapsed().as_millis() as u64;
            tracing::info!(target: "garuda::mcp", server = %server.name, tools = tools.len(),
                startup_ms = elapsed, "ready");
            *lock(&server.peer) = Some(service.peer().clone());
            *lock(&server.service) = Some(Arc::new(service));
            let count = tools.len();
            *lock(&server.listed) = tools;
            *lock(&server.startup_ms) = Some(elapsed);
            {
                let mut st = lock(&server.state);
                if *st == McpServerState::Starting {
                    *st = McpServerState::Ready;
                }
            }
            if settled.load(Ordering::SeqCst) {
                lock(&events).push(McpEvent::ServerLate {
                    server: server.name.clone(),
                    tools: count,
                });
            }
            // The process may have died between listing and here, when the waiter still saw
            // `Starting` and so reported nothing.
            let died = lock(&server.child)
                .as_ref()
                .and_then(|c| c.status.borrow().clone());
            if let Some(desc) = died {
                server.mark_exited(desc, &events);
            }
        }
        Err(mut reason) => {
            let status = lock(&server.child).as_ref().map(|c| c.status.clone());
            if let Some(mut status) = status {
                // A process that died during startup: wait briefly for its exit status.
                let _ = tokio::time::timeout(
                    Duration::from_millis(300),
                    status.wait_for(Option::is_some),
                )
                .await;
                if let Some(s) = status.borrow().as_ref() {
                    reason.push_str(&format!("; {s}"));
                }
                server.stderr_settled().await;
            }
            if let Some(tail) = server.stderr_tail() {
                reason.push_str(&format!("; stderr: {tail}"));
            }
            if let Some(c) = lock(&server.child).as_ref() {
                c.signal(rustix::process::Signal::KILL);
            }
            tracing::warn!(target: "garuda::mcp", server = %server.name, "failed to start: {reason}");
            *lock(&server.state) = McpServerState::Failed {
                reason: reason.clone(),
            };
            if !server.reported.swap(true, Ordering::SeqCst) {
                lock(&events).push(McpEvent::ServerFailed {
                    server: server.name.clone(),
                    reason,
                });
            }
        }
    }
}

/// The connection, its tools and their cache hint (`ttlMs`).
type Connected = (RunningService<RoleClient, Handler>, Vec<Tool>, Option<u64>);

/// How a connection starts: the stateless 2026-07-28 protocol (`server/discover`, metadata on
/// every request) when the server speaks it, else the `initialize` handshake at 2025-11-25
/// (rmcp falls back when the server answers that it is a legacy one, or after 10 s of
/// silence).
fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    }
}

/// On the stateless protocol a server sends `tools/list_changed` only on a subscription
/// (`subscriptions/listen`): opens one when the server offers `tools.listChanged`, and marks
/// the server dirty on each notification, as the handler does on the older protocol. The
/// acknowledgment is awaited here, so no change after start is missed.
async fn listen_for_tool_changes(server: &Arc<Server>, peer: &Peer<RoleClient>) {
    let Some(info) = peer.peer_info() else { return };
    // Some servers leave `listChanged` out and send changes anyway; only an explicit `false`
    // says there will be none.
    let offers = info
        .capabilities
        .tools
        .as_ref()
        .is_some_and(|t| t.list_changed != Some(false));
    if info.protocol_version < ProtocolVersion::V_2026_07_28 || !offers {
        return;
    }
    let filter = SubscriptionFilter::builder().tools_list_changed().build();
    let mut sub = match peer.listen(filter).await {
        Ok(sub) => sub,
        Err(e) => {
            tracing::warn!(target: "garuda::mcp", server = %server.name, "subscriptions/listen failed: {e}");
            return;
        }
    };
    let (name, dirty) = (server.name.clone(), server.dirty.clone());
    tokio::spawn(async move {
        while let Ok(Some(n)) = sub.next().await {
            if matches!(n, ServerNotification::ToolListChangedNotification(_)) {
                tracing::info!(target: "garuda::mcp", server = %name, "tools/list_changed");
                dirty.store(true, Ordering::SeqCst);
            }
        }
    });
}

/// Spawns or connects, initializes, and lists the tools.
async fn connect(
    server: &Arc<Server>,
    cwd: Option<PathBuf>,
    events: Arc<Mutex<Vec<McpEvent>>>,
    relay: Arc<Relay>,
) -> Result<Connected, String> {
    let handler = Handler {
        server: server.name.clone(),
        dirty: server.dirty.clone(),
        relay,
    };
    let transport = server.transport.clone()?;
    let service = match transport {
        McpTransport::Stdio { command, args } => {
            let pipes = spawn(server, &command, &args, cwd.clone(), events.clone())?;
            let first = handler
                .clone()
                .serve_with_lifecycle(pipes, lifecycle())
                .await;
            match first {
                // A legacy server that answers `server/discover` with an empty result instead
                // of "method not found": once more, a fresh process with the handshake.
                Err(ClientInitializeError::ExpectedInitResult(_)) => {
                    tracing::info!(target: "garuda::mcp", server = %server.name,
                        "server/discover answered with an empty result: starting again with initialize");
                    if let Some(c) = lock(&server.child).take() {
                        c.signal(rustix::process::Signal::KILL);
                    }
                    let pipes = spawn(server, &command, &args, cwd, events)?;
                    handler
                        .serve_with_lifecycle(pipes, ClientLifecycleMode::Initialize)
                        .await
                }
                other => other,
            }
            .map_err(|e| format!("initialize failed: {}", tidy(&e.to_string())))?
        }
        McpTransport::Http { url } => {
            let mut cfg = StreamableHttpClientTransportConfig::with_uri(url);
            if let Some(var) = &server.config.bearer_token_env {
                let token = crate::sandbox::secret_var(var)
                    .filter(|t| !t.is_empty())
                    .ok_or_else(|| format!("bearer_token_env `{var}` is not set"))?;
                cfg = cfg.auth_header(token);
            }
            let mut headers = std::collections::HashMap::new();
            for (k, v) in &server.config.headers {
                let name = HeaderName::try_from(k.as_str())
                    .map_err(|_| format!("invalid header name `{k}`"))?;
                let value = HeaderValue::try_from(v.as_str())
                    .map_err(|_| format!("invalid value for header `{k}`"))?;
                headers.insert(name, value);
            }
            cfg = cfg.custom_headers(headers);
            let client = McpHttpClient::new(HTTP_CONNECT_TIMEOUT)
                .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
            let first = handler
                .clone()
                .serve_with_lifecycle(
                    StreamableHttpClientTransport::with_client(client.clone(), cfg.clone()),
                    lifecycle(),
                )
                .await;
            match first {
                // A legacy server that answers `server/discover` with an empty result instead
                // of "method not found": a fresh connection with the `initialize` handshake.
                Err(ClientInitializeError::ExpectedInitResult(_)) => {
                    handler
                        .serve_with_lifecycle(
                            StreamableHttpClientTransport::with_client(client, cfg),
                            ClientLifecycleMode::Initialize,
                        )
                        .await
                }
                other => other,
            }
            .map_err(|e| format!("initialize failed: {}", tidy(&e.to_string())))?
        }
    };
    let list = service
        .peer()
        .list_all_tools_with_cache_hint()
        .await
        .map_err(|e| format!("tools/list failed: {e}"))?;
    listen_for_tool_changes(server, service.peer()).await;
    Ok((service, list.items, list.ttl_ms))
}

/// Starts a stdio server in its own process group, with its stderr going to the log and a
/// waiter that notices its exit.
fn spawn(
    server: &Arc<Server>,
    command: &str,
    args: &[String],
    cwd: Option<PathBuf>,
    events: Arc<Mutex<Vec<McpEvent>>>,
) -> Result<(tokio::process::ChildStdout, tokio::process::ChildStdin), String> {
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args)
        .env_clear()
        .envs(
            BASE_ENV
                .iter()
                .filter_map(|k| std::env::var_os(k).map(|v| (*k, v))),
        )
        .envs(&server.config.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group, so the whole tree can be signalled at once.
        .process_group(0)
        .kill_on_drop(true);
    if let Some(dir) = server.config.cwd.clone().or(cwd) {
        cmd.current_dir(dir);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start `{command}`: {e}"))?;
    let pgid = child.id().map(|p| p as i32).unwrap_or(0);
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        return Err("the child's pipes are missing".into());
    };
    if let Some(stderr) = child.stderr.take() {
        let name = server.name.clone();
        let tail = server.stderr.clone();
        let eof = server.stderr_eof.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match lines.read_until(b'\n', &mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let line = String::from_utf8_lossy(&buf);
                let line = line.trim_end();
                if line.is_empty() {
                    continue;
                }
                tracing::info!(target: "garuda::mcp", server = %name, "stderr: {line}");
                let mut t = lock(&tail);
                if t.len() == STDERR_TAIL {
                    t.pop_front();
                }
                t.push_back(line.chars().take(STDERR_LINE).collect());
            }
            eof.send_replace(true);
        });
    }
    let exited = Arc::new(AtomicBool::new(false));
    let (tx, rx) = watch::channel(None);
    *lock(&server.child) = Some(Child {
        pgid,
        exited: exited.clone(),
        status: rx,
    });
    let waiter_server = server.clone();
    tokio::spawn(async move {
        let status = child.wait().await;
        // Take the rest of the tree down with the leader, before its pid can be reused.
        if let Some(pid) = rustix::process::Pid::from_raw(pgid) {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        exited.store(true, Ordering::SeqCst);
        let desc = match status {
            Ok(s) => match (s.code(), std::os::unix::process::ExitStatusExt::signal(&s)) {
                (Some(c), _) => format!("exited with status {c}"),
                (None, Some(sig)) => format!("killed by signal {sig}"),
                _ => "exited".to_string(),
            },
            Err(e) => format!("lost track of the process: {e}"),
        };
        let _ = tx.send(Some(desc.clone()));
        waiter_server.stderr_settled().await;
        let mut reason = desc;
        if let Some(tail) = waiter_server.stderr_tail() {
            reason.push_str(&format!("; stderr: {tail}"));
        }
        waiter_server.mark_exited(reason, &events);
    });
    Ok((stdout, stdin))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str) -> Tool {
        serde_json::from_value(json!({
            "name": name,
            "description": format!("does {name}"),
            "inputSchema": {"type": "object", "properties": {}}
        }))
        .unwrap()
    }

    #[test]
    fn tools_are_ordered_by_server_then_name() {
        let cfg = McpServerConfig::stdio("x", &[]);
        let ro = McpServerConfig {
            tools_read_only: vec!["b".into()],
            ..McpServerConfig::stdio("x", &[])
        };
        let zeta = [tool("b"), tool("a")];
        let alpha = [tool("z"), tool("b"), tool("z")];
        let one = build_tools(&[("zeta", &cfg, &zeta), ("alpha", &ro, &alpha)]);
        let names: Vec<&str> = one.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "mcp__alpha__b",
                "mcp__alpha__z",
                "mcp__zeta__a",
                "mcp__zeta__b"
            ]
        );
        assert!(one[0].read_only);
        assert!(!one[1].read_only && !one[3].read_only);
        // Listing order does not matter.
        let zeta2 = [tool("a"), tool("b")];
        let alpha2 = [tool("b"), tool("z")];
        let two = build_tools(&[("alpha", &ro, &alpha2), ("zeta", &cfg, &zeta2)]);
        assert_eq!(one, two);
    }

    #[test]
    fn specs_always_have_an_object_schema_and_a_description() {
        let t: Tool = serde_json::from_value(json!({"name": "bare", "inputSchema": {}})).unwrap();
        let cfg = McpServerConfig::stdio("x", &[]);
        let built = build_tools(&[("s", &cfg, std::slice::from_ref(&t))]);
        assert_eq!(built[0].spec.input_schema, json!({"type": "object"}));
        assert_eq!(built[0].spec.description, "Tool `bare` of MCP server `s`.");
    }

    #[test]
    fn rust_type_names_leave_error_text() {
        assert_eq!(
            tidy("Send message error Transport [a::B<c::D, e::F>] error: Broken pipe"),
            "Send message error Transport error: Broken pipe"
        );
    }

    #[test]
    fn notes_read_well() {
        let e = McpEvent::ToolsChanged {
            server: "py".into(),
            added: vec!["mcp__py__new".into()],
            removed: vec![],
            changed: vec!["mcp__py__old".into()],
        };
        assert_eq!(
            e.note(),
            "MCP server `py` changed its tools (added: mcp__py__new; changed: mcp__py__old); \
             the new list takes effect after the next compaction."
        );
    }

    /// A server that is ready only after the list was fixed is a note, and its tools wait
    /// for the next compaction (`has_tool_changes`), so the list stays as the first request
    /// had it.
    #[tokio::test]
    async fn a_server_ready_after_the_list_is_fixed_is_reported_late() {
        let dir = tempfile::tempdir().unwrap();
        let gate = dir.path().join("gate");
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/mcp/slow_server.py"
        );
        let gate_arg = gate.display().to_string();
        let cfg = McpServerConfig::stdio("python3", &[script, &gate_arg]);
        let hub = McpHub::new([("slow".to_string(), cfg)], None, 0.1);
        let background = hub.clone();
        let start = tokio::spawn(async move { background.start_servers().await });
        assert!(hub.is_starting());
        assert!(hub.settle(), "fixed now, before the server is up");
        assert!(!hub.settle(), "fixed once");
        std::fs::write(&gate, "").unwrap();
        start.await.unwrap();
        assert!(hub.wait_started().await);
        assert!(hub.tools().is_empty());
        assert!(hub.has_tool_changes());
        let events = hub.take_events().await;
        assert_eq!(
            events,
            [McpEvent::ServerLate {
                server: "slow".into(),
                tools: 1
            }]
        );
        assert!(events[0].note().contains("after the next compaction"));
        hub.shutdown().await;
    }

    /// A stdio server that answers `server/discover` with an empty result is started once
    /// more with the `initialize` handshake, and works.
    #[tokio::test]
    async fn a_stdio_server_with_an_empty_probe_answer_gets_one_retry() {
        let dir = tempfile::tempdir().unwrap();
        let starts = dir.path().join("starts");
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/mcp/empty_probe_server.py"
        );
        let starts_arg = starts.display().to_string();
        let cfg = McpServerConfig::stdio("python3", &[script, &starts_arg]);
        let hub = McpHub::new([("old".to_string(), cfg)], None, 0.1);
        hub.start().await;
        assert_eq!(hub.servers()[0].state, McpServerState::Ready);
        assert_eq!(hub.tools().len(), 1);
        assert_eq!(std::fs::read_to_string(&starts).unwrap(), "start\nstart\n");
        assert!(hub.take_events().await.is_empty());
        hub.shutdown().await;
    }

    #[tokio::test]
    async fn invalid_and_disabled_entries_do_not_start() {
        let hub = McpHub::new(
            [
                ("bad".to_string(), McpServerConfig::default()),
                (
                    "off".to_string(),
                    McpServerConfig {
                        enabled: false,
                        ..McpServerConfig::stdio("true", &[])
                    },
                ),
            ],
            None,
            0.1,
        );
        hub.start().await;
        let st = hub.servers();
        assert_eq!(st[0].transport, "invalid");
        assert!(matches!(st[0].state, McpServerState::Failed { .. }));
        assert_eq!(st[1].state, McpServerState::Disabled);
        let ev = hub.take_events().await;
        assert_eq!(ev.len(), 1);
        assert!(hub.take_events().await.is_empty(), "reported once");
        assert!(hub.tools().is_empty());
        assert_eq!(
            hub.call(
                "mcp__off__x",
                Value::Null,
                &CancellationToken::new(),
                &super::super::NoElicitor("test".into()),
            )
            .await
            .unwrap_err(),
            McpCallError::UnknownTool("mcp__off__x".into())
        );
    }
}
