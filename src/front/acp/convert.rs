//! Pure conversions between Garuda's engine types and ACP v1 types (no IO).

use serde_json::{Value, json};

use super::types::{
    AvailableCommand, ContentBlock, EmbeddedResource, PlanEntry, PlanEntryPriority,
    PlanEntryStatus, SessionUpdate, StopReason as AcpStop, ToolCall, ToolCallContent,
    ToolCallStatus, ToolKind,
};
use garuda_core::message::{Block, ImageSource, Role, StopReason};
use garuda_core::tools::{TodoItem, TodoStatus, ToolClass, ToolRegistry};
use garuda_core::turn::{CompactionPhase, TurnEvent};

/// The ACP tool kind of a session's tool, for the editor's icon.
pub fn tool_kind(tools: &ToolRegistry, name: &str) -> ToolKind {
    match tools.get(name).map(|e| e.class) {
        Some(ToolClass::Read) => ToolKind::Read,
        Some(ToolClass::Search) => ToolKind::Search,
        Some(ToolClass::Edit) => ToolKind::Edit,
        Some(ToolClass::Exec) => ToolKind::Execute,
        Some(ToolClass::Todo) => ToolKind::Think,
        _ => ToolKind::Other,
    }
}

/// The `tool_call` announcing a call.
pub fn tool_call(
    tools: &ToolRegistry,
    id: &str,
    name: &str,
    input: &Value,
    status: ToolCallStatus,
) -> ToolCall {
    ToolCall {
        tool_call_id: id.to_string(),
        title: Some(garuda_core::tools::describe_call(name, input)),
        kind: Some(tool_kind(tools, name)),
        status: Some(status),
        raw_input: Some(input.clone()),
        content: None,
    }
}

/// The `tool_call_update` closing a call with its output.
pub fn tool_result(id: &str, output: &str, is_error: bool) -> ToolCall {
    ToolCall {
        tool_call_id: id.to_string(),
        status: Some(if is_error {
            ToolCallStatus::Failed
        } else {
            ToolCallStatus::Completed
        }),
        content: Some(vec![ToolCallContent::Content {
            content: ContentBlock::text(output),
        }]),
        ..Default::default()
    }
}

/// The ACP plan of a todo list.
pub fn plan(todos: &[TodoItem]) -> SessionUpdate {
    SessionUpdate::Plan {
        entries: todos
            .iter()
            .map(|t| PlanEntry {
                content: t.content.clone(),
                priority: PlanEntryPriority::Medium,
                status: match t.status {
                    TodoStatus::Pending => PlanEntryStatus::Pending,
                    TodoStatus::InProgress => PlanEntryStatus::InProgress,
                    TodoStatus::Completed => PlanEntryStatus::Completed,
                },
            })
            .collect(),
    }
}

/// The session update for one turn event; `None` for events ACP has no place for.
pub fn event_update(
    event: TurnEvent,
    context_window: u64,
    tools: &ToolRegistry,
) -> Option<SessionUpdate> {
    Some(match event {
        TurnEvent::TextDelta { text } => SessionUpdate::AgentMessageChunk {
            content: ContentBlock::text(text),
        },
        TurnEvent::ThinkingDelta { text } => SessionUpdate::AgentThoughtChunk {
            content: ContentBlock::text(text),
        },
        TurnEvent::ToolCallStarted { id, name, input } => SessionUpdate::ToolCall(tool_call(
            tools,
            &id,
            &name,
            &input,
            ToolCallStatus::InProgress,
        )),
        TurnEvent::ToolCallFinished {
            id,
            output,
            is_error,
            ..
        } => SessionUpdate::ToolCallUpdate(tool_result(&id, &output, is_error)),
        TurnEvent::Todos { todos } => plan(&todos),
        TurnEvent::Usage { context_tokens, .. } => SessionUpdate::UsageUpdate {
            used: context_tokens,
            size: context_window,
        },
        TurnEvent::Compaction {
            phase,
            message: Some(m),
            ..
        } if matches!(phase, CompactionPhase::Finished | CompactionPhase::Failed) => {
            SessionUpdate::AgentThoughtChunk {
                content: ContentBlock::text(format!("[compaction {}: {m}]", phase.name())),
            }
        }
        _ => return None,
    })
}

/// The ACP stop reason of a Garuda turn (`None`: the turn failed).
pub fn stop_reason(r: StopReason) -> Option<AcpStop> {
    Some(match r {
        StopReason::EndTurn | StopReason::StopSequence | StopReason::ToolUse => AcpStop::EndTurn,
        StopReason::MaxTokens => AcpStop::MaxTokens,
        StopReason::MaxSteps => AcpStop::MaxTurnRequests,
        StopReason::Refusal => AcpStop::Refusal,
        StopReason::Cancelled => AcpStop::Cancelled,
        StopReason::Error => return None,
    })
}

/// Decodes prompt blocks, skipping kinds this version does not know.
pub fn decode_prompt(prompt: Vec<Value>) -> Vec<ContentBlock> {
    prompt
        .into_iter()
        .filter_map(|v| match serde_json::from_value(v) {
            Ok(b) => Some(b),
            Err(e) => {
                tracing::warn!("prompt block skipped: {e}");
                None
            }
        })
        .collect()
}

