//! Compaction planning, pure: when to compact, where to split, stage-1 trimming, the summary
//! request, prompt-too-long head truncation, the extractive handoff and the records that
//! install a compaction. The caller does the IO (model calls, file reads, appends).

mod handoff;
mod summary_prompt;

use std::collections::HashSet;

use super::records::{
    CompactBoundaryRecord, CompactTrigger, MessageMeta, MessageRecord, Record, TrimRecord, new_id,
};
use super::tokens::TokenEstimator;
use super::view::{CachePlan, View, ViewMessage, side_cache_plan};
use crate::message::{Block, Message, Role};

pub use handoff::{HANDOFF_LABEL, exit_code, extractive_handoff, render_todo};
pub use summary_prompt::{IMAGE_MARKER, rewrite_for_summary, strip_analysis, summary_instruction};

/// Compaction settings (the seed's defaults).
#[derive(Debug, Clone, PartialEq)]
pub struct CompactPolicy {
    /// Compact above this share of the window.
    pub threshold: f64,
    /// Stage 1 alone suffices at or below this share.
    pub target: f64,
    /// Assistant turns kept in full.
    pub keep_steps: usize,
    /// Stage 1 trims tool results longer than this (characters)…
    pub trim_over: usize,
    /// …to this many characters.
    pub trim_to: usize,
    /// Use window − min(max output, 20 000) − 13 000 instead of `threshold`.
    pub use_reserved_formula: bool,
    /// Most files restored after compaction.
    pub restore_files: usize,
    /// Token limit of one restored file.
    pub restore_file_tokens: u64,
    /// Token budget of all restored files.
    pub restore_total_tokens: u64,
    /// Head truncations of the summary request on prompt-too-long.
    pub max_ptl_retries: u32,
    /// Consecutive failures after which auto-compaction pauses.
    pub max_failures: u32,
}

impl Default for CompactPolicy {
    fn default() -> Self {
        CompactPolicy {
            threshold: 0.8,
            target: 0.6,
            keep_steps: 4,
            trim_over: 1_000,
            trim_to: 200,
            use_reserved_formula: false,
            restore_files: 5,
            restore_file_tokens: 5_000,
            restore_total_tokens: 50_000,
            max_ptl_retries: 3,
            max_failures: 3,
        }
    }
}

/// Output room the reserved formula sets aside at most.
pub const SUMMARY_OUTPUT_RESERVE: u64 = 20_000;
/// Further room the reserved formula sets aside.
pub const EXTRA_RESERVE: u64 = 13_000;

/// Tokens above which compaction starts.
pub fn threshold_tokens(window: u64, max_output: u64, policy: &CompactPolicy) -> u64 {
    if policy.use_reserved_formula {
        window
            .saturating_sub(max_output.min(SUMMARY_OUTPUT_RESERVE))
            .saturating_sub(EXTRA_RESERVE)
    } else {
        (window as f64 * policy.threshold) as u64
    }
}

/// Tokens at or below which stage 1 alone is enough.
pub fn target_tokens(window: u64, policy: &CompactPolicy) -> u64 {
    (window as f64 * policy.target) as u64
}

/// True when the context is over the threshold.
pub fn should_compact(tokens: u64, window: u64, max_output: u64, policy: &CompactPolicy) -> bool {
    tokens > threshold_tokens(window, max_output, policy)
}

/// Index of the `keep_steps`-th assistant message from the end: the kept part starts there.
/// None when there is nothing older to compact.
pub fn split_index(messages: &[ViewMessage], keep_steps: usize) -> Option<usize> {
    let keep = keep_steps.max(1);
    let (i, _) = messages
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, m)| m.message.role == Role::Assistant)
        .nth(keep - 1)?;
    (i > 0).then_some(i)
}

/// The outcome of stage 1.
#[derive(Debug, Clone, PartialEq)]
pub struct Stage1 {
    /// The view with long old tool results cut.
    pub messages: Vec<ViewMessage>,
    /// Characters saved.
    pub saved_chars: usize,
    /// The record that makes replay cut the same results (None: nothing to cut).
    pub record: Option<TrimRecord>,
}

