//! The tools Garuda does not run itself: a client's tools (they run in the editor) and MCP
//! servers' tools. One handler declares such a tool as the client or server described it and
//! forwards a call through the [`Workbench`], which the turn lends with the client and the
//! session's MCP servers behind it.

use futures_util::future::BoxFuture;
use serde_json::Value;

use super::handler::{Tool, Workbench};
use super::vocab::{Remote, ToolClass, ToolContext, ToolOutput};
use crate::message::ToolSpec;

/// A tool that runs in the client or on an MCP server.
pub(crate) struct RemoteTool {
    spec: ToolSpec,
    remote: Remote,
    class: ToolClass,
}

impl RemoteTool {
    /// A tool the client registered.
    pub(crate) fn client(spec: ToolSpec) -> RemoteTool {
        RemoteTool {
            spec,
            remote: Remote::Client,
            class: ToolClass::Other,
        }
    }

    /// A tool of an MCP server, by the name the session gives it (`mcp__SERVER__TOOL`); it
    /// counts as a command unless the config marks it `read_only`.
    pub(crate) fn mcp(spec: ToolSpec, read_only: bool) -> RemoteTool {
        let class = if read_only {
            ToolClass::Read
        } else {
            ToolClass::Exec
        };
        RemoteTool {
            spec,
            remote: Remote::Mcp,
            class,
        }
    }
}

impl Tool for RemoteTool {
    fn name(&self) -> &str {
        &self.spec.name
    }
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }
    fn class(&self) -> ToolClass {
        self.class
    }
    fn run<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        bench: &'a dyn Workbench,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            if let Some(call) = bench.call_remote(self.remote, &self.spec.name, input, ctx) {
                return call.await;
            }
            let name = &self.spec.name;
            ToolOutput::error(match self.remote {
                Remote::Client => {
                    format!("{name} is the client's tool, and no client is connected to run it")
                }
                Remote::Mcp => format!("{name}: this session has no MCP servers"),
            })
        })
    }
}