/// Garuda input blocks for an ACP prompt; embedded resources become tagged text.
pub fn prompt_blocks(prompt: Vec<ContentBlock>) -> Vec<Block> {
    prompt
        .into_iter()
        .map(|b| match b {
            ContentBlock::Text { text } => Block::text(text),
            ContentBlock::Image { data, mime_type } => Block::Image {
                source: ImageSource::Base64 {
                    media_type: mime_type,
                    data,
                },
            },
            ContentBlock::ResourceLink { name, uri } => {
                Block::text(format!("[resource: {name} <{uri}>]"))
            }
            ContentBlock::Resource {
                resource: EmbeddedResource { uri, text, .. },
            } => match text {
                Some(t) => Block::text(format!("<context uri=\"{uri}\">\n{t}\n</context>")),
                None => Block::text(format!("[binary resource {uri} omitted]")),
            },
            ContentBlock::Audio { .. } => Block::text("[audio input is not supported]"),
        })
        .collect()
}

/// The plain text of a prompt (for slash commands).
pub fn prompt_text(prompt: &[ContentBlock]) -> String {
    prompt
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("")
}

/// The updates that replay one stored message (for `session/load`).
pub fn history_updates(role: Role, content: &[Block], tools: &ToolRegistry) -> Vec<SessionUpdate> {
    let mut out = Vec::new();
    for b in content {
        match (role, b) {
            (Role::User, Block::Text { text }) => out.push(SessionUpdate::UserMessageChunk {
                content: ContentBlock::text(text.clone()),
            }),
            (
                Role::User,
                Block::Image {
                    source: ImageSource::Base64 { media_type, data },
                },
            ) => out.push(SessionUpdate::UserMessageChunk {
                content: ContentBlock::Image {
                    data: data.clone(),
                    mime_type: media_type.clone(),
                },
            }),
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
                out.push(SessionUpdate::ToolCallUpdate(tool_result(
                    tool_use_id,
                    &text,
                    *is_error,
                )));
            }
            (Role::Assistant, Block::Text { text }) => out.push(SessionUpdate::AgentMessageChunk {
                content: ContentBlock::text(text.clone()),
            }),
            (Role::Assistant, Block::Thinking { thinking, .. }) => {
                out.push(SessionUpdate::AgentThoughtChunk {
                    content: ContentBlock::text(thinking.clone()),
                })
            }
            (Role::Assistant, Block::ToolUse { id, name, input }) => out.push(
                SessionUpdate::ToolCall(tool_call(tools, id, name, input, ToolCallStatus::Pending)),
            ),
            _ => {}
        }
    }
    out
}

/// The slash commands Garuda advertises after `session/new` and `session/load`.
pub fn commands() -> SessionUpdate {
    let cmd = |name: &str, description: &str, hint: Option<&str>| AvailableCommand {
        name: name.into(),
        description: description.into(),
        input: hint.map(|h| json!({ "hint": h })),
    };
    SessionUpdate::AvailableCommandsUpdate {
        available_commands: vec![
            cmd(
                "compact",
                "Summarise older turns to free context (optional focus)",
                Some("what the summary should keep"),
            ),
            cmd("context", "Show how the context window is used", None),
            cmd(
                "snip",
                "Drop messages (by id) from the model's view",
                Some("message ids"),
            ),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn j<T: serde::Serialize>(v: T) -> Value {
        serde_json::to_value(v).unwrap()
    }

    fn tools() -> ToolRegistry {
        ToolRegistry::for_session(Vec::new()).unwrap()
    }

    #[test]
    fn events_map_to_updates() {
        let u = event_update(TurnEvent::TextDelta { text: "hi".into() }, 100, &tools()).unwrap();
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
            &tools(),
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
            &tools(),
        )
        .unwrap());
        assert_eq!(
            v,
            json!({"sessionUpdate": "usage_update", "used": 7, "size": 100})
        );
        assert!(event_update(TurnEvent::StepStarted { step: 1 }, 1, &tools()).is_none());
    }

    #[test]
    fn stop_reasons_and_prompts() {
        assert_eq!(
            stop_reason(StopReason::MaxSteps),
            Some(AcpStop::MaxTurnRequests)
        );
        assert_eq!(stop_reason(StopReason::Error), None);
        let prompt = decode_prompt(
            serde_json::from_value(json!([
                {"type": "text", "text": "/compact "},
                {"type": "text", "text": "tests"},
                {"type": "resource", "resource": {"uri": "file:///a.rs", "text": "fn a() {}"}},
                {"type": "hologram"},
            ]))
            .unwrap(),
        );
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
            &tools(),
        );
        assert_eq!(j(&ups[0])["sessionUpdate"], "agent_message_chunk");
        assert_eq!(j(&ups[1])["kind"], "read");
        let v = j(commands());
        assert_eq!(v["availableCommands"][0]["name"], "compact");
    }
}
