//! Pure conversions between Garuda's engine types and ACP v1 schema types (no IO).

use agent_client_protocol_schema::v1 as acp;
use serde_json::Value;

use crate::message::{Block, ImageSource, Role, StopReason};
use crate::tools::{TodoItem, TodoStatus};
use crate::turn::TurnEvent;

/// The ACP tool kind of a Garuda tool, for the editor's icon.
pub fn tool_kind(name: &str) -> acp::ToolKind {
    match name {
        "read_file" | "list_files" => acp::ToolKind::Read,
        "edit_file" | "write_file" => acp::ToolKind::Edit,
        "bash" => acp::ToolKind::Execute,
        "grep" | "glob" => acp::ToolKind::Search,
        "todo_write" => acp::ToolKind::Think,
        _ => acp::ToolKind::Other,
    }
}

/// A one-line title for a call, e.g. `bash: cargo test`.
pub fn tool_title(name: &str, input: &Value) -> String {
    crate::tools::describe_call(name, input)
}

/// The `tool_call` update announcing a call.
pub fn tool_call(
    id: &str,
    name: &str,
    input: &Value,
    status: acp::ToolCallStatus,
) -> acp::ToolCall {
    acp::ToolCall::new(id.to_string(), tool_title(name, input))
        .kind(tool_kind(name))
        .status(status)
        .raw_input(input.clone())
}

/// The `tool_call_update` closing a call with its output.
pub fn tool_result(id: &str, output: &str, is_error: bool) -> acp::ToolCallUpdate {
    let status = if is_error {
        acp::ToolCallStatus::Failed
    } else {
        acp::ToolCallStatus::Completed
    };
    acp::ToolCallUpdate::new(
        id.to_string(),
        acp::ToolCallUpdateFields::new()
            .status(status)
            .content(vec![acp::ToolCallContent::from(output.to_string())]),
    )
}

/// The ACP plan of a todo list.
pub fn plan(todos: &[TodoItem]) -> acp::Plan {
    acp::Plan::new(
        todos
            .iter()
            .map(|t| {
                let status = match t.status {
                    TodoStatus::Pending => acp::PlanEntryStatus::Pending,
                    TodoStatus::InProgress => acp::PlanEntryStatus::InProgress,
                    TodoStatus::Completed => acp::PlanEntryStatus::Completed,
                };
                acp::PlanEntry::new(t.content.clone(), acp::PlanEntryPriority::Medium, status)
            })
            .collect(),
    )
}

/// The session update for one turn event; `None` for events ACP has no place for.
pub fn event_update(event: TurnEvent, context_window: u64) -> Option<acp::SessionUpdate> {
    Some(match event {
        TurnEvent::TextDelta { text } => {
            acp::SessionUpdate::AgentMessageChunk(acp::ContentChunk::new(text.into()))
        }
        TurnEvent::ThinkingDelta { text } => {
            acp::SessionUpdate::AgentThoughtChunk(acp::ContentChunk::new(text.into()))
        }
        TurnEvent::ToolCallStarted { id, name, input } => acp::SessionUpdate::ToolCall(tool_call(
            &id,
            &name,
            &input,
            acp::ToolCallStatus::InProgress,
        )),
        TurnEvent::ToolCallFinished {
            id,
            output,
            is_error,
            ..
        } => acp::SessionUpdate::ToolCallUpdate(tool_result(&id, &output, is_error)),
        TurnEvent::Todos { todos } => acp::SessionUpdate::Plan(plan(&todos)),
        TurnEvent::Usage { context_tokens, .. } => {
            acp::SessionUpdate::UsageUpdate(acp::UsageUpdate::new(context_tokens, context_window))
        }
        TurnEvent::Compaction {
            phase,
            message: Some(m),
            ..
        } if phase == "finished" || phase == "failed" => acp::SessionUpdate::AgentThoughtChunk(
            acp::ContentChunk::new(format!("[compaction {phase}: {m}]").into()),
        ),
        _ => return None,
    })
}

/// The ACP stop reason of a Garuda turn (`None`: the turn failed).
pub fn stop_reason(r: StopReason) -> Option<acp::StopReason> {
    Some(match r {
        StopReason::EndTurn | StopReason::StopSequence | StopReason::ToolUse => {
            acp::StopReason::EndTurn
        }
        StopReason::MaxTokens => acp::StopReason::MaxTokens,
        StopReason::MaxSteps => acp::StopReason::MaxTurnRequests,
        StopReason::Refusal => acp::StopReason::Refusal,
        StopReason::Cancelled => acp::StopReason::Cancelled,
        StopReason::Error => return None,
    })
}

/// Garuda input blocks for an ACP prompt; embedded resources become tagged text.
pub fn prompt_blocks(prompt: Vec<acp::ContentBlock>) -> Vec<Block> {
    prompt
        .into_iter()
        .filter_map(|b| match b {
            acp::ContentBlock::Text(t) => Some(Block::text(t.text)),
            acp::ContentBlock::Image(i) => Some(Block::Image {
                source: ImageSource::Base64 {
                    media_type: i.mime_type,
                    data: i.data,
                },
            }),
            acp::ContentBlock::ResourceLink(l) => {
                Some(Block::text(format!("[resource: {} <{}>]", l.name, l.uri)))
            }
            acp::ContentBlock::Resource(r) => match r.resource {
                acp::EmbeddedResourceResource::TextResourceContents(t) => Some(Block::text(
                    format!("<context uri=\"{}\">\n{}\n</context>", t.uri, t.text),
                )),
                acp::EmbeddedResourceResource::BlobResourceContents(b) => {
                    Some(Block::text(format!("[binary resource {} omitted]", b.uri)))
                }
                _ => None,
            },
            acp::ContentBlock::Audio(_) => Some(Block::text("[audio input is not supported]")),
            _ => None,
        })
        .collect()
}

