//! MCP server configuration: `[mcp_servers.NAME]` in the user's config, and ACP's
//! `mcpServers` in `session/new` and `session/load`.
//!
//! Only the user's config (and the ACP client, which the user started) may name servers: a
//! workspace's own `.garuda/config.toml` must not start processes, so it gets no key here.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Default time a server gets to start, answer `initialize` and list its tools.
pub const DEFAULT_STARTUP_TIMEOUT_MS: u64 = 30_000;
/// Default time one `tools/call` may take (the same as the bash tool's default).
pub const DEFAULT_CALL_TIMEOUT_MS: u64 = 120_000;
/// Default share of the context window MCP tool definitions may take before they are deferred.
pub const DEFAULT_DEFER_SHARE: f64 = 0.10;

/// One MCP server: a command to start (stdio) or a URL (Streamable HTTP).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "snake_case", deny_unknown_fields)]
pub struct McpServerConfig {
    /// Program to start for a stdio server (looked up on `PATH`).
    pub command: Option<String>,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables added to the child's environment (which otherwise holds only a safe base set).
    pub env: BTreeMap<String, String>,
    /// Working directory of the child; the session's workspace root when unset.
    pub cwd: Option<PathBuf>,
    /// Streamable HTTP endpoint, e.g. `https://example.com/mcp`.
    pub url: Option<String>,
    /// Environment variable holding a bearer token for `url` (sent as `Authorization: Bearer`).
    pub bearer_token_env: Option<String>,
    /// Extra HTTP headers for `url`, sent as given (ACP clients pass headers this way).
    pub headers: BTreeMap<String, String>,
    /// OAuth sign-in settings for `url` (`[mcp_servers.NAME.oauth]`); a server that answers
    /// 401 with a Bearer challenge is signed in to without any.
    pub oauth: crate::mcp::oauth::OAuthConfig,
    /// Milliseconds from start to a listed tool set before the server counts as failed.
    pub startup_timeout_ms: u64,
    /// Milliseconds one tool call may take before it is cancelled.
    pub call_timeout_ms: u64,
    /// A disabled server is listed but never started.
    pub enabled: bool,
    /// Every tool of this server only reads (no approval); otherwise MCP tools count as commands.
    pub read_only: bool,
    /// Tools of this server (by their MCP name) that only read.
    pub tools_read_only: Vec<String>,
}

impl Default for McpServerConfig {
    fn default() -> Self {
        McpServerConfig {
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            url: None,
            bearer_token_env: None,
            headers: BTreeMap::new(),
            oauth: crate::mcp::oauth::OAuthConfig::default(),
            startup_timeout_ms: DEFAULT_STARTUP_TIMEOUT_MS,
            call_timeout_ms: DEFAULT_CALL_TIMEOUT_MS,
            enabled: true,
            read_only: false,
            tools_read_only: Vec::new(),
        }
    }
}

/// Settings for MCP as a whole (`[mcp]`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "snake_case", deny_unknown_fields)]
pub struct McpSettings {
    /// Share of the context window MCP tool definitions may take before they are deferred
    /// behind `mcp_tool_search` (0.10 = 10 %).
    pub defer_share: f64,
}

impl Default for McpSettings {
    fn default() -> Self {
        McpSettings {
            defer_share: DEFAULT_DEFER_SHARE,
        }
    }
}

/// A server entry that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpConfigError {
    /// Neither `command` nor `url`, or both.
    #[error(
        "MCP server `{server}`: set exactly one of `command` (stdio) or `url` (Streamable HTTP)"
    )]
    Transport {
        /// The server's name.
        server: String,
    },
    /// A key that only makes sense for the other transport.
    #[error("MCP server `{server}`: `{key}` applies only to {applies_to} servers")]
    Misplaced {
        /// The server's name.
        server: String,
        /// The key.
        key: &'static str,
        /// `stdio` or `url`.
        applies_to: &'static str,
    },
    /// The URL is not http or https.
    #[error("MCP server `{server}`: url must start with http:// or https://, got `{url}`")]
    Url {
        /// The server's name.
        server: String,
        /// What was given.
        url: String,
    },
    /// A server name that is empty.
    #[error("MCP server names must not be empty")]
    EmptyName,
    /// An ACP `mcpServers` entry that is not understood.
    #[error("ACP mcpServers entry: {0}")]
    Acp(String),
}

