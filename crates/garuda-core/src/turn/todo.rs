//! The session's todo list in a live session: replayed from the transcript when a session is
//! loaded, and kept in the model's view. A collapse or snip that takes away the message that
//! last gave the model the list (its `todo_write` call, or a todo note) gets the list sent
//! again as a note, once; a compaction re-injects it anyway.

use std::collections::HashSet;

use super::live::{LiveSession, SessionState, TurnError};
use super::view::current_view;
use crate::message::{Block, Role};
use crate::session::Record;
use crate::session::compact::{TodoEntry, todo_note};
use crate::session::records::{MessageMeta, MessageRecord};
use crate::tools::{TodoItem, TodoStatus, ToolClass, ToolRegistry, todos_in};

/// The list the latest successful `todo_write` of a transcript set (empty when none).
pub(crate) fn replay(records: &[Record], tools: &ToolRegistry) -> Vec<TodoItem> {
    let failed: HashSet<&str> = records
        .iter()
        .filter_map(Record::as_message)
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            Block::ToolResult {
                tool_use_id,
                is_error: true,
                ..
            } => Some(tool_use_id.as_str()),
            _ => None,
        })
        .collect();
    records
        .iter()
        .rev()
        .filter_map(Record::as_message)
        .flat_map(|m| m.content.iter().rev())
        .find_map(|b| match b {
            Block::ToolUse { id, name, input }
                if is_todo(tools, name) && !failed.contains(id.as_str()) =>
            {
                todos_in(input)
            }
            _ => None,
        })
        .unwrap_or_default()
}

fn is_todo(tools: &ToolRegistry, name: &str) -> bool {
    tools.get(name).is_some_and(|e| e.class == ToolClass::Todo)
}

/// The session's list as compaction and the worker render it.
pub(crate) fn entries(session: &LiveSession) -> Vec<TodoEntry> {
    session
        .todos
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .map(|t| TodoEntry {
            content: t.content.clone(),
            status: match t.status {
                TodoStatus::Pending => "pending",
                TodoStatus::InProgress => "in_progress",
                TodoStatus::Completed => "completed",
            }
            .to_string(),
        })
        .collect()
}

/// A note with the todo list, when the session has one and the message that last gave it to
/// the model left the view; empty otherwise.
pub(crate) fn kept_in_view(
    session: &LiveSession,
    state: &mut SessionState,
) -> Result<Vec<Record>, TurnError> {
    let todo = entries(session);
    let Some(text) = todo_note(&todo) else {
        return Ok(Vec::new());
    };
    let tools = session.tools();
    let carrier = state.records().iter().rev().find_map(|r| {
        let m = r.as_message()?;
        let carries = m.meta == Some(MessageMeta::Todo)
            || m.content
                .iter()
                .any(|b| matches!(b, Block::ToolUse { name, .. } if is_todo(&tools, name)));
        carries.then(|| m.uuid.clone())
    });
    let Some(carrier) = carrier else {
        return Ok(Vec::new());
    };
    let view = current_view(state, &session.setup.view_policy)?;
    if view.holds(&carrier) {
        return Ok(Vec::new());
    }
    let mut message =
        MessageRecord::new(Role::User, vec![Block::text(text)], state.last_message_id());
    message.meta = Some(MessageMeta::Todo);
    Ok(vec![Record::Message(message)])
}
