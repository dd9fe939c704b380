//! Stage 4: recorded microcompact clears and stage-1 trims, then the time-based rule.

use std::collections::{HashMap, HashSet};

use super::{ViewPolicy, Work, result_text, result_text_len};
use crate::message::{Block, Role};

/// What a cleared tool result says.
pub const CLEARED_TEXT: &str = "[Old tool result content cleared]";

/// The note appended to a result cut by stage-1 compaction.
pub fn trim_note(total_chars: usize, keep_chars: usize) -> String {
    format!(
        "\n[… tool result trimmed by compaction: {total_chars} characters, first {keep_chars} kept]"
    )
}

/// Applies recorded clears and trims; returns the ids of the results they changed.
pub(crate) fn apply_records(
    msgs: &mut [Work],
    cleared: &HashSet<String>,
    trims: &HashMap<String, usize>,
) -> Vec<String> {
    let mut changed = Vec::new();
    if cleared.is_empty() && trims.is_empty() {
        return changed;
    }
    for m in msgs {
        for b in &mut m.content {
            let Block::ToolResult {
                tool_use_id,
                content,
                ..
            } = b
            else {
                continue;
            };
            if cleared.contains(tool_use_id) {
                *content = vec![Block::text(CLEARED_TEXT)];
                changed.push(tool_use_id.clone());
            } else if let Some(&keep) = trims.get(tool_use_id)
                && trim_content(content, keep)
            {
                changed.push(tool_use_id.clone());
            }
        }
    }
    changed
}

/// Cuts a tool result's text to `keep` characters plus a note (no-op when already short
/// enough); true when it cut. Stage-1 compaction and the replay of trim records share it.
pub fn trim_content(content: &mut Vec<Block>, keep: usize) -> bool {
    if result_text_len(content) <= keep {
        return false;
    }
    let text = result_text(content);
    let total = text.chars().count();
    if total <= keep {
        return false;
    }
    let mut cut: String = text.chars().take(keep).collect();
    cut.push_str(&trim_note(total, keep));
    let mut new = vec![Block::text(cut)];
    new.extend(
        content
            .drain(..)
            .filter(|b| !matches!(b, Block::Text { .. })),
    );
    *content = new;
    true
}

/// Applies the time-based rule; returns the ids it newly cleared (for the caller to record).
pub(crate) fn time_based(
    msgs: &mut [Work],
    policy: &ViewPolicy,
    cleared: &HashSet<String>,
    now_ms: u64,
) -> Vec<String> {
    let Some(after) = policy.microcompact_after_ms else {
        return Vec::new();
    };
    let Some(last_assistant) = msgs.iter().rev().find(|m| m.role == Role::Assistant) else {
        return Vec::new();
    };
    if now_ms.saturating_sub(last_assistant.time) <= after {
        return Vec::new();
    }
    let mut names: HashMap<&str, &str> = HashMap::new();
    for m in msgs.iter() {
        for b in &m.content {
            if let Block::ToolUse { id, name, .. } = b {
                names.insert(id.as_str(), name.as_str());
            }
        }
    }
    let mut candidates: Vec<String> = Vec::new();
    for m in msgs.iter() {
        for b in &m.content {
            if let Block::ToolResult { tool_use_id, .. } = b
                && let Some(name) = names.get(tool_use_id.as_str())
                && policy.compactable_tools.iter().any(|t| t == name)
            {
                candidates.push(tool_use_id.clone());
            }
        }
    }
    let cut = candidates.len().saturating_sub(policy.microcompact_keep);
    let due: HashSet<String> = candidates
        .drain(..cut)
        .filter(|id| !cleared.contains(id))
        .collect();
    if due.is_empty() {
        return Vec::new();
    }
    let mut order = Vec::new();
    for m in msgs.iter_mut() {
        for b in &mut m.content {
            if let Block::ToolResult {
                tool_use_id,
                content,
                ..
            } = b
                && due.contains(tool_use_id)
            {
                *content = vec![Block::text(CLEARED_TEXT)];
                order.push(tool_use_id.clone());
            }
        }
    }
    order
}
