//! The view pipeline: what the next model request holds, selected from the transcript.
//!
//! `build_view` is a pure function of (records, policy, now). Stages, in order:
//! 1. slice after the latest (completely installed) compact boundary,
//! 2. tool-result budget (oversized results become a preview plus the side-file path),
//! 3. snip projection (drop snipped ids, never one side of a tool pair, never the first
//!    request),
//! 4. microcompact (recorded clears and stage-1 trims, then the time-based rule),
//! 5. collapse substitution (a committed span summary replaces the span),
//! 6. normalization (provider-valid: pairing, merging, media the provider refused (a
//!    `media_refused` record) as a marker, first message from the user),
//! 7. cache breakpoints.
//!
//! Cost: the slice is found by a reverse scan that stops at the latest boundary, so every
//! stage is linear in the records after that boundary, not in the session's length.

mod budget;
mod cache;
mod collapse;
mod incremental;
mod microcompact;
mod normalize;
mod slice;
mod snip;
mod tags;

use std::collections::HashSet;
use std::path::PathBuf;

use super::records::{MessageMeta, Record};
use crate::message::{Block, Message, Role};

pub use budget::{SideFile, budget_replacement, oversized_results, tool_result_file_name};
pub use cache::{
    CachePlan, MAX_CACHE_MARKERS, first_trimmable, main_cache_plan, prefix_end, stage1_end,
};
pub use collapse::{SpanError, collapse_span};
pub use incremental::ViewCache;
pub use microcompact::{CLEARED_TEXT, trim_content as trim_result, trim_note};
pub use normalize::{
    CONTINUES_TEXT, INTERRUPTED_TEXT, MEDIA_REMOVED_TEXT, check_pairing, media_refusal_targets,
};
pub use slice::slice_start;
pub use tags::{render_id_tags, resolve_id_range, resolve_short_id, short_id, tag_messages};

/// Settings of the view pipeline.
#[derive(Debug, Clone, PartialEq)]
pub struct ViewPolicy {
    /// Tool results over this many characters get a side file and a preview.
    pub tool_result_max_chars: usize,
    /// Characters of an oversized result kept as preview.
    pub tool_result_preview_chars: usize,
    /// Directory of this session's side files (named in the preview).
    pub tool_results_dir: PathBuf,
    /// Gap since the last assistant message after which old results are cleared (None: off).
    pub microcompact_after_ms: Option<u64>,
    /// Most recent compactable results the time-based rule keeps.
    pub microcompact_keep: usize,
    /// Tool names whose results the time-based rule may clear.
    pub compactable_tools: Vec<String>,
    /// Tool results longer than this are what stage 1 cuts (places the third cache marker).
    pub trim_over: usize,
}

impl Default for ViewPolicy {
    fn default() -> Self {
        ViewPolicy {
            tool_result_max_chars: 50_000,
            tool_result_preview_chars: 2_000,
            tool_results_dir: PathBuf::from("tool-results"),
            microcompact_after_ms: Some(60 * 60 * 1000),
            microcompact_keep: 5,
            // The session's tool registry fills this in (`ToolRegistry::compactable`).
            compactable_tools: Vec::new(),
            trim_over: 1_000,
        }
    }
}

/// One message of the view.
#[derive(Debug, Clone, PartialEq)]
pub struct ViewMessage {
    /// The id of the (first) transcript message it comes from, or of the collapse record.
    pub id: String,
    /// Every transcript id merged into it (normalization merges consecutive user messages).
    pub source_ids: Vec<String>,
    /// The previous view message (parents relinked across removed ranges).
    pub parent: Option<String>,
    /// Special kind, if any (of the first source).
    pub meta: Option<MessageMeta>,
    /// Time of the first source message (unix ms).
    pub time: u64,
    /// The provider-facing message.
    pub message: Message,
}

