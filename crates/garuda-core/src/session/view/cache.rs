//! Stage 7: prompt-cache breakpoints.
//!
//! A provider caches a request's prefix up to each marker and later reads the longest cached
//! prefix of a new request. The main request uses up to four markers, each chosen for a
//! prefix that later requests repeat byte for byte:
//! 1. the end of the system prompt (with the tools before it),
//! 2. the end of the compacted prefix (the summary message that opens a compacted view),
//! 3. the end of the message before the oldest long tool result outside the newest step (the
//!    first one any stage-1 trim cuts), so a trim leaves everything before it readable,
//! 4. the last message, which the next step extends.

use super::ViewMessage;
use crate::message::{Block, Role};
use crate::session::records::MessageMeta;

pub use crate::message::{CachePlan, MAX_CACHE_MARKERS};

/// The main request's markers. `trimmable` is the index of the oldest message holding a
/// result stage 1 would cut (from [`first_trimmable`]).
pub fn main_cache_plan(messages: &[ViewMessage], trimmable: Option<usize>) -> CachePlan {
    let Some(last) = messages.len().checked_sub(1) else {
        return CachePlan {
            system: true,
            messages: Vec::new(),
        };
    };
    let mut marks = Vec::with_capacity(3);
    let prefix = prefix_end(messages);
    if let Some(p) = prefix.filter(|&p| p < last) {
        marks.push(p);
    }
    if let Some(t) = trimmable
        && let Some(before) = t.checked_sub(1)
        && before < last
        && prefix.is_none_or(|p| before > p)
    {
        marks.push(before);
    }
    marks.push(last);
    CachePlan {
        system: true,
        messages: marks,
    }
}

/// The end of the compacted prefix: the summary (or handoff) message that opens the view.
pub fn prefix_end(messages: &[ViewMessage]) -> Option<usize> {
    messages
        .first()
        .filter(|m| matches!(m.meta, Some(MessageMeta::Summary | MessageMeta::Handoff)))
        .map(|_| 0)
}

/// Where trims may cut: the view before its newest step (the last assistant message).
pub fn stage1_end(messages: &[ViewMessage]) -> usize {
    messages
        .iter()
        .rposition(|m| m.message.role == Role::Assistant)
        .unwrap_or(0)
}

/// The oldest message in `from..end` holding a tool result longer than `trim_over`
/// characters (bytes bound them cheaply), or None; also where the scan stopped, so a caller
/// that keeps the messages before it can resume there.
pub fn first_trimmable(
    messages: &[ViewMessage],
    from: usize,
    end: usize,
    trim_over: usize,
) -> (Option<usize>, usize) {
    let end = end.min(messages.len());
    for (i, m) in messages.iter().enumerate().take(end).skip(from) {
        let long = m.message.content.iter().any(|b| match b {
            Block::ToolResult { content, .. } => super::result_text_len(content) > trim_over,
            _ => false,
        });
        if long {
            return (Some(i), i);
        }
    }
    (None, end.max(from))
}
