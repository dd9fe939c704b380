//! `mcp_tool_search`: answers from the MCP definitions a session defers (left out of its
//! requests to save room), so the model can load one before calling it by name. The
//! registry builds it with the definitions its own session defers.

use futures_util::future::BoxFuture;
use serde_json::Value;

use crate::message::ToolSpec;
use crate::tools::handler::{Tool, Workbench};
use crate::tools::vocab::{ToolClass, ToolContext, ToolOutput};

/// `mcp_tool_search` over a fixed set of deferred definitions.
pub(crate) struct McpSearchTool {
    spec: ToolSpec,
    deferred: Vec<ToolSpec>,
}

impl McpSearchTool {
    /// The tool `spec` (its listing names the deferred tools) searching `deferred`.
    pub(crate) fn new(spec: ToolSpec, deferred: Vec<ToolSpec>) -> McpSearchTool {
        McpSearchTool { spec, deferred }
    }
}

impl Tool for McpSearchTool {
    fn name(&self) -> &str {
        &self.spec.name
    }
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }
    fn class(&self) -> ToolClass {
        ToolClass::Search
    }
    fn describe(&self, input: &Value) -> String {
        input.to_string()
    }
    fn run<'a>(
        &'a self,
        input: Value,
        _ctx: &'a ToolContext,
        _bench: &'a dyn Workbench,
    ) -> BoxFuture<'a, ToolOutput> {
        let out = match crate::mcp::defer::search(&self.deferred, &input) {
            Ok(t) => ToolOutput::ok(t),
            Err(e) => ToolOutput::error(e),
        };
        Box::pin(async move { out })
    }
}
