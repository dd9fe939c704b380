//! The tools Garuda does not run itself: a client's tools (they run in the editor) and MCP
//! servers' tools. Each handler declares the tool as the client or server described it and
//! forwards a call through the [`Workbench`], which the turn lends with the client and the
//! session's MCP servers behind it.

use futures_util::future::BoxFuture;
use serde_json::Value;

use super::handler::{Tool, Workbench};
use super::vocab::{ToolClass, ToolContext, ToolOutput};
use crate::message::ToolSpec;

/// A tool the client registered.
pub(crate) struct ClientTool {
    spec: ToolSpec,
}

impl ClientTool {
    /// The client's tool as it described it.
    pub(crate) fn new(spec: ToolSpec) -> ClientTool {
        ClientTool { spec }
    }
}

impl Tool for ClientTool {
    fn name(&self) -> &str {
        &self.spec.name
    }
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }
    fn class(&self) -> ToolClass {
        ToolClass::Other
    }
    fn describe(&self, input: &Value) -> String {
        input.to_string()
    }
    fn run<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        bench: &'a dyn Workbench,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            match bench.call_client(&self.spec.name, input, ctx) {
                Some(call) => call.await,
                None => ToolOutput::error(format!(
                    "{} is the client's tool, and no client is connected to run it",
                    self.spec.name
                )),
            }
        })
    }
}

/// A tool of an MCP server, by the name the session gives it (`mcp__SERVER__TOOL`).
pub(crate) struct McpCallTool {
    spec: ToolSpec,
    read_only: bool,
}

impl McpCallTool {
    /// The server's tool as the session names it; `read_only` when the config marks it so.
    pub(crate) fn new(spec: ToolSpec, read_only: bool) -> McpCallTool {
        McpCallTool { spec, read_only }
    }
}

impl Tool for McpCallTool {
    fn name(&self) -> &str {
        &self.spec.name
    }
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }
    // A server's tool counts as a command unless the config says it only reads.
    fn class(&self) -> ToolClass {
        if self.read_only {
            ToolClass::Read
        } else {
            ToolClass::Exec
        }
    }
    fn describe(&self, input: &Value) -> String {
        input.to_string()
    }
    fn run<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        bench: &'a dyn Workbench,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            match bench.call_mcp(&self.spec.name, input, ctx) {
                Some(call) => call.await,
                None => ToolOutput::error(format!(
                    "{}: this session has no MCP servers",
                    self.spec.name
                )),
            }
        })
    }
}
