//! MCP (Model Context Protocol) client: the servers of a session and their tools.
//!
//! - [`config`]: `[mcp_servers.NAME]` entries and ACP's `mcpServers`.
//! - [`hub`]: [`McpHub`] starts a session's servers (stdio children and Streamable HTTP),
//!   keeps their status, fixes the tool list before the first request, calls tools with timeouts and
//!   cancellation, records `tools/list_changed` until asked, and stops the servers.
//! - [`naming`]: `mcp__SERVER__TOOL` names within the providers' rules.
//! - [`convert`]: tool results into text and image blocks the providers accept.
//! - [`defer`]: deferred definitions behind `mcp_tool_search` when they would take more than
//!   a share of the window.
//! - [`elicit`]: a server's requests for the person's input, passed to the turn's client.
//! - [`http`]: the Streamable HTTP client on Garuda's reqwest.
//! - [`oauth`]: signing in to servers that ask for it (OAuth 2.1, the MCP authorization spec).
//!
//! Built on the official Rust SDK, `rmcp`, pinned to one exact version in Cargo.toml.

#![warn(missing_docs)]

pub mod config;
pub mod convert;
pub mod defer;
pub mod elicit;
pub mod http;
pub mod hub;
pub mod naming;
pub mod oauth;

pub use config::{McpConfigError, McpServerConfig, McpSettings, McpTransport, from_acp};
pub use convert::{McpToolResult, convert_result};
pub use defer::{DeferPlan, SEARCH_TOOL_NAME};
pub use elicit::{ElicitationAnswer, ElicitationMode, ElicitationRequest, Elicitor, NoElicitor};
pub use hub::{
    McpCallError, McpEvent, McpHub, McpInstructions, McpServerState, McpServerStatus, McpTool,
};

use std::sync::OnceLock;

/// The runtime every MCP connection lives on: one worker thread of its own, so a server's
/// traffic never waits for (or stalls) the protocol's read loop, and a session can start its
/// servers from any thread, in or out of another runtime. Never dropped (a static).
fn runtime() -> Option<&'static tokio::runtime::Runtime> {
    static RT: OnceLock<Option<tokio::runtime::Runtime>> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("garuda-mcp")
            .enable_all()
            .build()
            .map_err(
                |e| tracing::error!(target: "garuda::mcp", "cannot start the MCP runtime: {e}"),
            )
            .ok()
    })
    .as_ref()
}

impl McpHub {
    /// Starts the servers on the MCP runtime and blocks the calling thread until each is
    /// ready or failed (within its startup timeout). Safe on any thread, including one that
    /// runs another tokio runtime's `block_on`: the work happens on the MCP runtime.
    pub fn start_blocking(&self) {
        let Some(rt) = runtime() else {
            self.fail_all("the MCP runtime could not be started");
            return;
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let hub = self.clone();
        rt.spawn(async move {
            hub.start().await;
            let _ = tx.send(());
        });
        if rx.recv().is_err() {
            self.fail_all("the MCP start task ended early");
        }
    }

    /// Starts the servers on the MCP runtime and returns at once; [`McpHub::wait_started`]
    /// and [`McpHub::when_started`] tell when they are up or failed, and the session fixes
    /// its list with [`McpHub::settle`] before its first model request.
    pub fn start_background(&self) {
        let Some(rt) = runtime() else {
            self.fail_all("the MCP runtime could not be started");
            return;
        };
        let hub = self.clone();
        rt.spawn(async move { hub.start_servers().await });
    }
}
