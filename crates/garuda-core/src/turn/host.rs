//! The host of a turn: the front that streams events to a client and relays its answers.

use std::path::PathBuf;

use futures_util::future::BoxFuture;
use serde_json::Value;

use super::events::{AgentMark, PermissionAnswer, PermissionRequest, TurnEvent};

use crate::mcp::{ElicitationAnswer, ElicitationRequest, Elicitor};
pub use crate::tools::{ClientToolResult, CommandRun};

/// The turn loop's view of its client; the native and ACP fronts implement it.
pub trait TurnHost: Send + Sync {
    /// Streams one event, in order.
    fn event(&self, session_id: &str, event: TurnEvent);
    /// Asks the person to approve a tool call; errors and timeouts count as `Reject`.
    fn ask_permission(&self, req: PermissionRequest) -> BoxFuture<'static, PermissionAnswer>;
    /// Streams one event of an agent's sub-session `agent`, relayed into the turn of
    /// `session_id` (its caller's, at the top); hosts that cannot show them drop them.
    fn agent_event(&self, _session_id: &str, _agent: &AgentMark, _event: TurnEvent) {}
    /// An agent's sub-session `agent` starts on `task`, before any of its events (relayed
    /// into the turn of `session_id`, as [`Self::agent_event`]).
    fn agent_started(&self, _session_id: &str, _agent: &AgentMark, _task: &str) {}
    /// An agent's sub-session ended with `report` (what its call answers; `failed` when the
    /// call is an error), after all of its events.
    fn agent_finished(&self, _session_id: &str, _agent: &AgentMark, _report: &str, _failed: bool) {}
    /// Runs a tool the client registered (for an agent's sub-session when `agent` says
    /// which); hosts without client tools answer with an error.
    fn call_client_tool(
        &self,
        _session_id: &str,
        name: &str,
        _input: Value,
        _agent: Option<AgentMark>,
    ) -> BoxFuture<'static, ClientToolResult> {
        let content = format!("client tool {name} is not available here");
        Box::pin(async move {
            ClientToolResult {
                content,
                is_error: true,
            }
        })
    }
    /// When the client edits buffers itself (`workspace/applyEdit`): replaces the whole
    /// text of `path` and answers whether the edit was applied. `None` (the default): Garuda
    /// writes the file itself.
    fn apply_edit(
        &self,
        _path: PathBuf,
        _old_text: Option<String>,
        _new_text: String,
    ) -> Option<BoxFuture<'static, Result<(), String>>> {
        None
    }
    /// When the client holds the text of open files (ACP `fs/read_text_file`): the text of
    /// `path` as the editor has it, unsaved changes included. `None` (the default): only the
    /// file on disk counts. Called only for paths Garuda's own read already accepted.
    fn read_text(&self, _path: PathBuf) -> Option<BoxFuture<'static, Result<String, String>>> {
        None
    }
    /// A tool call was approved (or needed no approval) and starts running now.
    fn tool_running(&self, _session_id: &str, _tool_call_id: &str) {}
    /// When the client runs commands itself (ACP `terminal/*`): runs `bash` there and answers
    /// its output for the model. `None` (the default): Garuda runs it in its own shell.
    fn run_command(
        &self,
        _session_id: &str,
        _run: CommandRun,
    ) -> Option<BoxFuture<'static, ClientToolResult>> {
        None
    }
    /// Asks the client's language servers about the code for a tool call of `session_id`
    /// (native `code/findSymbol` / `code/findReferences`, when the client declared
    /// `codeSymbols`). `None` (the default): the client cannot; `Err`: it gave nothing.
    fn client_symbols(
        &self,
        _session_id: &str,
        _query: crate::tools::SymbolQuery,
    ) -> Option<BoxFuture<'static, Result<crate::tools::SymbolAnswer, String>>> {
        None
    }
    /// Reports progress of long work under `token` (the native front sends LSP
    /// `$/progress`); hosts without progress ignore it.
    fn progress(&self, _token: &str, _progress: Progress) {}
    /// Asks the person for what an MCP server requested during one of its tool calls
    /// (elicitation). Hosts whose client cannot show it answer `Unavailable` with the reason,
    /// and the server gets a decline.
    fn elicit(
        &self,
        _session_id: &str,
        _request: ElicitationRequest,
    ) -> BoxFuture<'static, ElicitationAnswer> {
        Box::pin(async {
            ElicitationAnswer::Unavailable(
                "this Garuda client cannot show MCP elicitation requests".into(),
            )
        })
    }
}

/// The host as the MCP hub's [`Elicitor`] for one session's tool call.
pub(crate) struct HostElicitor<'a> {
    /// The turn's host.
    pub host: &'a dyn TurnHost,
    /// The session the call belongs to.
    pub session_id: &'a str,
    /// The model's tool call being run.
    pub tool_call_id: &'a str,
}

impl Elicitor for HostElicitor<'_> {
    fn elicit(&self, mut request: ElicitationRequest) -> BoxFuture<'static, ElicitationAnswer> {
        request.tool_call_id = Some(self.tool_call_id.to_string());
        self.host.elicit(self.session_id, request)
    }
}

/// One step of long work's progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// The work began.
    Begin {
        /// What it is.
        title: String,
        /// True when the client may cancel it.
        cancellable: bool,
    },
    /// A step of it.
    Report {
        /// What happened.
        message: String,
    },
    /// It ended.
    End {
        /// How.
        message: String,
    },
}

/// A host that streams nowhere, approves nothing and has no client tools (tests, exec).
pub struct NullHost;

impl TurnHost for NullHost {
    fn event(&self, _: &str, _: TurnEvent) {}
    fn ask_permission(&self, _: PermissionRequest) -> BoxFuture<'static, PermissionAnswer> {
        Box::pin(async { PermissionAnswer::Reject })
    }
}
