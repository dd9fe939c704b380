//! An incremental view: when only messages were appended since the last build, the view's
//! stable prefix is kept and only the tail after it goes through the pipeline again, so the
//! work per step is proportional to what changed. Anything else (an operation record, a
//! policy change, the time rule firing, a result that answers a call in the prefix) falls
//! back to a full `build_view`; the result is always equal to `build_view`.

use std::collections::{HashMap, HashSet};

use super::slice::{Sliced, work_of};
use super::{
    View, ViewPolicy, Work, budget, build_full, first_trimmable, main_cache_plan, microcompact,
    normalize, snip, stage1_end,
};
use crate::message::{Block, Role};
use crate::session::records::{CollapseRecord, Record};

/// Keeps the last view and the replayed operations between steps.
#[derive(Debug, Default)]
pub struct ViewCache {
    state: Option<State>,
    full_builds: u64,
    incremental_builds: u64,
}

#[derive(Debug)]
struct State {
    policy: ViewPolicy,
    records_len: usize,
    last_uuid: String,
    view: View,
    /// Record index of every message record after the slice start.
    index_of: HashMap<String, usize>,
    snips: HashSet<String>,
    unanswered: HashSet<String>,
    collapses: Vec<CollapseRecord>,
    cleared: HashSet<String>,
    trims: HashMap<String, usize>,
    refused_media: HashSet<String>,
    skips: Vec<(usize, usize)>,
    last_assistant: Option<u64>,
    /// `view.chars()`, kept up to date without a full pass.
    chars: usize,
    /// The oldest message stage 1 would cut, and how far the search for it went: messages
    /// before that point never change between full builds, so the search resumes there.
    trimmable: (Option<usize>, usize),
}

impl ViewCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds from scratch so far.
    pub fn full_builds(&self) -> u64 {
        self.full_builds
    }

    /// Builds that only redid the tail.
    pub fn incremental_builds(&self) -> u64 {
        self.incremental_builds
    }

    /// Characters of the last view's messages (`View::chars`, maintained incrementally).
    pub fn chars(&self) -> usize {
        self.state.as_ref().map_or(0, |s| s.chars)
    }

    /// Forgets the cached view (e.g. after the records were replaced by a reload).
    pub fn clear(&mut self) {
        self.state = None;
    }

    /// The view of `records`, equal to `build_view(records, policy, now_ms)`.
    pub fn view(&mut self, records: &[Record], policy: &ViewPolicy, now_ms: u64) -> &View {
        let state = self.state.take();
        let next = match state.and_then(|s| incremental(s, records, policy, now_ms)) {
            Some(s) => {
                self.incremental_builds += 1;
                s
            }
            None => {
                self.full_builds += 1;
                full(records, policy, now_ms)
            }
        };
        &self.state.insert(next).view
    }
}

fn full(records: &[Record], policy: &ViewPolicy, now_ms: u64) -> State {
    let (view, sliced, last_assistant): (View, Sliced, Option<u64>) =
        build_full(records, policy, now_ms);
    let mut index_of = HashMap::new();
    for (i, r) in records.iter().enumerate().skip(view.slice_start) {
        if let Record::Message(m) = r {
            index_of.insert(m.uuid.clone(), i);
        }
    }
    let end = stage1_end(&view.messages);
    let trimmable = first_trimmable(&view.messages, 0, end, policy.trim_over);
    State {
        trimmable,
        policy: policy.clone(),
        records_len: records.len(),
        last_uuid: records
            .last()
            .map(|r| r.uuid().to_string())
            .unwrap_or_default(),
        index_of,
        snips: sliced.snips,
        unanswered: sliced.unanswered,
        collapses: sliced.collapses,
        cleared: sliced.cleared,
        trims: sliced.trims,
        refused_media: sliced.refused_media,
        skips: sliced.skips,
        last_assistant,
        chars: view.chars(),
        view,
    }
}