/// How a validated server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// A child process speaking newline-delimited JSON-RPC on stdin/stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
    },
    /// A Streamable HTTP endpoint.
    Http {
        /// The endpoint.
        url: String,
    },
}

impl McpTransport {
    /// `stdio` or `http`, for status listings.
    pub fn kind(&self) -> &'static str {
        match self {
            McpTransport::Stdio { .. } => "stdio",
            McpTransport::Http { .. } => "http",
        }
    }
}

impl McpServerConfig {
    /// A stdio server entry with default timeouts.
    pub fn stdio(command: impl Into<String>, args: &[&str]) -> Self {
        McpServerConfig {
            command: Some(command.into()),
            args: args.iter().map(|a| a.to_string()).collect(),
            ..McpServerConfig::default()
        }
    }

    /// A Streamable HTTP server entry with default timeouts.
    pub fn http(url: impl Into<String>) -> Self {
        McpServerConfig {
            url: Some(url.into()),
            ..McpServerConfig::default()
        }
    }

    /// Checks the entry and says how the server is reached.
    pub fn transport(&self, server: &str) -> Result<McpTransport, McpConfigError> {
        if server.is_empty() {
            return Err(McpConfigError::EmptyName);
        }
        let misplaced = |key, applies_to| McpConfigError::Misplaced {
            server: server.to_string(),
            key,
            applies_to,
        };
        match (&self.command, &self.url) {
            (Some(command), None) if !command.trim().is_empty() => {
                if self.bearer_token_env.is_some() {
                    return Err(misplaced("bearer_token_env", "url"));
                }
                if !self.headers.is_empty() {
                    return Err(misplaced("headers", "url"));
                }
                if self.oauth != crate::mcp::oauth::OAuthConfig::default() {
                    return Err(misplaced("oauth", "url"));
                }
                Ok(McpTransport::Stdio {
                    command: command.clone(),
                    args: self.args.clone(),
                })
            }
            (None, Some(url)) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(McpConfigError::Url {
                        server: server.to_string(),
                        url: url.clone(),
                    });
                }
                if !self.args.is_empty() {
                    return Err(misplaced("args", "stdio"));
                }
                if !self.env.is_empty() {
                    return Err(misplaced("env", "stdio"));
                }
                if self.cwd.is_some() {
                    return Err(misplaced("cwd", "stdio"));
                }
                Ok(McpTransport::Http { url: url.clone() })
            }
            _ => Err(McpConfigError::Transport {
                server: server.to_string(),
            }),
        }
    }

    /// True when calls to `tool` (its MCP name) need no approval: the server or the tool is
    /// marked read-only. The servers' own `readOnlyHint` annotations are not trusted for this.
    pub fn tool_is_read_only(&self, tool: &str) -> bool {
        self.read_only || self.tools_read_only.iter().any(|t| t == tool)
    }
}

/// One `{name, value}` pair as ACP sends env variables and headers.
#[derive(Debug, Deserialize)]
struct AcpPair {
    name: String,
    value: String,
}

/// ACP's `McpServer` union: stdio entries have no `type`; http and sse entries do.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AcpServer {
    name: String,
    #[serde(rename = "type")]
    kind: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: Vec<AcpPair>,
    url: Option<String>,
    #[serde(default)]
    headers: Vec<AcpPair>,
}

