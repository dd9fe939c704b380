//! What the summarizer reads: the older part of the view (before the split), rewritten to
//! be small (no thinking, media as markers, long tool results cut as stage 1 cuts them),
//! and, when even that exceeds the summarizer's room, split into chunks at API-round
//! boundaries that are summarized in turn, each with the summary so far. Nothing is dropped
//! silently: a single round too large for a chunk keeps the head of its long texts and says
//! what was cut.

use super::pinned::cut_with_marker;
use super::summary_prompt::rewrite_for_summary;
use crate::message::{Block, Message, Role};
use crate::session::view::{ViewMessage, message_chars, tag_messages, trim_result};

/// Opens the summary-so-far message of a later chunk.
pub const SO_FAR_OPEN: &str = "<summary_so_far>";

/// API-round groups: each group starts at an assistant message (the first also holds any
/// leading user messages), so a tool_use and its results stay in one group.
pub fn api_round_groups(messages: &[Message]) -> Vec<std::ops::Range<usize>> {
    if messages.is_empty() {
        return Vec::new();
    }
    let mut starts: Vec<usize> = vec![0];
    for (i, m) in messages.iter().enumerate().skip(1) {
        if m.role == Role::Assistant {
            starts.push(i);
        }
    }
    let mut out = Vec::with_capacity(starts.len());
    for (k, &s) in starts.iter().enumerate() {
        let e = starts.get(k + 1).copied().unwrap_or(messages.len());
        out.push(s..e);
    }
    out
}

/// The summarizer's input: the older messages as the main request renders them (id tags
/// included, so the part before the first change is byte-identical and can be read from the
/// provider's cache), without thinking, with media as markers and tool results over
/// `trim_over` characters cut to `trim_to`.
pub fn summary_source(older: &[ViewMessage], trim_over: usize, trim_to: usize) -> Vec<Message> {
    let mut msgs = rewrite_for_summary(&tag_messages(older));
    for m in &mut msgs {
        for b in &mut m.content {
            if let Block::ToolResult { content, .. } = b
                && content.iter().map(Block::char_len).sum::<usize>() > trim_over
            {
                trim_result(content, trim_to);
            }
        }
    }
    msgs
}

/// Cuts the longest texts of `msgs` (with markers) until they fit `budget` characters.
fn fit_round(msgs: &mut [Message], budget: usize) {
    for _ in 0..64 {
        let total: usize = msgs.iter().map(message_chars).sum();
        if total <= budget {
            return;
        }
        let mut longest: Option<(usize, usize, usize)> = None;
        for (i, m) in msgs.iter().enumerate() {
            for (j, b) in m.content.iter().enumerate() {
                let n = b.char_len();
                if longest.is_none_or(|(_, _, l)| n > l) {
                    longest = Some((i, j, n));
                }
            }
        }
        let Some((i, j, n)) = longest else { return };
        let keep = n.saturating_sub(total - budget).max(n / 2).max(200);
        if keep >= n {
            return;
        }
        match &mut msgs[i].content[j] {
            Block::Text { text } => *text = cut_with_marker(text, keep),
            Block::ToolResult { content, .. } => {
                trim_result(content, keep);
            }
            _ => return,
        }
    }
}

/// The output room of a summary request (a compaction's or a collapse's): the summary
/// target and as much again for the analysis, plus slack, at most what the window leaves
/// (`window_left`). The session's own output limit is for its answers, not for summaries: it
/// caps this only above 4 096 tokens (a model's real ceiling is never that low).
pub fn summary_max_tokens(max_output: u64, summary_target: u64, window_left: u64) -> u64 {
    (summary_target * 2 + 512)
        .min(max_output.max(4_096))
        .min(window_left)
        .max(1)
}

/// Splits `messages` into chunks of at most `budget_chars`, at API-round boundaries. The
/// first `head` messages (the previous summary, which must never be dropped) open the first
/// chunk. A round larger than a chunk has its longest texts cut, with markers.
pub fn chunk_rounds(messages: &[Message], head: usize, budget_chars: usize) -> Vec<Vec<Message>> {
    let head = head.min(messages.len());
    let mut chunks: Vec<Vec<Message>> = Vec::new();
    let mut cur: Vec<Message> = messages[..head].to_vec();
    fit_round(&mut cur, budget_chars);
    let mut cur_chars: usize = cur.iter().map(message_chars).sum();
    let rest = &messages[head..];
    for g in api_round_groups(rest) {
        let mut round: Vec<Message> = rest[g].to_vec();
        let mut n: usize = round.iter().map(message_chars).sum();
        if n > budget_chars {
            fit_round(&mut round, budget_chars);
            n = round.iter().map(message_chars).sum();
        }
        if !cur.is_empty() && cur_chars + n > budget_chars {
            chunks.push(std::mem::take(&mut cur));
            cur_chars = 0;
        }
        cur.extend(round);
        cur_chars += n;
    }
    if !cur.is_empty() {
        chunks.push(cur);
    }
    chunks
}

/// The messages of one summary request: the summary so far (for every chunk after the
/// first), the chunk, then the instruction, joined to the chunk's last user message so
/// roles keep alternating (some local servers' templates require it).
pub fn chunk_messages(chunk: &[Message], so_far: Option<&str>, instruction: &str) -> Vec<Message> {
    let mut out = Vec::with_capacity(chunk.len() + 2);
    if let Some(s) = so_far {
        out.push(Message::user_text(format!(
            "{SO_FAR_OPEN}\nThe summary of the part of the session before the messages below; \
             merge it with them into one summary.\n{s}\n</summary_so_far>"
        )));
    }
    for m in chunk {
        match out.last_mut() {
            // Results lead their message; text joins after them.
            Some(last) if last.role == m.role && m.role == Role::User => {
                let (results, rest): (Vec<Block>, Vec<Block>) = m
                    .content
                    .iter()
                    .cloned()
                    .partition(|b| matches!(b, Block::ToolResult { .. }));
                if results.is_empty() {
                    last.content.extend(rest);
                } else {
                    out.push(m.clone());
                }
            }
            _ => out.push(m.clone()),
        }
    }
    if out.first().is_none_or(|m| m.role != Role::User) {
        out.insert(
            0,
            Message::user_text("[The conversation continues from earlier messages.]"),
        );
    }
    match out.last_mut() {
        Some(last) if last.role == Role::User => last.content.push(Block::text(instruction)),
        _ => out.push(Message::user_text(instruction)),
    }
    out
}
