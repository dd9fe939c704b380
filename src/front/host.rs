//! The native front's turn host: events become `turn/update`, approvals `permission/request`.

use std::path::PathBuf;

use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use crate::rpc::Client;
use garuda_core::mcp::{ElicitationAnswer, ElicitationMode, ElicitationRequest};
use garuda_core::turn::{
    AgentMark, ClientToolResult, PermissionAnswer, PermissionRequest, Progress, TurnEvent, TurnHost,
};
use garuda_protocol::methods::{ClientMethod, client};
use garuda_protocol::{
    ApplyEditParams, ApplyEditResult, ElicitAction, ElicitMode, ElicitParams, ElicitResult,
    Position, Range, TextEdit, ToolCallParams, ToolCallResult, TurnUpdate, WorkspaceEdit,
};

/// Relays a turn to a JSON-RPC client.
pub struct RpcHost {
    /// The connection.
    pub client: Client,
    /// The client advertised `workspace.applyEdit`.
    pub apply_edit: bool,
    /// The client advertised `experimental.garuda.elicitation` (answers `mcp/elicit`).
    pub elicitation: bool,
    /// The client declared `experimental.garuda.codeSymbols`: it answers `code/findSymbol`
    /// and `code/findReferences` from its language servers.
    pub code_symbols: bool,
    /// The client advertised `experimental.garuda.agentEvents`: it gets the stream of
    /// agents' sub-sessions (`turn/update` with `agent`).
    pub agent_events: bool,
    /// How long an approval may wait; then the request is cancelled with `$/cancelRequest`
    /// and the call is not run (reported as timed out, not as a rejection).
    pub approval_timeout: std::time::Duration,
}

/// A `file://` URI for an absolute path, percent-encoding every byte but unreserved ones and `/`.
pub fn file_uri(path: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut uri = String::from("file://");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri
}

/// Reads the client's choice: Garuda's `{optionId}` or ACP's `{outcome: {...}}`. When
/// `outcome` is present it alone decides, by ACP's rules: only `{outcome: "selected",
/// optionId}` selects; `cancelled`, any other shape, and an unknown id reject.
pub fn permission_answer(v: &Value) -> PermissionAnswer {
    if v.get("outcome").is_some() {
        return acp_permission_answer(v);
    }
    PermissionAnswer::of_option(
        v.get("optionId").and_then(Value::as_str),
        v.get("feedback").and_then(Value::as_str),
    )
}

/// Reads an ACP `session/request_permission` answer: only `{outcome: {outcome: "selected",
/// optionId}}` selects an option; anything else is a rejection.
pub fn acp_permission_answer(v: &Value) -> PermissionAnswer {
    let id = v
        .get("outcome")
        .filter(|o| o.get("outcome").and_then(Value::as_str) == Some("selected"))
        .and_then(|o| o.get("optionId"))
        .and_then(Value::as_str);
    // ACP's answer has no field for words; `_meta.feedback` carries them where a client
    // gives them.
    let feedback = v
        .get("_meta")
        .and_then(|m| m.get("feedback"))
        .and_then(Value::as_str);
    PermissionAnswer::of_option(id, feedback)
}

/// The LSP position just past the end of `text` (UTF-16 columns, as LSP requires).
fn end_position(text: &str) -> Position {
    let line = text.matches('\n').count();
    let last = text.rsplit('\n').next().unwrap_or("");
    Position {
        line: line as u32,
        character: last.encode_utf16().count() as u32,
    }
}

impl RpcHost {
    /// Sends one `turn/update`, marked with the agent whose sub-session it comes from.
    fn update(&self, session_id: &str, event: TurnEvent, agent: Option<AgentMark>) {
        let update = TurnUpdate {
            session_id: session_id.to_string(),
            event: super::wire::event_out(event),
            agent: agent.map(super::wire::agent_out),
        };
        self.client.notify(
            client::TurnUpdate::NAME,
            serde_json::to_value(update).unwrap_or(Value::Null),
        );
    }
}