/// Converts ACP's `mcpServers` (from `session/new` or `session/load`) into named entries.
///
/// Stdio entries map to `command`/`args`/`env`, `http` entries to `url`/`headers`; `sse`
/// (deprecated in MCP) is refused. Entries get the default timeouts and are not read-only.
pub fn from_acp(
    servers: &serde_json::Value,
) -> Result<Vec<(String, McpServerConfig)>, McpConfigError> {
    let list: Vec<AcpServer> = serde_json::from_value(servers.clone())
        .map_err(|e| McpConfigError::Acp(format!("cannot read mcpServers: {e}")))?;
    let mut out = Vec::with_capacity(list.len());
    for s in list {
        let cfg = match s.kind.as_deref() {
            None | Some("stdio") => McpServerConfig {
                command: s.command,
                args: s.args,
                env: s.env.into_iter().map(|p| (p.name, p.value)).collect(),
                ..McpServerConfig::default()
            },
            Some("http") => McpServerConfig {
                url: s.url,
                headers: s.headers.into_iter().map(|p| (p.name, p.value)).collect(),
                ..McpServerConfig::default()
            },
            Some(other) => {
                return Err(McpConfigError::Acp(format!(
                    "server `{}`: transport `{other}` is not supported (stdio and http are)",
                    s.name
                )));
            }
        };
        cfg.transport(&s.name)?;
        out.push((s.name, cfg));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn toml_keys_are_snake_case_with_defaults() {
        let text = r#"
            [everything]
            command = "npx"
            args = ["-y", "@modelcontextprotocol/server-everything"]
            env = { DEBUG = "1" }
            tools_read_only = ["echo"]

            [remote]
            url = "https://example.com/mcp"
            bearer_token_env = "REMOTE_TOKEN"
            startup_timeout_ms = 5000
            call_timeout_ms = 10000
            enabled = false
            read_only = true
        "#;
        let servers: BTreeMap<String, McpServerConfig> = toml::from_str(text).unwrap();
        let e = &servers["everything"];
        assert_eq!(e.startup_timeout_ms, DEFAULT_STARTUP_TIMEOUT_MS);
        assert!(e.enabled);
        assert_eq!(
            e.transport("everything").unwrap(),
            McpTransport::Stdio {
                command: "npx".into(),
                args: vec![
                    "-y".into(),
                    "@modelcontextprotocol/server-everything".into()
                ]
            }
        );
        assert!(e.tool_is_read_only("echo"));
        assert!(!e.tool_is_read_only("get-sum"));
        let r = &servers["remote"];
        assert_eq!(r.call_timeout_ms, 10_000);
        assert!(!r.enabled);
        assert!(r.tool_is_read_only("anything"));
        assert_eq!(r.transport("remote").unwrap().kind(), "http");
    }

    #[test]
    fn unknown_keys_and_bad_entries_are_errors() {
        assert!(toml::from_str::<McpServerConfig>("comand = \"x\"").is_err());
        let both = McpServerConfig {
            command: Some("x".into()),
            url: Some("http://h".into()),
            ..McpServerConfig::default()
        };
        assert!(matches!(
            both.transport("s"),
            Err(McpConfigError::Transport { .. })
        ));
        assert!(matches!(
            McpServerConfig::default().transport("s"),
            Err(McpConfigError::Transport { .. })
        ));
        assert!(matches!(
            McpServerConfig::http("ftp://h").transport("s"),
            Err(McpConfigError::Url { .. })
        ));
        let token_on_stdio = McpServerConfig {
            bearer_token_env: Some("T".into()),
            ..McpServerConfig::stdio("x", &[])
        };
        assert_eq!(
            token_on_stdio.transport("s").unwrap_err().to_string(),
            "MCP server `s`: `bearer_token_env` applies only to url servers"
        );
        assert!(matches!(
            McpServerConfig::stdio("x", &[]).transport(""),
            Err(McpConfigError::EmptyName)
        ));
    }

    #[test]
    fn acp_servers_map_to_entries() {
        let v = json!([
            {"name": "fs", "command": "/bin/mcp-fs", "args": ["--root", "/w"],
             "env": [{"name": "A", "value": "1"}]},
            {"type": "http", "name": "web", "url": "https://h/mcp",
             "headers": [{"name": "Authorization", "value": "Bearer t"}]}
        ]);
        let got = from_acp(&v).unwrap();
        assert_eq!(got[0].0, "fs");
        assert_eq!(got[0].1.command.as_deref(), Some("/bin/mcp-fs"));
        assert_eq!(got[0].1.env["A"], "1");
        assert_eq!(got[1].1.url.as_deref(), Some("https://h/mcp"));
        assert_eq!(got[1].1.headers["Authorization"], "Bearer t");
        let sse = json!([{"type": "sse", "name": "old", "url": "http://h/sse", "headers": []}]);
        assert!(
            from_acp(&sse)
                .unwrap_err()
                .to_string()
                .contains("not supported")
        );
        assert!(from_acp(&json!({"name": "x"})).is_err());
    }
}
