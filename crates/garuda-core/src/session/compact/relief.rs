//! The lighter reliefs before a compaction, pure: the automatic collapse (which span, and
//! when) and the context_efficiency nudge that suggests `snip` to the model.

use std::collections::HashSet;

use super::{CompactPolicy, UserWords, origins, pin, split_index, user_messages};
use crate::message::{Block, Role};
use crate::session::records::Record;
use crate::session::view::{View, collapse_span, message_chars};

/// Tokens above which an automatic collapse may run, when there is room for one below the
/// compaction threshold (`threshold`, in tokens): the collapse share of the window, at most
/// `collapse_max_tokens` (every request re-reads the whole context, so what an old span costs
/// grows with its size, not with the window). None: off, or no room.
pub fn collapse_start(window: u64, threshold: u64, policy: &CompactPolicy) -> Option<u64> {
    if !policy.auto_collapse || !policy.auto_compact {
        return None;
    }
    let mut at = (window as f64 * policy.collapse_threshold) as u64;
    if policy.collapse_max_tokens > 0 {
        at = at.min(policy.collapse_max_tokens);
    }
    (at < threshold).then_some(at)
}

/// The span an automatic collapse replaces, as (first, last) transcript ids: the older part
/// of the view, after the message holding the user's first request and after the latest
/// collapse summary, before the `keep_steps` newest steps and before the latest user request
/// (the running turn stays whole), widened so no tool pair is split. None when that span is
/// under `min_chars` or under two messages.
pub fn auto_collapse_span(
    view: &View,
    keep_steps: usize,
    min_chars: usize,
) -> Option<(String, String)> {
    let msgs = &view.messages;
    let split = split_index(msgs, keep_steps)?;
    let collapses: HashSet<&str> = view.collapses.iter().map(String::as_str).collect();
    let fixed = |i: usize| {
        let m = &msgs[i];
        collapses.contains(m.id.as_str())
            || view
                .first_request
                .as_ref()
                .is_some_and(|f| m.source_ids.contains(f))
    };
    let start = (0..split).rev().find(|&i| fixed(i)).map_or(0, |i| i + 1);
    // A user message without tool results opens a turn (the user's request or a note).
    let request = |i: usize| {
        msgs[i].message.role == Role::User
            && !msgs[i]
                .message
                .content
                .iter()
                .any(|b| matches!(b, Block::ToolResult { .. }))
    };
    let end = match (0..msgs.len()).rev().find(|&i| request(i)) {
        Some(j) if j < split => j,
        _ => split,
    };
    if start + 1 >= end {
        return None;
    }
    let (from, to) = (&msgs[start], &msgs[end - 1]);
    let span = collapse_span(view, &from.id, &to.id).ok()?;
    let in_span: HashSet<&str> = span.iter().map(String::as_str).collect();
    let covered: Vec<usize> = (0..msgs.len())
        .filter(|&i| {
            msgs[i]
                .source_ids
                .iter()
                .any(|s| in_span.contains(s.as_str()))
        })
        .collect();
    // Widening must not swallow the task, a summary or the kept steps.
    if covered.len() < 2 || covered.iter().any(|&i| i >= end || fixed(i)) {
        return None;
    }
    let chars: usize = covered
        .iter()
        .map(|&i| message_chars(&msgs[i].message))
        .sum();
    if chars < min_chars {
        return None;
    }
    Some((span.first()?.clone(), span.last()?.clone()))
}

/// True when the context grew by the nudge share of the window since `since` (the size at
/// the last snip, nudge or shrink).
pub fn nudge_due(tokens: u64, since: u64, window: u64, share: f64) -> bool {
    let step = (window as f64 * share) as u64;
    share > 0.0 && step > 0 && tokens >= since.saturating_add(step)
}

/// The context_efficiency note: how much the context grew without a snip, and what to do.
pub fn nudge_text(grown: u64, tokens: u64, window: u64) -> String {
    format!(
        "<garuda_note>context_efficiency: the context grew by about {grown} tokens since the \
         last snip (now about {tokens} of a {window}-token window). If earlier messages are no \
         longer needed for the task (finished explorations, superseded tool output, long \
         results you already used), remove them with the snip tool, passing their [id:...] \
         tags. Keep the user's requests and anything you still need; the user's first request \
         always stays.</garuda_note>"
    )
}

/// The user's own messages of a collapse span, verbatim (the newest that fit `budget_chars`),
/// as the `<user_messages>` block an automatic collapse appends to the model's summary: the
/// user's words never depend on a summary. None when the span holds none.
pub fn span_user_words(records: &[Record], span: &[String], budget_chars: usize) -> Option<String> {
    let origin = origins(records);
    let in_span: HashSet<String> = span
        .iter()
        .map(|id| origin.get(id).cloned().unwrap_or_else(|| id.clone()))
        .collect();
    // `pin` treats its first entry as the first request; a placeholder marked present
    // leaves every span message to the newest-first rule.
    let mut words = vec![UserWords {
        id: String::new(),
        text: String::new(),
    }];
    words.extend(
        user_messages(records)
            .into_iter()
            .filter(|w| in_span.contains(&w.id)),
    );
    if words.len() == 1 {
        return None;
    }
    let placeholder: HashSet<String> = [String::new()].into();
    pin(&words, &placeholder, budget_chars)
        .blocks()
        .into_iter()
        .find_map(|b| match b {
            Block::Text { text } => Some(text),
            _ => None,
        })
}
