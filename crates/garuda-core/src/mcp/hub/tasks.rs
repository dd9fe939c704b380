//! Tool calls that a server runs as tasks (SEP-2663): the `input_required` rounds, polling
//! with `tasks/get`, answering in-task input with `tasks/update`, and `tasks/cancel` when the
//! call is given up.

use std::sync::Mutex;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ErrorData,
    GetTaskParams, InputRequests, Task, TaskPayload, UpdateTaskParams,
};
use rmcp::{Peer, RoleClient, ServiceError};
use serde_json::Value;

use super::handler::answer_inputs;
use super::server::lock;
use crate::mcp::elicit::Relay;

/// Shortest and longest wait between two `tasks/get` polls (the server's `pollIntervalMs`
/// is honoured within these); the default when it gives none.
const POLL_MIN: Duration = Duration::from_millis(10);
const POLL_MAX: Duration = Duration::from_secs(5);
const POLL_DEFAULT: Duration = Duration::from_millis(500);
/// How long a turn's cancel waits for the server to acknowledge `tasks/cancel`.
const TASK_CANCEL_WAIT: Duration = Duration::from_secs(2);

/// A tool call on a server that offers tasks (SEP-2663): `tools/call`, answering
/// `input_required` rounds; when the server makes it a task, `tasks/get` is polled (at the
/// server's `pollIntervalMs`), in-task input requests are answered with `tasks/update`, and the
/// outcome is the task's. `task` holds the task's id while it runs, so a cancelled or timed
/// out call can send `tasks/cancel`.
pub(super) async fn call_with_tasks(
    peer: &Peer<RoleClient>,
    server: &str,
    relay: &Relay,
    mut params: CallToolRequestParams,
    task: &Mutex<Option<String>>,
) -> Result<CallToolResult, ServiceError> {
    const MAX_ROUNDS: usize = 10;
    for round in 0..MAX_ROUNDS {
        match peer.call_tool_once(params.clone()).await? {
            CallToolResponse::Complete(result) => return Ok(result),
            CallToolResponse::InputRequired(r) => {
                let asked = r.input_requests.unwrap_or_default();
                if asked.is_empty() && r.request_state.is_none() {
                    return Err(ServiceError::UnexpectedResponse);
                }
                if asked.is_empty() {
                    // Only state to carry back: the server is not ready yet.
                    tokio::time::sleep(POLL_MIN * (1 << round.min(4))).await;
                }
                let answers = answer_inputs(server, relay, asked).await?;
                params.input_responses = (!answers.is_empty()).then_some(answers);
                params.request_state = r.request_state;
            }
            CallToolResponse::Task(created) => {
                return poll_task(peer, server, relay, created.task, task).await;
            }
            _ => return Err(ServiceError::UnexpectedResponse),
        }
    }
    Err(ServiceError::InputRequiredRoundsExceeded {
        max_rounds: MAX_ROUNDS,
    })
}

/// Polls a task to its end (see [`call_with_tasks`]).
async fn poll_task(
    peer: &Peer<RoleClient>,
    server: &str,
    relay: &Relay,
    created: Task,
    slot: &Mutex<Option<String>>,
) -> Result<CallToolResult, ServiceError> {
    let id = created.task_id.clone();
    *lock(slot) = Some(id.clone());
    tracing::debug!(target: "garuda::mcp", server, task = %id, "tools/call runs as a task");
    let mut interval = created.poll_interval_ms;
    // The server may list an input request again until it has taken the answer.
    let mut answered = std::collections::BTreeSet::new();
    let outcome = loop {
        let wait = interval.map_or(POLL_DEFAULT, Duration::from_millis);
        tokio::time::sleep(wait.clamp(POLL_MIN, POLL_MAX)).await;
        let got = peer.get_task(GetTaskParams::new(id.clone())).await?.task;
        interval = got.task.poll_interval_ms.or(interval);
        match got.payload {
            TaskPayload::Completed { result } => {
                break serde_json::from_value::<CallToolResult>(Value::Object(result)).map_err(
                    |e| {
                        ServiceError::McpError(ErrorData::internal_error(
                            format!("the task's result is not a tool result: {e}"),
                            None,
                        ))
                    },
                );
            }
            TaskPayload::Failed { error } => {
                let data = serde_json::from_value::<ErrorData>(Value::Object(error.clone()))
                    .unwrap_or_else(|_| {
                        ErrorData::internal_error(Value::Object(error).to_string(), None)
                    });
                break Err(ServiceError::McpError(data));
            }
            TaskPayload::Cancelled => {
                break Err(ServiceError::McpError(ErrorData::internal_error(
                    "the server cancelled the task",
                    None,
                )));
            }
            TaskPayload::InputRequired { input_requests } => {
                let fresh: InputRequests = input_requests
                    .into_iter()
                    .filter(|(k, _)| !answered.contains(k))
                    .collect();
                if fresh.is_empty() {
                    continue;
                }
                answered.extend(fresh.keys().cloned());
                let answers = answer_inputs(server, relay, fresh).await?;
                peer.update_task(UpdateTaskParams::new(id.clone(), answers))
                    .await?;
            }
            _ => {}
        }
    };
    lock(slot).take();
    outcome
}

/// Tells the server to cancel task `id` of a call that was given up (dropping the call
/// cancels only its request; a task goes on at the server unless it is told), waiting a
/// little for the acknowledgment.
pub(super) async fn cancel_task(peer: &Peer<RoleClient>, server: &str, id: String) {
    let cancel = peer.cancel_task(CancelTaskParams::new(id.clone()));
    match tokio::time::timeout(TASK_CANCEL_WAIT, cancel).await {
        Ok(Ok(())) => {
            tracing::debug!(target: "garuda::mcp", server = %server, task = %id, "tasks/cancel")
        }
        Ok(Err(e)) => {
            tracing::warn!(target: "garuda::mcp", server = %server, task = %id, "tasks/cancel failed: {e}")
        }
        Err(_) => {
            tracing::warn!(target: "garuda::mcp", server = %server, task = %id, "tasks/cancel not acknowledged")
        }
    }
}
