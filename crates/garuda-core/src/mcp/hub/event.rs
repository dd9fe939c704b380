//! What the hub tells the session once: failed starts, stopped servers, late servers and
//! changed tool lists.

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