impl TurnHost for RpcHost {
    fn progress(&self, token: &str, progress: Progress) {
        // LSP `WorkDoneProgress` values.
        let value = match progress {
            Progress::Begin { title, cancellable } => {
                json!({"kind": "begin", "title": title, "cancellable": cancellable})
            }
            Progress::Report { message } => json!({"kind": "report", "message": message}),
            Progress::End { message } => json!({"kind": "end", "message": message}),
        };
        self.client.notify(
            client::Progress::NAME,
            json!({"token": token, "value": value}),
        );
    }

    fn event(&self, session_id: &str, event: TurnEvent) {
        self.update(session_id, event, None);
    }

    fn agent_event(&self, session_id: &str, agent: &AgentMark, event: TurnEvent) {
        // A client that did not ask would show an agent's text as the session's own.
        if self.agent_events {
            self.update(session_id, event, Some(agent.clone()));
        }
    }

    fn ask_permission(&self, req: PermissionRequest) -> BoxFuture<'static, PermissionAnswer> {
        let client = self.client.clone();
        let timeout = self.approval_timeout;
        Box::pin(async move {
            let params =
                serde_json::to_value(super::wire::permission_out(req)).unwrap_or(Value::Null);
            match client
                .request_within(client::PermissionRequest::NAME, params, timeout)
                .await
            {
                Ok(Ok(v)) => permission_answer(&v),
                Ok(Err(e)) => {
                    tracing::info!(
                        "permission/request failed ({}); the call is not run",
                        e.message
                    );
                    PermissionAnswer::Failed
                }
                Err(crate::rpc::server::TimedOut) => {
                    tracing::info!("permission/request not answered within {timeout:?}");
                    PermissionAnswer::TimedOut
                }
            }
        })
    }

    fn call_client_tool(
        &self,
        session_id: &str,
        name: &str,
        input: Value,
        agent: Option<AgentMark>,
    ) -> BoxFuture<'static, ClientToolResult> {
        let client = self.client.clone();
        let params = ToolCallParams {
            session_id: session_id.to_string(),
            name: name.to_string(),
            input,
            agent: agent.map(super::wire::agent_out),
        };
        Box::pin(async move {
            let params = serde_json::to_value(params).unwrap_or(Value::Null);
            match client.request(client::ToolCall::NAME, params).await {
                Ok(v) => match serde_json::from_value::<ToolCallResult>(v) {
                    Ok(r) => ClientToolResult {
                        content: r.content,
                        is_error: r.is_error,
                    },
                    Err(e) => ClientToolResult {
                        content: format!("the client answered tool/call wrongly: {e}"),
                        is_error: true,
                    },
                },
                Err(e) => ClientToolResult {
                    content: format!("the client tool failed: {}", e.message),
                    is_error: true,
                },
            }
        })
    }

    fn client_symbols(
        &self,
        session_id: &str,
        query: garuda_core::tools::SymbolQuery,
    ) -> Option<BoxFuture<'static, Result<garuda_core::tools::SymbolAnswer, String>>> {
        if !self.code_symbols {
            return None;
        }
        let client = self.client.clone();
        let (method, params) = super::wire::symbol_query_out(session_id, query);
        Some(Box::pin(async move {
            let timeout = garuda_core::tools::CLIENT_SYMBOLS_TIMEOUT;
            // The same request path as `tool/call`; past the timeout the request is
            // cancelled with `$/cancelRequest` and the index answers.
            match client.request_within(method, params, timeout).await {
                Ok(Ok(v)) => super::wire::symbol_answer_in(method, v),
                Ok(Err(e)) => Err(format!("{method} failed: {}", e.message)),
                Err(crate::rpc::server::TimedOut) => {
                    Err(format!("{method} not answered within {timeout:?}"))
                }
            }
        }))
    }

    fn elicit(
        &self,
        session_id: &str,
        request: ElicitationRequest,
    ) -> BoxFuture<'static, ElicitationAnswer> {
        if !self.elicitation {
            return Box::pin(async {
                ElicitationAnswer::Unavailable(
                    "the editor did not advertise elicitation support (capabilities.experimental.garuda.elicitation)".into(),
                )
            });
        }
        let client = self.client.clone();
        let params = elicit_params(session_id, request);
        Box::pin(async move {
            let params = serde_json::to_value(params).unwrap_or(Value::Null);
            match client.request(client::Elicit::NAME, params).await {
                Ok(v) => match serde_json::from_value::<ElicitResult>(v) {
                    Ok(r) => elicit_answer(r),
                    Err(e) => ElicitationAnswer::Unavailable(format!(
                        "the editor answered mcp/elicit wrongly: {e}"
                    )),
                },
                Err(e) => ElicitationAnswer::Unavailable(format!(
                    "the editor failed mcp/elicit: {}",
                    e.message
                )),
            }
        })
    }

    fn apply_edit(
        &self,
        path: PathBuf,
        old_text: Option<String>,
        new_text: String,
    ) -> Option<BoxFuture<'static, Result<(), String>>> {
        // New files need a CreateFile operation that not every client supports; write them directly.
        let old = old_text?;
        if !self.apply_edit {
            return None;
        }
        let client = self.client.clone();
        Some(Box::pin(async move {
            let edit = TextEdit {
                range: Range {
                    start: Position {
                        line: 0,
                        character: 0,
                    },
                    end: end_position(&old),
                },
                new_text,
            };
            let params = ApplyEditParams {
                label: "garuda".into(),
                edit: WorkspaceEdit {
                    changes: [(file_uri(&path), vec![edit])].into_iter().collect(),
                },
            };
            let params = serde_json::to_value(params).unwrap_or(Value::Null);
            match client.request(client::ApplyEdit::NAME, params).await {
                Ok(v) => match serde_json::from_value::<ApplyEditResult>(v) {
                    Ok(r) if r.applied => Ok(()),
                    Ok(r) => Err(r.failure_reason.unwrap_or_else(|| "refused".into())),
                    Err(e) => Err(format!("the editor answered workspace/applyEdit with {e}")),
                },
                Err(e) => Err(e.message),
            }
        }))
    }
}