/// The result of the pipeline.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct View {
    /// Messages in order, provider-valid.
    pub messages: Vec<ViewMessage>,
    /// Cache markers for the main request.
    pub cache: CachePlan,
    /// Index of the first record after the boundary the view starts from (0: none).
    pub slice_start: usize,
    /// Message ids removed by snip records (after the boundary).
    pub snipped: Vec<String>,
    /// Snipped ids kept because the other side of a tool pair is still in the view, or
    /// because the message carries the user's first request.
    pub protected: Vec<String>,
    /// The transcript id of the message carrying the session's task (the first user request,
    /// or the summary that quotes it after a compaction): never snipped.
    pub first_request: Option<String>,
    /// Message ids replaced by collapse summaries.
    pub collapsed: Vec<String>,
    /// Ids of the collapse summaries in the view (each a collapse record's id).
    pub collapses: Vec<String>,
    /// Message ids whose media the view replaced with a marker (the provider refused it).
    pub media_stripped: Vec<String>,
    /// `tool_use_id`s the time-based microcompact clears now; the caller appends a
    /// microcompact record with them so that replay gives the same view.
    pub microcompact_due: Vec<String>,
    /// `tool_use_id`s whose results the view shows changed (a preview, cleared or cut), so
    /// their content is not in the view whole.
    pub altered: HashSet<String>,
}

impl View {
    /// The provider messages, in order.
    pub fn provider_messages(&self) -> Vec<Message> {
        self.messages.iter().map(|m| m.message.clone()).collect()
    }

    /// True when the message record `id` is in the view (alone or merged with neighbours).
    pub fn holds(&self, id: &str) -> bool {
        self.messages
            .iter()
            .any(|m| m.source_ids.iter().any(|s| s == id))
    }

    /// Total characters the messages carry (for estimates).
    pub fn chars(&self) -> usize {
        self.messages
            .iter()
            .map(|m| message_chars(&m.message))
            .sum()
    }
}

/// Characters a message carries.
pub fn message_chars(m: &Message) -> usize {
    m.content.iter().map(Block::char_len).sum()
}

/// A message on its way through the pipeline.
#[derive(Debug, Clone)]
pub(crate) struct Work {
    pub id: String,
    pub source_ids: Vec<String>,
    pub role: Role,
    pub content: Vec<Block>,
    pub time: u64,
    pub meta: Option<MessageMeta>,
    pub is_virtual: bool,
}

/// Runs the whole pipeline over a session's records (header excluded or not; it is ignored).
pub fn build_view(records: &[Record], policy: &ViewPolicy, now_ms: u64) -> View {
    build_full(records, policy, now_ms).0
}

/// The whole pipeline, also returning the operations it replayed (for the incremental cache).
/// The third value is the time of the last assistant message the time rule looked at.
pub(crate) fn build_full(
    records: &[Record],
    policy: &ViewPolicy,
    now_ms: u64,
) -> (View, slice::Sliced, Option<u64>) {
    let mut sliced = slice::slice(records);
    let mut msgs = std::mem::take(&mut sliced.messages);
    let mut altered: HashSet<String> = budget::apply(&mut msgs, policy).into_iter().collect();
    // A failed turn's unanswered message goes before the first request is chosen: the
    // session's task is then the first request that got an answer (or the next one).
    let mut unanswered = Vec::new();
    if !sliced.unanswered.is_empty() {
        msgs.retain(|m| {
            let gone = m.role == Role::User && sliced.unanswered.contains(&m.id);
            if gone {
                unanswered.push(m.id.clone());
            }
            !gone
        });
    }
    let first_request = snip::first_request(&msgs);
    let (mut snipped, protected) = snip::apply(&mut msgs, &sliced.snips, first_request.as_deref());
    snipped.extend(unanswered);
    altered.extend(microcompact::apply_records(
        &mut msgs,
        &sliced.cleared,
        &sliced.trims,
    ));
    let last_assistant = msgs
        .iter()
        .rev()
        .find(|m| m.role == Role::Assistant)
        .map(|m| m.time);
    let due = microcompact::time_based(&mut msgs, policy, &sliced.cleared, now_ms);
    altered.extend(due.iter().cloned());
    let (collapsed, collapses) = collapse::apply(&mut msgs, &sliced.collapses);
    let (messages, media_stripped) = normalize::normalize(msgs, &sliced.refused_media, true);
    let end = stage1_end(&messages);
    let (trimmable, _) = first_trimmable(&messages, 0, end, policy.trim_over);
    let cache = main_cache_plan(&messages, trimmable);
    let view = View {
        messages,
        cache,
        slice_start: sliced.start,
        snipped,
        protected,
        first_request,
        collapsed,
        collapses,
        media_stripped,
        microcompact_due: due,
        altered,
    };
    (view, sliced, last_assistant)
}

