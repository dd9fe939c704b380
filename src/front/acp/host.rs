//! The ACP turn host: turn events become `session/update`, approvals `session/request_permission`.

use std::path::PathBuf;

use agent_client_protocol_schema::v1 as acp;
use futures_util::future::BoxFuture;
use serde_json::Value;

use super::convert;
use crate::front::permission_answer;
use crate::rpc::Client;
use crate::turn::{ClientToolResult, PermissionAnswer, PermissionRequest, TurnEvent, TurnHost};

/// Relays a turn to an ACP client.
pub struct AcpHost {
    /// The connection.
    pub client: Client,
    /// The session's context window, for `usage_update`.
    pub context_window: u64,
}

/// Sends one `session/update` notification.
pub fn send_update(client: &Client, session_id: &str, update: acp::SessionUpdate) {
    let n = acp::SessionNotification::new(session_id.to_string(), update);
    client.notify(
        "session/update",
        serde_json::to_value(n).unwrap_or(Value::Null),
    );
}

/// The `session/request_permission` params for a Garuda approval request.
pub fn permission_params(req: &PermissionRequest) -> acp::RequestPermissionRequest {
    let call = acp::ToolCallUpdate::new(
        req.tool_call_id.clone(),
        acp::ToolCallUpdateFields::new()
            .title(req.title.clone())
            .kind(convert::tool_kind(&req.tool_name))
            .status(acp::ToolCallStatus::Pending)
            .raw_input(req.input.clone()),
    );
    let options = vec![
        acp::PermissionOption::new(
            "allow_once",
            "Allow once",
            acp::PermissionOptionKind::AllowOnce,
        ),
        acp::PermissionOption::new(
            "allow_always",
            "Allow always",
            acp::PermissionOptionKind::AllowAlways,
        ),
        acp::PermissionOption::new(
            "reject_once",
            "Reject",
            acp::PermissionOptionKind::RejectOnce,
        ),
    ];
    acp::RequestPermissionRequest::new(req.session_id.clone(), call, options)
}

impl TurnHost for AcpHost {
    fn event(&self, session_id: &str, event: TurnEvent) {
        if let Some(u) = convert::event_update(event, self.context_window) {
            send_update(&self.client, session_id, u);
        }
    }

    fn ask_permission(&self, req: PermissionRequest) -> BoxFuture<'static, PermissionAnswer> {
        let client = self.client.clone();
        Box::pin(async move {
            let params = serde_json::to_value(permission_params(&req)).unwrap_or(Value::Null);
            match client.request("session/request_permission", params).await {
                // `{outcome: {outcome: "cancelled"}}` and unknown ids count as a rejection.
                Ok(v) => permission_answer(&v),
                Err(e) => {
                    tracing::info!(
                        "session/request_permission failed ({}); counted as a rejection",
                        e.message
                    );
                    PermissionAnswer::Reject
                }
            }
        })
    }

    fn call_client_tool(
        &self,
        _: &str,
        name: &str,
        _: Value,
    ) -> BoxFuture<'static, ClientToolResult> {
        // ACP has no client-registered tools; the engine never offers any to ACP sessions.
        let content = format!("client tool {name} is not available over ACP");
        Box::pin(async move {
            ClientToolResult {
                content,
                is_error: true,
            }
        })
    }

    fn apply_edit(
        &self,
        _: PathBuf,
        _: Option<String>,
        _: String,
    ) -> Option<BoxFuture<'static, Result<(), String>>> {
        // Garuda writes files itself; ACP's fs/write_text_file is not used yet.
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn permission_request_shape() {
        let req = PermissionRequest {
            session_id: "s".into(),
            tool_call_id: "t".into(),
            tool_name: "bash".into(),
            title: "bash: ls".into(),
            input: json!({"command": "ls"}),
            options: PermissionRequest::standard_options(),
        };
        let v = serde_json::to_value(permission_params(&req)).unwrap();
        assert_eq!(v["sessionId"], "s");
        assert_eq!(v["toolCall"]["toolCallId"], "t");
        assert_eq!(v["toolCall"]["kind"], "execute");
        assert_eq!(v["options"][2]["kind"], "reject_once");
        assert_eq!(
            permission_answer(
                &json!({"outcome": {"outcome": "selected", "optionId": "reject_once"}})
            ),
            PermissionAnswer::Reject
        );
    }
}