/// The `mcp/elicit` params of a request.
pub fn elicit_params(session_id: &str, request: ElicitationRequest) -> ElicitParams {
    let (mode, requested_schema, url, elicitation_id) = match request.mode {
        ElicitationMode::Form { schema } => (ElicitMode::Form, Some(schema), None, None),
        ElicitationMode::Url {
            url,
            elicitation_id,
        } => (
            ElicitMode::Url,
            None,
            Some(url),
            (!elicitation_id.is_empty()).then_some(elicitation_id),
        ),
    };
    ElicitParams {
        session_id: session_id.to_string(),
        server: request.server,
        message: request.message,
        mode,
        requested_schema,
        url,
        elicitation_id,
    }
}

/// The engine's answer from an `mcp/elicit` result.
fn elicit_answer(r: ElicitResult) -> ElicitationAnswer {
    match r.action {
        ElicitAction::Accept => ElicitationAnswer::Accept(r.content.unwrap_or_default()),
        ElicitAction::Decline => ElicitationAnswer::Decline,
        ElicitAction::Cancel => ElicitationAnswer::Cancel,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_and_positions() {
        assert_eq!(
            permission_answer(&json!({"optionId": "allow_always"})),
            PermissionAnswer::AllowAlways
        );
        assert_eq!(
            permission_answer(
                &json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}})
            ),
            PermissionAnswer::AllowOnce
        );
        assert_eq!(
            permission_answer(&json!({"outcome": {"outcome": "cancelled"}})),
            PermissionAnswer::Reject
        );
        assert_eq!(permission_answer(&json!(null)), PermissionAnswer::Reject);
        let at = |line, character| Position { line, character };
        assert_eq!(end_position("a\nbé"), at(1, 2));
        assert_eq!(end_position("x\n"), at(1, 0));
        assert_eq!(
            file_uri(std::path::Path::new("/a b/#x%.rs")),
            "file:///a%20b/%23x%25.rs"
        );
    }
}