/// Stage 1: tool results longer than `trim_over` before `split` are cut to `trim_to` plus a
/// note. The returned record, appended, makes `build_view` reproduce the same cut.
pub fn stage1(
    messages: &[ViewMessage],
    split: usize,
    policy: &CompactPolicy,
    now_ms: u64,
) -> Stage1 {
    let mut out = messages.to_vec();
    let mut ids = Vec::new();
    let mut saved = 0usize;
    for m in out.iter_mut().take(split) {
        for b in &mut m.message.content {
            let Block::ToolResult {
                tool_use_id,
                content,
                ..
            } = b
            else {
                continue;
            };
            let before: usize = content.iter().map(Block::char_len).sum();
            if before <= policy.trim_over {
                continue;
            }
            super::view::trim_result(content, policy.trim_to);
            let after: usize = content.iter().map(Block::char_len).sum();
            if after < before {
                saved += before - after;
                ids.push(tool_use_id.clone());
            }
        }
    }
    let record = (!ids.is_empty()).then(|| TrimRecord {
        uuid: new_id(),
        time: now_ms,
        tool_use_ids: ids,
        keep_chars: policy.trim_to,
    });
    Stage1 {
        messages: out,
        saved_chars: saved,
        record,
    }
}

/// True when stage 1 alone brings the context to the target.
pub fn stage1_enough(
    tokens_before: u64,
    saved_chars: usize,
    window: u64,
    estimator: &TokenEstimator,
    policy: &CompactPolicy,
) -> bool {
    saved_chars > 0
        && tokens_before.saturating_sub(estimator.estimate(saved_chars))
            <= target_tokens(window, policy)
}

/// A side request for the summary.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryRequest {
    /// The messages to send: the prefix, then the instruction (its own user message when the
    /// prefix is shared, else appended to a trailing user message).
    pub messages: Vec<Message>,
    /// Cache markers: the end of the shared prefix (the instruction stays uncached); only
    /// the system prompt when the prefix was rewritten.
    pub cache: CachePlan,
    /// The instruction text (also the last message's text).
    pub instruction: String,
}

/// Builds the summary request. With `share_prefix` the messages are the view's bytes
/// unchanged, so the provider reads them from cache; otherwise thinking blocks are left out
/// and media become text markers. Tools must be denied by the caller (the text says so too).
pub fn summary_request(
    prefix: &[Message],
    compact_instructions: Option<&str>,
    focus: Option<&str>,
    share_prefix: bool,
) -> SummaryRequest {
    let instruction = summary_instruction(compact_instructions, focus);
    if share_prefix {
        // The instruction stays a message of its own after the marker, so the shared prefix
        // keeps its bytes (providers accept two user messages in a row).
        let mut messages = prefix.to_vec();
        let cache = side_cache_plan(messages.len());
        messages.push(Message::user_text(instruction.clone()));
        return SummaryRequest {
            messages,
            cache,
            instruction,
        };
    }
    let mut messages = rewrite_for_summary(prefix);
    match messages.last_mut() {
        Some(last) if last.role == Role::User => {
            last.content.push(Block::text(instruction.clone()))
        }
        _ => messages.push(Message::user_text(instruction.clone())),
    }
    let cache = CachePlan {
        system: true,
        messages: Vec::new(),
    };
    SummaryRequest {
        messages,
        cache,
        instruction,
    }
}

/// What a head truncation leaves in place of the dropped rounds.
pub const TRUNCATED_MARKER: &str = "[earlier conversation truncated]";

/// API-round groups: each group starts at an assistant message (the first also holds any
/// leading user messages), so a tool_use and its results stay in one group.
pub fn api_round_groups(messages: &[Message]) -> Vec<std::ops::Range<usize>> {
    let mut starts: Vec<usize> = vec![0];
    for (i, m) in messages.iter().enumerate().skip(1) {
        if m.role == Role::Assistant {
            starts.push(i);
        }
    }
    if messages.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(starts.len());
    for (k, &s) in starts.iter().enumerate() {
        let e = starts.get(k + 1).copied().unwrap_or(messages.len());
        out.push(s..e);
    }
    out
}

/// Prompt-too-long retry of the summary request: drops the oldest fifth of the API-round
/// groups (at least one, never the last) and opens with a truncation marker. None when
/// nothing can be dropped.
pub fn truncate_head_for_ptl(messages: &[Message]) -> Option<Vec<Message>> {
    // A marker from an earlier retry is not a round of its own.
    let messages = match messages.first() {
        Some(m) if m.role == Role::User && m.text() == TRUNCATED_MARKER => &messages[1..],
        _ => messages,
    };
    let groups = api_round_groups(messages);
    if groups.len() < 2 {
        return None;
    }
    let drop = (groups.len() / 5).clamp(1, groups.len() - 1);
    let start = groups[drop].start;
    let mut out = Vec::with_capacity(messages.len() - start + 1);
    out.push(Message::user_text(TRUNCATED_MARKER));
    out.extend_from_slice(&messages[start..]);
    Some(out)
}

