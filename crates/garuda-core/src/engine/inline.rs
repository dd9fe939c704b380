//! What a request may do on the read loop: only in-memory state, never disk.

use std::sync::Arc;

use super::{Engine, PromptOverrides, WorkspaceSummary};
use crate::prompt::Assembled;
use crate::workspace::WorkspaceError;

/// A view of the engine that reaches only memory: workspaces already open, sessions already
/// live, prompts already assembled. Fronts answer read-loop requests through it, so those
/// cannot stall the loop on a disk read by construction.
pub struct Inline<'a> {
    engine: &'a Engine,
}

impl Engine {
    /// The in-memory view of this engine.
    pub fn inline(&self) -> Inline<'_> {
        Inline { engine: self }
    }
}

impl Inline<'_> {
    /// The open workspaces.
    pub fn workspaces(&self) -> Vec<WorkspaceSummary> {
        self.engine
            .workspaces
            .list()
            .iter()
            .map(|w| self.engine.info(w))
            .collect()
    }

    /// Closes a workspace; true when it was open.
    pub fn close_workspace(&self, workspace_id: &str) -> bool {
        self.engine.workspaces.close(workspace_id)
    }

    /// Cancels what a live session is running; false when it runs nothing or is not live
    /// (a session on disk runs nothing).
    pub fn cancel(&self, session_id: &str) -> bool {
        self.engine
            .sessions
            .live(session_id)
            .is_some_and(|s| s.cancel())
    }

    /// Takes a live session out of memory (its turn cancelled, its SessionEnd hooks started);
    /// false when it was not live. Its transcript stays.
    pub fn close_session(&self, session_id: &str) -> bool {
        self.engine.close_session(session_id)
    }

    /// Switches a live session's approval policy; false when the session is not live.
    pub fn set_policy(&self, session_id: &str, policy: crate::tools::Policy) -> bool {
        match self.engine.sessions.live(session_id) {
            Some(s) => {
                s.set_policy(policy);
                true
            }
            None => false,
        }
    }

    /// The MCP servers of a live session (an empty list when it has none); None when the
    /// session is not live.
    pub fn mcp_servers(&self, session_id: &str) -> Option<Vec<crate::mcp::McpServerStatus>> {
        let live = self.engine.sessions.live(session_id)?;
        Some(
            live.setup()
                .mcp
                .as_ref()
                .map(crate::mcp::McpHub::servers)
                .unwrap_or_default(),
        )
    }

    /// The config file's problems as last read.
    pub fn config_problems(&self) -> Vec<crate::config::ConfigProblem> {
        self.engine.config_problems()
    }

    /// The assembled prompt when it is already cached; `Ok(None)` when it must be read.
    pub fn assemble_cached(
        &self,
        workspace_id: &str,
        overrides: PromptOverrides,
    ) -> Result<Option<Arc<Assembled>>, WorkspaceError> {
        self.engine.assemble_cached(workspace_id, overrides)
    }
}