/// The plain text of a prompt (for slash commands).
pub fn prompt_text(prompt: &[acp::ContentBlock]) -> String {
    prompt
        .iter()
        .filter_map(|b| match b {
            acp::ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("")
}

/// The updates that replay one stored message (for `session/load`).
pub fn history_updates(role: Role, content: &[Block]) -> Vec<acp::SessionUpdate> {
    let mut out = Vec::new();
    for b in content {
        match (role, b) {
            (Role::User, Block::Text { text }) => out.push(acp::SessionUpdate::UserMessageChunk(
                acp::ContentChunk::new(text.clone().into()),
            )),
            (Role::User, Block::Image { source }) => {
                if let ImageSource::Base64 { media_type, data } = source {
                    out.push(acp::SessionUpdate::UserMessageChunk(
                        acp::ContentChunk::new(acp::ContentBlock::Image(acp::ImageContent::new(
                            data.clone(),
                            media_type.clone(),
                        ))),
                    ));
                }
            }
            (
                _,
                Block::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                },
            ) => {
                let text = content
                    .iter()
                    .filter_map(|c| match c {
                        Block::Text { text } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                out.push(acp::SessionUpdate::ToolCallUpdate(tool_result(
                    tool_use_id,
                    &text,
                    *is_error,
                )));
            }
            (Role::Assistant, Block::Text { text }) => out.push(
                acp::SessionUpdate::AgentMessageChunk(acp::ContentChunk::new(text.clone().into())),
            ),
            (Role::Assistant, Block::Thinking { thinking, .. }) => {
                out.push(acp::SessionUpdate::AgentThoughtChunk(
                    acp::ContentChunk::new(thinking.clone().into()),
                ))
            }
            (Role::Assistant, Block::ToolUse { id, name, input }) => {
                out.push(acp::SessionUpdate::ToolCall(tool_call(
                    id,
                    name,
                    input,
                    acp::ToolCallStatus::Pending,
                )))
            }
            _ => {}
        }
    }
    out
}

/// The slash commands Garuda advertises after `session/new` and `session/load`.
pub fn commands() -> acp::AvailableCommandsUpdate {
    let unstructured = |hint: &str| {
        acp::AvailableCommandInput::Unstructured(acp::UnstructuredCommandInput::new(hint))
    };
    acp::AvailableCommandsUpdate::new(vec![
        acp::AvailableCommand::new(
            "compact",
            "Summarise older turns to free context (optional focus)",
        )
        .input(unstructured("what the summary should keep")),
        acp::AvailableCommand::new("context", "Show how the context window is used"),
        acp::AvailableCommand::new("snip", "Drop tool output from the model's view"),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn j<T: serde::Serialize>(v: T) -> Value {
        serde_json::to_value(v).unwrap()
    }

    #[test]
    fn events_map_to_updates() {
        let u = event_update(TurnEvent::TextDelta { text: "hi".into() }, 100).unwrap();
        assert_eq!(
            j(u),
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}})
        );
        let u = event_update(
            TurnEvent::ToolCallStarted {
                id: "t1".into(),
                name: "bash".into(),
                input: json!({"command": "ls"}),
            },
            100,
        )
        .unwrap();
        let v = j(u);
        assert_eq!(v["sessionUpdate"], "tool_call");
        assert_eq!(v["toolCallId"], "t1");
        assert_eq!(v["kind"], "execute");
        assert_eq!(v["status"], "in_progress");
        assert_eq!(v["rawInput"], json!({"command": "ls"}));
        let v = j(tool_result("t1", "boom", true));
        assert_eq!(v["status"], "failed");
        assert_eq!(v["content"][0]["content"]["text"], "boom");
        let v = j(event_update(
            TurnEvent::Usage {
                usage: Default::default(),
                context_tokens: 7,
            },
            100,
        )
        .unwrap());
        assert_eq!(
            v,
            json!({"sessionUpdate": "usage_update", "used": 7, "size": 100})
        );
        assert!(event_update(TurnEvent::StepStarted { step: 1 }, 1).is_none());
    }

    #[test]
    fn stop_reasons_and_prompts() {
        assert_eq!(
            stop_reason(StopReason::MaxSteps),
            Some(acp::StopReason::MaxTurnRequests)
        );
        assert_eq!(stop_reason(StopReason::Error), None);
        let prompt: Vec<acp::ContentBlock> = serde_json::from_value(json!([
            {"type": "text", "text": "/compact "},
            {"type": "text", "text": "tests"},
            {"type": "resource", "resource": {"uri": "file:///a.rs", "text": "fn a() {}"}},
        ]))
        .unwrap();
        assert_eq!(prompt_text(&prompt), "/compact tests");
        let blocks = prompt_blocks(prompt);
        assert_eq!(blocks.len(), 3);
        assert!(matches!(&blocks[2], Block::Text { text } if text.contains("fn a() {}")));
    }

    #[test]
    fn history_replays_tool_calls() {
        let ups = history_updates(
            Role::Assistant,
            &[
                Block::text("ok"),
                Block::ToolUse {
                    id: "t".into(),
                    name: "read_file".into(),
                    input: json!({"path": "a"}),
                },
            ],
        );
        assert_eq!(j(&ups[0])["sessionUpdate"], "agent_message_chunk");
        assert_eq!(j(&ups[1])["kind"], "read");
        let v = j(commands());
        assert_eq!(v["availableCommands"][0]["name"], "compact");
    }
}
