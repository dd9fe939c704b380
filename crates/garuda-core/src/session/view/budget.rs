//! Stage 2: the tool-result budget. Oversized results are stored whole in a side file (the
//! caller writes it when the result arrives) and the view holds a preview plus the path.

use std::path::{Path, PathBuf};

use super::{ViewPolicy, Work, result_text, result_text_len};
use crate::message::{Block, Message};

/// A side file the caller must write for an oversized tool result.
#[derive(Debug, Clone, PartialEq)]
pub struct SideFile {
    /// The result's `tool_use_id`.
    pub tool_use_id: String,
    /// Where to write it.
    pub path: PathBuf,
    /// The full text.
    pub text: String,
}

/// File name of a tool result's side file (ids sanitized to a plain name).
pub fn tool_result_file_name(tool_use_id: &str) -> String {
    let safe: String = tool_use_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{safe}.txt")
}

/// The tool results of `message` that need a side file under `policy.tool_results_dir`.
pub fn oversized_results(message: &Message, policy: &ViewPolicy) -> Vec<SideFile> {
    let mut out = Vec::new();
    for b in &message.content {
        if let Block::ToolResult {
            tool_use_id,
            content,
            ..
        } = b
            && is_oversized(content, policy.tool_result_max_chars)
        {
            out.push(SideFile {
                tool_use_id: tool_use_id.clone(),
                path: policy
                    .tool_results_dir
                    .join(tool_result_file_name(tool_use_id)),
                text: result_text(content),
            });
        }
    }
    out
}

fn is_oversized(content: &[Block], max: usize) -> bool {
    // Byte length bounds the character count, so most results need no char count at all.
    result_text_len(content) > max && result_text(content).chars().count() > max
}

/// What the view shows instead of an oversized result.
pub fn budget_replacement(text: &str, path: &Path, preview_chars: usize) -> String {
    let total = text.chars().count();
    let preview: String = text.chars().take(preview_chars).collect();
    format!(
        "{preview}\n\n[Tool result too large: {total} characters; showing the first {preview_chars}. \
         The full output is stored at {} — read it with read_file (use line ranges).]",
        path.display()
    )
}

/// Replaces oversized results by their preview; returns their ids.
pub(crate) fn apply(msgs: &mut [Work], policy: &ViewPolicy) -> Vec<String> {
    let mut replaced = Vec::new();
    for m in msgs {
        for b in &mut m.content {
            if let Block::ToolResult {
                tool_use_id,
                content,
                ..
            } = b
                && is_oversized(content, policy.tool_result_max_chars)
            {
                let path = policy
                    .tool_results_dir
                    .join(tool_result_file_name(tool_use_id));
                let text = budget_replacement(
                    &result_text(content),
                    &path,
                    policy.tool_result_preview_chars,
                );
                let mut new = vec![Block::text(text)];
                new.extend(
                    content
                        .drain(..)
                        .filter(|b| !matches!(b, Block::Text { .. })),
                );
                *content = new;
                replaced.push(tool_use_id.clone());
            }
        }
    }
    replaced
}