fn incremental(
    mut s: State,
    records: &[Record],
    policy: &ViewPolicy,
    now_ms: u64,
) -> Option<State> {
    if s.policy != *policy
        || records.len() < s.records_len
        || s.records_len == 0
        || records[s.records_len - 1].uuid() != s.last_uuid
        || !s.view.microcompact_due.is_empty()
    {
        return None;
    }
    let new = &records[s.records_len..];
    if !new.iter().all(|r| {
        matches!(
            r,
            Record::Message(_)
                | Record::Usage(_)
                | Record::InstructionChange(_)
                | Record::ContextLimit(_)
        )
    }) {
        return None;
    }
    // The time rule looks at the last assistant message (new messages are never snipped).
    let last_new = new.iter().rev().find_map(|r| match r {
        Record::Message(m) if m.role == Role::Assistant => Some(m.time),
        _ => None,
    });
    s.last_assistant = last_new.or(s.last_assistant);
    if let (Some(after), Some(t)) = (policy.microcompact_after_ms, s.last_assistant)
        && now_ms.saturating_sub(t) > after
    {
        return None;
    }
    for (k, r) in new.iter().enumerate() {
        if let Record::Message(m) = r {
            s.index_of.insert(m.uuid.clone(), s.records_len + k);
        }
    }
    // The prefix kept: at least two messages shorter, ending with a user message that comes
    // straight from the transcript.
    let msgs = &s.view.messages;
    let mut p = msgs.len().saturating_sub(2);
    let cut_record = loop {
        if p == 0 {
            return None;
        }
        let last = &msgs[p - 1];
        if last.message.role == Role::User
            && let Some(src) = last.source_ids.last()
            && let Some(&i) = s.index_of.get(src)
        {
            break i + 1;
        }
        p -= 1;
    };
    if s.skips.iter().any(|&(_, end)| end >= cut_record) {
        return None;
    }
    let mut tail: Vec<Work> = records[cut_record..]
        .iter()
        .filter_map(|r| r.as_message().map(work_of))
        .collect();
    let tail_ids: HashSet<&str> = tail.iter().map(|w| w.id.as_str()).collect();
    if s.collapses
        .iter()
        .any(|c| c.span_ids.iter().any(|id| tail_ids.contains(id.as_str())))
    {
        return None;
    }
    let mut uses = HashSet::new();
    for w in &tail {
        for b in &w.content {
            match b {
                Block::ToolUse { id, .. } => {
                    uses.insert(id.clone());
                }
                Block::ToolResult { tool_use_id, .. } if !uses.contains(tool_use_id) => {
                    return None;
                }
                _ => {}
            }
        }
    }
    s.view.altered.extend(budget::apply(&mut tail, policy));
    // The first request sits in the kept prefix; only a view that had none looks in the tail.
    if s.view.first_request.is_none() {
        s.view.first_request = snip::first_request(&tail);
    }
    // A failed turn's message may sit in the recomputed tail: it stays out.
    let before = tail.len();
    tail.retain(|w| !(w.role == Role::User && s.unanswered.contains(&w.id)));
    if tail.len() != before {
        return None;
    }
    let (snipped, protected) = snip::apply(&mut tail, &s.snips, s.view.first_request.as_deref());
    s.view
        .altered
        .extend(microcompact::apply_records(&mut tail, &s.cleared, &s.trims));
    let (mut tail_view, stripped) = normalize::normalize(tail, &s.refused_media, false);

    let mut messages = std::mem::take(&mut s.view.messages);
    let tail_chars = |m: &[super::ViewMessage]| -> usize {
        m.iter().map(|m| super::message_chars(&m.message)).sum()
    };
    // The prefix's last message may absorb the tail's first, so it is recounted too.
    s.chars -= tail_chars(&messages[p - 1..]);
    messages.truncate(p);
    if let (Some(last), Some(first)) = (messages.last_mut(), tail_view.first())
        && last.message.role == first.message.role
    {
        let first = tail_view.remove(0);
        last.message.content.extend(first.message.content);
        last.source_ids.extend(first.source_ids);
        normalize::results_first(&mut last.message.content);
    }
    if let Some(first) = tail_view.first_mut() {
        first.parent = messages.last().map(|m| m.id.clone());
    }
    messages.extend(tail_view);
    s.chars += tail_chars(&messages[p - 1..]);

    let before_cut = |id: &String| s.index_of.get(id).is_some_and(|&i| i < cut_record);
    s.view.snipped.retain(before_cut);
    s.view.snipped.extend(snipped);
    s.view.protected.retain(before_cut);
    s.view.protected.extend(protected);
    s.view.media_stripped.retain(before_cut);
    s.view.media_stripped.extend(stripped);
    // The search for the oldest long result resumes where it stopped, inside the kept prefix.
    let end = stage1_end(&messages);
    s.trimmable = match s.trimmable {
        (Some(t), at) if t < p.saturating_sub(1) => (Some(t), at),
        (_, at) => first_trimmable(
            &messages,
            at.min(p.saturating_sub(1)),
            end,
            policy.trim_over,
        ),
    };
    s.view.cache = main_cache_plan(&messages, s.trimmable.0);
    s.view.messages = messages;
    s.records_len = records.len();
    s.last_uuid = records
        .last()
        .map(|r| r.uuid().to_string())
        .unwrap_or_default();
    Some(s)
}
