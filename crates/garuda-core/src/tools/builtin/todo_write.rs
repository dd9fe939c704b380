//! `todo_write`: replaces the session's task list.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::message::ToolSpec;
use crate::prompt::Offer;
use crate::tools::handler::{self, Tool, Workbench};
use crate::tools::util;
use crate::tools::vocab::{TodoItem, TodoStatus, ToolClass, ToolContext, ToolMeta, ToolOutput};
use futures_util::future::BoxFuture;

/// Most items in a list.
const MAX_ITEMS: usize = 100;

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

fn run(input: Value, ctx: &ToolContext) -> ToolOutput {
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

/// `todo_write`.
pub(super) struct TodoWrite;

impl Tool for TodoWrite {
    fn name(&self) -> &str {
        "todo_write"
    }
    fn claude_names(&self) -> &'static [&'static str] {
        &["TodoWrite"]
    }
    fn spec(&self) -> ToolSpec {
        handler::spec(
            "todo_write",
            "Replace the session's task list (shown to the user). Use it for work with several \
             steps: list the steps, mark one `in_progress` before starting it and `completed` as \
             soon as it is done. At most one item may be `in_progress`. Send the whole list \
             each time.",
            json!({
                "type": "object",
                "properties": {
                    "todos": {
                        "type": "array",
                        "description": "The complete task list, in order.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "content": {"type": "string", "description": "What to do."},
                                "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}
                            },
                            "required": ["content", "status"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["todos"],
                "additionalProperties": false
            }),
        )
    }
    fn class(&self) -> ToolClass {
        ToolClass::Todo
    }
    fn offer(&self) -> Option<Offer> {
        Some(Offer::Todos)
    }
    fn describe(&self, input: &Value) -> String {
        let n = input
            .get("todos")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        format!("{n} items")
    }
    fn run<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        _bench: &'a dyn Workbench,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move { run(input, ctx) })
    }
}