/// A todo item as the session keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TodoEntry {
    /// What to do.
    pub content: String,
    /// `pending`, `in_progress` or `completed`.
    pub status: String,
}

/// A file re-read from disk for restoration (the caller reads it through the root-confined
/// module; most recent first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSnapshot {
    /// Workspace-relative path.
    pub path: String,
    /// Current content.
    pub content: String,
}

/// A restoration decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    /// The path.
    pub path: String,
    /// The content, or None when only the path comes back (too large for the budget).
    pub content: Option<String>,
}

/// Paths a set of messages already carries in tool calls (`input.path`).
fn paths_in(messages: &[ViewMessage]) -> HashSet<String> {
    let mut out = HashSet::new();
    for m in messages {
        for b in &m.message.content {
            if let Block::ToolUse { input, .. } = b
                && let Some(p) = input.get("path").and_then(|v| v.as_str())
            {
                out.insert(p.to_string());
            }
        }
    }
    out
}

/// Chooses which files come back: most recent first, skipping those the kept part already
/// holds, at most `restore_files`, each within `restore_file_tokens` and all within
/// `restore_total_tokens`; a file over a limit comes back as its path only.
pub fn select_restored_files(
    files: &[FileSnapshot],
    kept: &[ViewMessage],
    estimator: &TokenEstimator,
    policy: &CompactPolicy,
) -> Vec<Restored> {
    let present = paths_in(kept);
    let mut seen = HashSet::new();
    let mut total = 0u64;
    let mut out = Vec::new();
    for f in files {
        if out.len() >= policy.restore_files {
            break;
        }
        if present.contains(&f.path) || !seen.insert(f.path.as_str()) {
            continue;
        }
        let t = estimator.estimate(f.content.chars().count());
        let fits = t <= policy.restore_file_tokens && total + t <= policy.restore_total_tokens;
        if fits {
            total += t;
        }
        out.push(Restored {
            path: f.path.clone(),
            content: fits.then(|| f.content.clone()),
        });
    }
    out
}

/// The text of a restored-file message.
pub fn restored_file_text(r: &Restored) -> String {
    match &r.content {
        Some(c) => format!(
            "<restored_file path=\"{}\">\nThis file was read or edited before the compaction; its current \
             content on disk:\n{c}\n</restored_file>",
            r.path
        ),
        None => format!(
            "<restored_file path=\"{}\">\nThis file was read or edited before the compaction. It is too large \
             to restore here; read it again with read_file when you need it.\n</restored_file>",
            r.path
        ),
    }
}

/// The text of the summary message.
pub fn summary_message_text(summary: &str, transcript_path: &str, extractive: bool) -> String {
    let what = if extractive {
        "An extractive handoff"
    } else {
        "A summary"
    };
    format!(
        "This session continues from an earlier, longer conversation that ran out of context. \
         {what} of the earlier part follows; the full transcript is at {transcript_path}. \
         Continue the work directly from where it left off, without asking the user to repeat \
         anything.\n\n{summary}"
    )
}

/// The summary to install.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SummaryText {
    /// A model summary (already passed through `strip_analysis`).
    Model(String),
    /// An extractive handoff (from `extractive_handoff`).
    Extractive(String),
}

/// Everything `plan_installation` decides from.
#[derive(Debug, Clone)]
pub struct InstallInput<'a> {
    /// The view being compacted.
    pub view: &'a View,
    /// Where the kept part starts (from `split_index`; `view.messages.len()` keeps nothing).
    pub split: usize,
    /// The summary.
    pub summary: SummaryText,
    /// What started it.
    pub trigger: CompactTrigger,
    /// Context tokens before.
    pub tokens_before: u64,
    /// System prompt and tool tokens, counted in the estimate after.
    pub fixed_tokens: u64,
    /// Path of the full transcript, named in the summary message.
    pub transcript_path: &'a str,
    /// Files read or edited before, re-read from disk, most recent first.
    pub files: &'a [FileSnapshot],
    /// The session's todo list.
    pub todo: &'a [TodoEntry],
    /// Instructions re-read from disk, as a note (None: no note).
    pub instructions_note: Option<&'a str>,
    /// The session's estimator.
    pub estimator: &'a TokenEstimator,
    /// Limits.
    pub policy: &'a CompactPolicy,
    /// Time of the records.
    pub now_ms: u64,
}

