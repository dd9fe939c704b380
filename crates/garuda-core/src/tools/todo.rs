//! `todo_write`: replaces the session's task list.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::util;
use super::{ToolContext, ToolMeta, ToolOutput};

/// Most items in a list.
const MAX_ITEMS: usize = 100;

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on (at most one at a time).
    InProgress,
    /// Done.
    Completed,
}

/// One task of the session's list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TodoItem {
    /// What to do.
    pub content: String,
    /// Its state.
    pub status: TodoStatus,
}

#[derive(Deserialize)]
struct Input {
    todos: Vec<TodoItem>,
}

/// The list a `todo_write` call sets, from its input (`None` when it is not one), for a
/// client that replays the history.
pub fn todos_in(input: &serde_json::Value) -> Option<Vec<TodoItem>> {
    serde_json::from_value::<Input>(input.clone())
        .ok()
        .map(|i| i.todos)
}

/// The list as the model and client see it, one task per line.
pub(super) fn render(items: &[TodoItem]) -> String {
    if items.is_empty() {
        return "todo list is empty".to_string();
    }
    let mut out = String::new();
    for t in items {
        let mark = match t.status {
            TodoStatus::Pending => "[ ]",
            TodoStatus::InProgress => "[>]",
            TodoStatus::Completed => "[x]",
        };
        out.push_str(mark);
        out.push(' ');
        out.push_str(&t.content);
        out.push('\n');
    }
    out
}

pub(super) fn run(input: Value, ctx: &ToolContext) -> ToolOutput {
    let input: Input = match util::parse("todo_write", input) {
        Ok(i) => i,
        Err(e) => return e,
    };
    let mut items = input.todos;
    if items.len() > MAX_ITEMS {
        return ToolOutput::error(format!("at most {MAX_ITEMS} todo items are allowed"));
    }
    for t in &mut items {
        t.content = t.content.split_whitespace().collect::<Vec<_>>().join(" ");
        if t.content.is_empty() {
            return ToolOutput::error("every todo item needs non-empty content");
        }
    }
    let active = items
        .iter()
        .filter(|t| t.status == TodoStatus::InProgress)
        .count();
    if active > 1 {
        return ToolOutput::error(format!(
            "{active} items are in_progress; at most one may be in_progress at a time"
        ));
    }
    let text = render(&items);
    *ctx.todos.lock().unwrap_or_else(|e| e.into_inner()) = items;
    let meta = ToolMeta {
        todos_changed: true,
        ..ToolMeta::default()
    };
    ToolOutput::ok(text).with_meta(meta)
}
