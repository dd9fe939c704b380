//! The extractive handoff: installed instead of a summary when the model cannot summarize.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::TodoEntry;
use crate::message::{Block, Role};
use crate::session::view::ViewMessage;

/// The label that opens every extractive handoff.
pub const HANDOFF_LABEL: &str = "[Extractive handoff: this account of the earlier conversation \
was extracted mechanically from the transcript, without the model. The user's own messages are \
carried verbatim above it; below are the files touched, the commands run and the last state, \
with no interpretation.]";

/// The exit code a bash result reports on a line `exit code: N`.
pub fn exit_code(result: &str) -> Option<i64> {
    result.lines().rev().find_map(|l| {
        let l = l.trim().to_ascii_lowercase();
        let rest = l
            .strip_prefix("exit code:")
            .or_else(|| l.strip_prefix("exit code "))?;
        rest.trim().trim_end_matches(['.', ')']).parse().ok()
    })
}

fn text_of(content: &[Block]) -> String {
    let mut s = String::new();
    for b in content {
        if let Block::Text { text } = b {
            s.push_str(text);
        }
    }
    s
}

/// Builds the handoff text from the view's messages, the todo list and the summary an
/// earlier compaction installed (carried on whole, since nothing newer replaces it).
/// `runs_commands` says which tools run commands (their `command` input is listed).
pub fn extractive_handoff(
    messages: &[ViewMessage],
    todo: &[TodoEntry],
    previous: Option<&str>,
    runs_commands: &dyn Fn(&str) -> bool,
) -> String {
    let files = files_touched(messages.iter().map(|m| &m.message));
    let mut commands: Vec<(String, String)> = Vec::new();
    let mut command_of: HashMap<String, usize> = HashMap::new();
    let mut last_assistant = None;
    for m in messages {
        match m.message.role {
            Role::User => {
                for b in &m.message.content {
                    if let Block::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                    } = b
                        && let Some(&i) = command_of.get(tool_use_id)
                    {
                        let out = text_of(content);
                        commands[i].1 = match exit_code(&out) {
                            Some(c) => format!("exit code {c}"),
                            None if *is_error => "failed".into(),
                            None => "no exit code reported".into(),
                        };
                    }
                }
            }
            Role::Assistant => {
                let t = text_of(&m.message.content);
                if !t.trim().is_empty() {
                    last_assistant = Some(t);
                }
                for b in &m.message.content {
                    let Block::ToolUse { id, name, input } = b else {
                        continue;
                    };
                    if runs_commands(name)
                        && let Some(c) = input.get("command").and_then(|v| v.as_str())
                    {
                        command_of.insert(id.clone(), commands.len());
                        commands.push((c.to_string(), "no result".into()));
                    }
                }
            }
        }
    }
    let mut out = String::from(HANDOFF_LABEL);
    if let Some(p) = previous.filter(|p| !p.trim().is_empty()) {
        out.push_str("\n\n## Summary of the part before (from an earlier compaction)\n");
        out.push_str(p.trim());
        out.push('\n');
    }
    out.push_str("\n\n");
    out.push_str(&render_files_touched(&files));
    out.push_str("\n## Commands run\n");
    if commands.is_empty() {
        out.push_str("(none)\n");
    }
    for (c, r) in &commands {
        let _ = writeln!(out, "- `{c}` — {r}");
    }
    out.push_str("\n## Last assistant text\n");
    out.push_str(last_assistant.as_deref().unwrap_or("(none)"));
    out.push_str("\n\n## Todo list\n");
    out.push_str(&render_todo(todo));
    out
}

/// The todo list as lines `- [status] content`.
/// The files the tool calls of `messages` name (their `path` input), in first-use order, with
/// the tools that used each.
pub fn files_touched<'a>(
    messages: impl IntoIterator<Item = &'a crate::message::Message>,
) -> Vec<(String, Vec<String>)> {
    let mut files: Vec<(String, Vec<String>)> = Vec::new();
    let mut file_idx: HashMap<String, usize> = HashMap::new();
    for m in messages {
        for b in &m.content {
            let Block::ToolUse { name, input, .. } = b else {
                continue;
            };
            if let Some(p) = input.get("path").and_then(|v| v.as_str()) {
                let i = *file_idx.entry(p.to_string()).or_insert_with(|| {
                    files.push((p.to_string(), Vec::new()));
                    files.len() - 1
                });
                if !files[i].1.contains(name) {
                    files[i].1.push(name.clone());
                }
            }
        }
    }
    files
}

/// The `## Files touched` section of a handoff or a collapse: one line per file with the tools.
pub fn render_files_touched(files: &[(String, Vec<String>)]) -> String {
    let mut out = String::from("## Files touched\n");
    if files.is_empty() {
        out.push_str("(none)\n");
    }
    for (p, tools) in files {
        let _ = writeln!(out, "- {p} ({})", tools.join(", "));
    }
    out
}

/// The note that gives the model the todo list (None for an empty list).
pub fn todo_note(todo: &[TodoEntry]) -> Option<String> {
    (!todo.is_empty()).then(|| {
        format!(
            "<garuda_note>The current todo list:\n{}</garuda_note>",
            render_todo(todo)
        )
    })
}

/// The todo list, one `- [status] content` line per item.
pub fn render_todo(todo: &[TodoEntry]) -> String {
    if todo.is_empty() {
        return "(empty)\n".into();
    }
    let mut s = String::new();
    for t in todo {
        let _ = writeln!(s, "- [{}] {}", t.status, t.content);
    }
    s
}
