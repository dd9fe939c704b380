//! Stage 5: committed collapse summaries replace their spans at read time.

use std::collections::HashSet;

use thiserror::Error;

use super::{View, Work};
use crate::message::{Block, Role};
use crate::session::records::CollapseRecord;

/// The first line of a collapse summary message.
pub(crate) const COLLAPSE_HEADING: &str = "[Summary of an earlier part of this conversation]";

/// Why a collapse span cannot be formed.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SpanError {
    /// An id is not in the current view.
    #[error("message {0} is not in the current view")]
    NotInView(String),
    /// `fromId` comes after `toId`.
    #[error("fromId comes after toId")]
    Reversed,
}

/// Substitutes the committed summaries; returns (the ids they replaced, the ids of the
/// summaries installed).
pub(crate) fn apply(
    msgs: &mut Vec<Work>,
    collapses: &[CollapseRecord],
) -> (Vec<String>, Vec<String>) {
    let mut collapsed = Vec::new();
    let mut installed = Vec::new();
    for c in collapses {
        let span: HashSet<&str> = c.span_ids.iter().map(String::as_str).collect();
        let Some(first) = msgs.iter().position(|m| span.contains(m.id.as_str())) else {
            continue;
        };
        let summary = Work {
            id: c.uuid.clone(),
            source_ids: vec![c.uuid.clone()],
            role: Role::User,
            content: vec![Block::text(format!("{COLLAPSE_HEADING}\n{}", c.summary))],
            time: c.time,
            meta: None,
            is_virtual: false,
        };
        installed.push(c.uuid.clone());
        let mut out = Vec::with_capacity(msgs.len());
        for (i, m) in msgs.drain(..).enumerate() {
            if i == first {
                out.push(summary.clone());
            }
            if span.contains(m.id.as_str()) {
                collapsed.push(m.id);
            } else {
                out.push(m);
            }
        }
        *msgs = out;
    }
    (collapsed, installed)
}

/// The transcript ids a collapse of `from_id..=to_id` must cover: the range of the current
/// view, widened so that no tool_use or tool_result loses its partner.
pub fn collapse_span(view: &View, from_id: &str, to_id: &str) -> Result<Vec<String>, SpanError> {
    let pos = |id: &str| {
        view.messages
            .iter()
            .position(|m| m.id == id || m.source_ids.iter().any(|s| s == id))
            .ok_or_else(|| SpanError::NotInView(id.to_string()))
    };
    let (mut a, mut b) = (pos(from_id)?, pos(to_id)?);
    if a > b {
        return Err(SpanError::Reversed);
    }
    loop {
        let (old_a, old_b) = (a, b);
        let mut uses = HashSet::new();
        let mut results = HashSet::new();
        for m in &view.messages[a..=b] {
            for blk in &m.message.content {
                match blk {
                    Block::ToolUse { id, .. } => {
                        uses.insert(id.clone());
                    }
                    Block::ToolResult { tool_use_id, .. } => {
                        results.insert(tool_use_id.clone());
                    }
                    _ => {}
                }
            }
        }
        for (i, m) in view.messages.iter().enumerate() {
            for blk in &m.message.content {
                match blk {
                    Block::ToolResult { tool_use_id, .. }
                        if i > b && uses.contains(tool_use_id) =>
                    {
                        b = i
                    }
                    Block::ToolUse { id, .. } if i < a && results.contains(id) => a = a.min(i),
                    _ => {}
                }
            }
        }
        if (a, b) == (old_a, old_b) {
            break;
        }
    }
    // A view message may merge several transcript messages (the first request, a note, an
    // earlier collapse summary and the next request are one user message): the span starts
    // at `from_id` and ends at `to_id` inside them, so a collapse never swallows what comes
    // before its first message, the user's first request above all.
    let last = b - a;
    let mut ids = Vec::new();
    for (k, m) in view.messages[a..=b].iter().enumerate() {
        let mut src: &[String] = &m.source_ids;
        if k == last
            && let Some(j) = src.iter().position(|s| s == to_id)
        {
            src = &src[..=j];
        }
        if k == 0
            && let Some(j) = src.iter().position(|s| s == from_id)
        {
            src = &src[j..];
        }
        ids.extend(src.iter().cloned());
    }
    Ok(ids)
}