/// Why a transcript message is absent from the model's view (for `session/messages`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Removal {
    /// Before the latest compact boundary (or in a torn installation).
    Compacted,
    /// Removed by a snip record.
    Snipped,
    /// Replaced by a collapse summary.
    Collapsed,
}

/// For every message record absent from `view`, why. Linear in the whole transcript; meant
/// for paging the UI history, not for every step.
pub fn removal_marks(
    records: &[Record],
    view: &View,
) -> std::collections::HashMap<String, Removal> {
    let mut out = std::collections::HashMap::new();
    let present: HashSet<&str> = view
        .messages
        .iter()
        .flat_map(|m| m.source_ids.iter().map(String::as_str))
        .collect();
    for (i, r) in records.iter().enumerate() {
        if let Record::Message(m) = r
            && !present.contains(m.uuid.as_str())
            && !m.is_virtual
            && m.meta != Some(MessageMeta::Display)
            && i < view.slice_start
        {
            out.insert(m.uuid.clone(), Removal::Compacted);
        }
    }
    for id in &view.snipped {
        out.insert(id.clone(), Removal::Snipped);
    }
    for id in &view.collapsed {
        out.insert(id.clone(), Removal::Collapsed);
    }
    out
}

/// What the lighter reliefs and notes did to a view (for `context/inspect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReliefReport {
    /// Characters of the git state note in the view (0: none).
    pub git_state_chars: usize,
    /// Snip nudges sent over the session's life.
    pub nudges: u64,
    /// Collapse summaries in the view.
    pub collapses: u64,
    /// Of those, the ones Garuda installed by itself.
    pub auto_collapses: u64,
    /// Messages whose media the view replaced with a marker.
    pub media_stripped: u64,
}

/// The relief report of `view`, built from `records` (linear in the transcript).
pub fn relief_report(records: &[Record], view: &View) -> ReliefReport {
    let present: HashSet<&str> = view
        .messages
        .iter()
        .flat_map(|m| m.source_ids.iter().map(String::as_str))
        .collect();
    let installed: HashSet<&str> = view.collapses.iter().map(String::as_str).collect();
    let mut r = ReliefReport {
        collapses: view.collapses.len() as u64,
        media_stripped: view.media_stripped.len() as u64,
        ..ReliefReport::default()
    };
    for rec in records {
        match rec {
            Record::Message(m) if m.meta == Some(MessageMeta::Nudge) => r.nudges += 1,
            Record::Message(m)
                if m.meta == Some(MessageMeta::GitState) && present.contains(m.uuid.as_str()) =>
            {
                r.git_state_chars += m.content.iter().map(Block::char_len).sum::<usize>();
            }
            Record::Collapse(c) if c.auto && installed.contains(c.uuid.as_str()) => {
                r.auto_collapses += 1;
            }
            _ => {}
        }
    }
    r
}

/// Text of a tool result's text blocks.
pub(crate) fn result_text(content: &[Block]) -> String {
    let mut s = String::new();
    for b in content {
        if let Block::Text { text } = b {
            s.push_str(text);
        }
    }
    s
}

/// Bytes of a tool result's text blocks (an upper bound of its characters, cheap).
pub(crate) fn result_text_len(content: &[Block]) -> usize {
    content
        .iter()
        .map(|b| match b {
            Block::Text { text } => text.len(),
            _ => 0,
        })
        .sum()
}

#[cfg(test)]
pub(crate) mod tests;
