//! The MCP servers of one session: started together, listed in a fixed order, called with
//! a timeout, watched, and stopped with the session.
//!
//! This file is the hub's API; the jobs behind it live beside it, and none of them imports
//! this file: `connect.rs` starts a server, `child.rs` runs a stdio server's process,
//! `handler.rs` is our side of a connection and relays elicitations to the call in flight,
//! `tasks.rs` drives calls a server runs as tasks, `server.rs` holds what is known about one
//! server, `event.rs` what the session hears once.
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

mod child;
mod connect;
mod event;
mod handler;
mod server;
mod tasks;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::ServiceError;
use rmcp::model::{CallToolRequestParams, CallToolResult, Tool};
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::config::{McpServerConfig, McpTransport};
use super::convert::{McpToolResult, convert_result};
use super::elicit::{Elicitor, Relay};
use super::naming::assign_names;
use crate::message::ToolSpec;
use child::TERM_GRACE;
use connect::start_server;
use handler::{Stopped, relay_during};
use server::{Server, Service, expiry, lock};

pub use child::BASE_ENV;
pub use event::McpEvent;
pub use server::McpServerState;

/// What a wait for the starts allows beyond the longest startup timeout: a failed start
/// waits up to 600 ms more for its exit status and stderr.
const START_GRACE: Duration = Duration::from_secs(2);

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

/// A server's `instructions` from its `initialize` result: how it asks to be used.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct McpInstructions {
    /// The server's name.
    pub server: String,
    /// Its text, as the server sent it.
    pub text: String,
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

