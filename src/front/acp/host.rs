//! The ACP turn host: turn events become `session/update`, approvals `session/request_permission`.

use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use super::convert;
use super::types::{SessionNotification, SessionUpdate, ToolCall, ToolCallStatus};
use crate::front::permission_answer;
use crate::rpc::Client;
use garuda_core::tools::ToolRegistry;
use garuda_core::turn::{PermissionAnswer, PermissionRequest, TurnEvent, TurnHost};

/// Relays a turn to an ACP client.
pub struct AcpHost {
    /// The connection.
    pub client: Client,
    /// The session's context window, for `usage_update`.
    pub context_window: u64,
    /// The session's tools, for the kind of each call.
    pub tools: ToolRegistry,
}

/// Sends one `session/update` notification.
pub fn send_update(client: &Client, session_id: &str, update: SessionUpdate) {
    let n = SessionNotification {
        session_id: session_id.to_string(),
        update,
    };
    client.notify(
        "session/update",
        serde_json::to_value(n).unwrap_or(Value::Null),
    );
}

/// The `session/request_permission` params for a Garuda approval request.
pub fn permission_params(req: &PermissionRequest, tools: &ToolRegistry) -> Value {
    let call = ToolCall {
        tool_call_id: req.tool_call_id.clone(),
        title: Some(req.title.clone()),
        kind: Some(convert::tool_kind(tools, &req.tool_name)),
        status: Some(ToolCallStatus::Pending),
        raw_input: Some(req.input.clone()),
        content: None,
    };
    json!({
        "sessionId": req.session_id,
        "toolCall": call,
        "options": [
            {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
            {"optionId": "allow_always", "name": "Allow always", "kind": "allow_always"},
            {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
        ],
    })
}

impl TurnHost for AcpHost {
    fn event(&self, session_id: &str, event: TurnEvent) {
        if let Some(u) = convert::event_update(event, self.context_window, &self.tools) {
            send_update(&self.client, session_id, u);
        }
    }

    fn ask_permission(&self, req: PermissionRequest) -> BoxFuture<'static, PermissionAnswer> {
        let client = self.client.clone();
        let params = permission_params(&req, &self.tools);
        Box::pin(async move {
            match client.request("session/request_permission", params).await {
                // `{outcome: {outcome: "cancelled"}}` and unknown ids count as a rejection.
                Ok(v) => permission_answer(&v),
                Err(e) => {
                    tracing::info!(
                        "session/request_permission failed ({}); the call is not run",
                        e.message
                    );
                    PermissionAnswer::Failed
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let v = permission_params(&req, &ToolRegistry::for_session(Vec::new()).unwrap());
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