/// The records that install a compaction, in order: boundary, summary message, kept steps
/// (copied, re-parented), restored files, todo list, instructions note. Append them in one
/// batch; `install_count` in the boundary lets a load detect a torn batch.
pub fn plan_installation(input: &InstallInput<'_>) -> Vec<Record> {
    let split = input.split.min(input.view.messages.len());
    let kept = &input.view.messages[split..];
    let now = input.now_ms;
    let mut msgs: Vec<MessageRecord> = Vec::new();
    let mut push =
        |role: Role, content: Vec<Block>, meta: Option<MessageMeta>, time: u64, copy_of| {
            let parent_uuid = msgs.last().map(|m: &MessageRecord| m.uuid.clone());
            msgs.push(MessageRecord {
                uuid: new_id(),
                parent_uuid,
                role,
                content,
                time,
                meta,
                is_virtual: false,
                copy_of,
            });
        };
    let (text, meta, extractive) = match &input.summary {
        SummaryText::Model(s) => (s, MessageMeta::Summary, false),
        SummaryText::Extractive(s) => (s, MessageMeta::Handoff, true),
    };
    push(
        Role::User,
        vec![Block::text(summary_message_text(
            text,
            input.transcript_path,
            extractive,
        ))],
        Some(meta),
        now,
        None,
    );
    for m in kept {
        let copy_of = (!m.source_ids.is_empty()).then(|| m.id.clone());
        push(
            m.message.role,
            m.message.content.clone(),
            m.meta,
            m.time,
            copy_of,
        );
    }
    for r in select_restored_files(input.files, kept, input.estimator, input.policy) {
        push(
            Role::User,
            vec![Block::text(restored_file_text(&r))],
            Some(MessageMeta::RestoredFile),
            now,
            None,
        );
    }
    if !input.todo.is_empty() {
        let t = format!(
            "<garuda_note>The current todo list:\n{}</garuda_note>",
            render_todo(input.todo)
        );
        push(
            Role::User,
            vec![Block::text(t)],
            Some(MessageMeta::Todo),
            now,
            None,
        );
    }
    if let Some(note) = input.instructions_note.filter(|n| !n.trim().is_empty()) {
        push(
            Role::User,
            vec![Block::text(note)],
            Some(MessageMeta::InstructionNote),
            now,
            None,
        );
    }
    let chars: usize = msgs
        .iter()
        .flat_map(|m| m.content.iter())
        .map(Block::char_len)
        .sum();
    let boundary = CompactBoundaryRecord {
        uuid: new_id(),
        time: now,
        trigger: input.trigger,
        tokens_before: input.tokens_before,
        tokens_after: input.fixed_tokens + input.estimator.estimate(chars),
        kept_head_id: kept.first().map(|m| m.id.clone()),
        kept_tail_id: kept.last().map(|m| m.id.clone()),
        extractive,
        install_count: msgs.len() as u32,
    };
    let mut out = Vec::with_capacity(msgs.len() + 1);
    out.push(Record::CompactBoundary(boundary));
    out.extend(msgs.into_iter().map(Record::Message));
    out
}

/// The estimate after installation, from the boundary the plan starts with.
pub fn planned_tokens_after(plan: &[Record]) -> Option<u64> {
    match plan.first() {
        Some(Record::CompactBoundary(b)) => Some(b.tokens_after),
        _ => None,
    }
}

/// A compaction that would not reduce the size is not installed.
pub fn worth_installing(tokens_before: u64, tokens_after: u64) -> bool {
    tokens_after < tokens_before
}

/// Consecutive-failure bookkeeping: after `max_failures` auto-compaction pauses (no loops).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FailureTracker {
    /// Failures in a row.
    pub consecutive: u32,
}

impl FailureTracker {
    /// Counts a failure; true when auto-compaction must now pause (tell the client).
    pub fn failed(&mut self, policy: &CompactPolicy) -> bool {
        self.consecutive = self.consecutive.saturating_add(1);
        self.consecutive == policy.max_failures
    }

    /// A success (or a manual compaction) resumes auto-compaction.
    pub fn succeeded(&mut self) {
        self.consecutive = 0;
    }

    /// True while auto-compaction is paused.
    pub fn paused(&self, policy: &CompactPolicy) -> bool {
        self.consecutive >= policy.max_failures
    }
}

#[cfg(test)]
mod tests;