/// What every clone of a hub shares.
struct Inner {
    servers: Vec<Arc<Server>>,
    cwd: Option<PathBuf>,
    defer_share: f64,
    snapshot: Mutex<Arc<Vec<McpTool>>>,
    /// The servers' instructions the session's system prompt holds (fixed with the tools).
    in_prompt: Mutex<Vec<McpInstructions>>,
    /// The servers' instructions the model last heard: the prompt's, or a later note's.
    told: Mutex<Vec<McpInstructions>>,
    events: Arc<Mutex<Vec<McpEvent>>>,
    relay: Arc<Relay>,
    /// How its servers sign in.
    auth: crate::mcp::oauth::AuthContext,
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
        McpHub::with_auth(
            servers,
            cwd,
            defer_share,
            crate::mcp::oauth::AuthContext::default(),
        )
    }

    /// [`McpHub::new`] with the sign-in door and token store its servers use.
    pub fn with_auth(
        servers: impl IntoIterator<Item = (String, McpServerConfig)>,
        cwd: Option<PathBuf>,
        defer_share: f64,
        auth: crate::mcp::oauth::AuthContext,
    ) -> McpHub {
        let mut list: Vec<(String, McpServerConfig)> = servers.into_iter().collect();
        list.sort_by(|a, b| a.0.cmp(&b.0));
        // A name given twice (user config and ACP): the later entry wins.
        list.reverse();
        list.dedup_by(|a, b| a.0 == b.0);
        list.reverse();
        let servers = list
            .into_iter()
            .map(|(name, config)| Arc::new(Server::new(name, config)))
            .collect();
        McpHub {
            inner: Arc::new(Inner {
                servers,
                cwd,
                defer_share,
                snapshot: Mutex::new(Arc::new(Vec::new())),
                in_prompt: Mutex::new(Vec::new()),
                told: Mutex::new(Vec::new()),
                events: Arc::new(Mutex::new(Vec::new())),
                relay: Relay::new(),
                auth,
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
            let auth = self.inner.auth.clone();
            match s.state() {
                McpServerState::Starting => Some(start_server(
                    s.clone(),
                    cwd,
                    events,
                    relay,
                    auth,
                    settled.clone(),
                )),
                McpServerState::Failed { reason } => {
                    // A config entry that cannot be used is reported like a failed start.
                    s.report_failed(reason, &self.inner.events);
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
        self.install_instructions(self.current_instructions());
        true
    }

    /// The instructions of the servers ready now, in name order (blank ones left out).
    pub fn current_instructions(&self) -> Vec<McpInstructions> {
        self.inner
            .servers
            .iter()
            .filter(|s| s.state() == McpServerState::Ready)
            .filter_map(|s| {
                let info = s.peer()?.peer_info()?;
                let text = info.instructions.as_deref()?;
                (!text.trim().is_empty()).then(|| McpInstructions {
                    server: s.name.clone(),
                    text: text.to_string(),
                })
            })
            .collect()
    }

    /// The servers' instructions the session's system prompt holds: fixed by
    /// [`Self::settle`], changed only by [`Self::install_instructions`] (a compaction).
    pub fn prompt_instructions(&self) -> Vec<McpInstructions> {
        lock(&self.inner.in_prompt).clone()
    }

    /// The servers' instructions the model last heard: the prompt's, or those of the note
    /// that re-announced them after the servers changed.
    pub fn heard_instructions(&self) -> Vec<McpInstructions> {
        lock(&self.inner.told).clone()
    }

    /// Puts `list` in the system prompt (a compaction rebuilt it): the model has it now.
    pub fn install_instructions(&self, list: Vec<McpInstructions>) {
        *lock(&self.inner.told) = list.clone();
        *lock(&self.inner.in_prompt) = list;
    }

    /// The instructions in force now when they differ from what the model last heard (a
    /// server started late, stopped or left), taken as heard; None when nothing changed.
    pub fn take_instruction_change(&self) -> Option<Vec<McpInstructions>> {
        if !self.is_settled() {
            return None;
        }
        let now = self.current_instructions();
        let mut told = lock(&self.inner.told);
        if *told == now {
            return None;
        }
        *told = now.clone();
        Some(now)
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
                s.report_failed(reason.to_string(), &self.inner.events);
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
        let (tool, server, service) = self.target(name)?;
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
        let call = self.send(server, &service, params, &task);
        let relay = &self.inner.relay;
        let limit = Duration::from_millis(ms);
        let outcome = relay_during(call, relay, elicitor, cancel, limit).await;
        tracing::debug!(target: "garuda::mcp", server = %server.name, tool = %tool.tool,
            ms = started.elapsed().as_millis() as u64, "tools/call");
        let pending_task = lock(&task).take();
        match outcome {
            Err(stopped) => {
                if let Some(id) = pending_task {
                    tasks::cancel_task(service.peer(), &server.name, id).await;
                }
                Err(match stopped {
                    Stopped::Timeout => McpCallError::Timeout {
                        server: server.name.clone(),
                        tool: tool.tool.clone(),
                        ms,
                    },
                    Stopped::Cancelled => McpCallError::Cancelled,
                })
            }
            Ok(Ok(result)) => Ok(convert_result(&server.name, &tool.tool, &result)),
            Ok(Err(e)) => Err(self.call_failed(server, &tool, e)),
        }
    }

    /// The tool the model calls `name`, its server, and the server's connection if it is
    /// ready to take the call.
    fn target(&self, name: &str) -> Result<(McpTool, &Server, Arc<Service>), McpCallError> {
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
        Ok((tool, server, service))
    }

    /// Sends `tools/call`: as a task when the server offers tasks, else as a plain request.
    async fn send(
        &self,
        server: &Server,
        service: &Service,
        params: CallToolRequestParams,
        task: &Mutex<Option<String>>,
    ) -> Result<CallToolResult, ServiceError> {
        let tasks = service
            .peer()
            .peer_info()
            .is_some_and(|i| i.capabilities.supports_tasks());
        if tasks {
            let relay = &self.inner.relay;
            tasks::call_with_tasks(service.peer(), &server.name, relay, params, task).await
        } else {
            service.call_tool(params).await
        }
    }

    /// The error for a call the server did not complete: a lost connection makes the server
    /// unavailable (and marks it stopped), anything else is the server's failure.
    fn call_failed(&self, server: &Server, tool: &McpTool, e: ServiceError) -> McpCallError {
        if self.note_call_error(server, &e) {
            return McpCallError::Unavailable {
                server: server.name.clone(),
                reason: server_lost(&e),
            };
        }
        McpCallError::Failed {
            server: server.name.clone(),
            tool: tool.tool.clone(),
            message: match e {
                ServiceError::McpError(data) => data.message.to_string(),
                other => other.to_string(),
            },
        }
    }

    /// Marks the server stopped when `e` means the connection is gone; true then.
    fn note_call_error(&self, server: &Server, e: &ServiceError) -> bool {
        if matches!(
            e,
            ServiceError::TransportClosed | ServiceError::TransportSend(_)
        ) {
            let mut reason = server_lost(e);
            if let Some(tail) = server.stderr.text() {
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

/// Words for a lost connection.
fn server_lost(e: &ServiceError) -> String {
    match e {
        ServiceError::TransportClosed => "the connection closed (the server exited?)".into(),
        other => format!("the connection failed: {other}"),
    }
}
