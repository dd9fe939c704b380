//! Operations on a session's view besides compaction: snip (from the client or the model's
//! `snip` tool) and collapse.

use std::collections::HashSet;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::background::PendingCollapse;
use super::events::{CompactionPhase, TurnEvent};
use super::host::TurnHost;
use super::live::{LiveSession, SessionState, TurnError};
use super::view::current_view;
use crate::message::{Block, Message, Role, Usage};
use crate::provider::{CachePlan, ModelRequest};
use crate::session::Record;
use crate::session::compact::{
    auto_collapse_span, collapse_fork, collapse_instruction, collapse_start, rewrite_for_summary,
    span_user_words, strip_analysis, summary_max_tokens,
};
use crate::session::records::{
    CollapseAheadRecord, CollapseRecord, CompactTrigger, SnipRecord, UsagePurpose, new_id, now_ms,
};
use crate::session::view::{CONTINUES_TEXT, View, collapse_span, resolve_short_id};

/// What a snip did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SnipOutcome {
    /// Ids now out of the view.
    pub removed: Vec<String>,
    /// Ids kept to keep tool pairs whole.
    pub protected: Vec<String>,
}

/// Snips transcript message ids (each must be a message of the transcript).
pub(crate) fn snip_ids(
    session: &LiveSession,
    state: &mut SessionState,
    ids: Vec<String>,
) -> Result<SnipOutcome, TurnError> {
    let known: HashSet<&str> = state
        .records()
        .iter()
        .filter_map(|r| r.as_message().map(|m| m.uuid.as_str()))
        .collect();
    if let Some(bad) = ids.iter().find(|i| !known.contains(i.as_str())) {
        return Err(TurnError::Invalid(format!(
            "message {bad} is not in this session"
        )));
    }
    if ids.is_empty() {
        return Ok(SnipOutcome::default());
    }
    state.append(vec![Record::Snip(SnipRecord {
        uuid: new_id(),
        time: now_ms(),
        removed_ids: ids.clone(),
        failed_turn: false,
    })])?;
    super::view::forget_reads_out_of_view(session, state)?;
    // The nudge counts growth from the last snip.
    state.nudge_since = None;
    state.scope.view_changed();
    let view = current_view(state, &session.setup.view_policy)?;
    let snipped: HashSet<&str> = view.snipped.iter().map(String::as_str).collect();
    let protected: HashSet<&str> = view.protected.iter().map(String::as_str).collect();
    Ok(SnipOutcome {
        removed: ids
            .iter()
            .filter(|i| snipped.contains(i.as_str()) && !protected.contains(i.as_str()))
            .cloned()
            .collect(),
        protected: ids
            .iter()
            .filter(|i| protected.contains(i.as_str()))
            .cloned()
            .collect(),
    })
}

/// Runs the model's snip tool: `{ids: [tag, ...]}`.
pub(crate) fn snip_tool(
    session: &LiveSession,
    state: &mut SessionState,
    input: &Value,
) -> Result<String, String> {
    let tags: Vec<String> = input
        .get("ids")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .ok_or_else(|| "snip needs {\"ids\": [\"<tag>\", ...]}".to_string())?;
    // The model looked at its context: the nudge counts growth from here.
    state.nudge_since = None;
    let view = current_view(state, &session.setup.view_policy).map_err(|e| e.to_string())?;
    let mut ids = Vec::new();
    let mut unknown = Vec::new();
    for t in &tags {
        match resolve_short_id(view, t) {
            Some(found) => ids.extend(found),
            None => unknown.push(t.clone()),
        }
    }
    let out = snip_ids(session, state, ids).map_err(|e| e.to_string())?;
    let first = current_view(state, &session.setup.view_policy)
        .map_err(|e| e.to_string())?
        .first_request
        .clone();
    let kept_first = first.is_some_and(|f| out.protected.contains(&f));
    let pairs = out.protected.len() - usize::from(kept_first);
    let mut text = format!("Removed {} message(s) from the context.", out.removed.len());
    if kept_first {
        text.push_str(" Kept the user's first request: it states the task.");
    }
    if pairs > 0 {
        text.push_str(&format!(
            " Kept {pairs} message(s) whose tool calls or results are still needed."
        ));
    }
    if !unknown.is_empty() {
        text.push_str(&format!(" Unknown ids: {}.", unknown.join(", ")));
    }
    Ok(text)
}

/// What a collapse installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollapseOutcome {
    /// The collapse record's id (the summary message's id in the view).
    pub collapse_id: String,
    /// The messages it replaces.
    pub span_ids: Vec<String>,
    /// The summary.
    pub summary: String,
    /// Tokens the summary request used (none when the client gave the summary).
    pub usage: Usage,
}

/// Collapses the span `from..=to` of the view into a summary (asked of the model when absent).
pub(crate) async fn collapse(
    session: &LiveSession,
    state: &mut SessionState,
    from: &str,
    to: &str,
    summary: Option<String>,
    cancel: &CancellationToken,
) -> Result<CollapseOutcome, TurnError> {
    collapse_with(session, state, from, to, summary, cancel, false).await
}

/// The automatic collapse at the top of a step: between the collapse threshold and the
/// compaction threshold, the older span (after the first request, before the kept steps)
/// becomes a summary, when that takes away at least `collapse_min_share` of the window.
/// A failure leaves the session as it was (compaction still guards the threshold); after
/// `max_failures` in a row the automatic collapse stops for the session's life in memory.
pub(crate) async fn auto_collapse(
    session: &LiveSession,
    state: &mut SessionState,
    host: &dyn TurnHost,
    cancel: &CancellationToken,
) -> Result<Usage, TurnError> {
    let policy = &session.setup.compact;
    if state.collapse_failures >= policy.max_failures {
        return Ok(Usage::default());
    }
    let b = super::budget::budgets(session, state);
    let Some(start) = collapse_start(b.window, b.threshold, policy) else {
        return Ok(Usage::default());
    };
    let before = super::budget::context_tokens(session, state)?;
    if before <= start || before > b.threshold {
        return Ok(Usage::default());
    }
    let Some((from, to)) = due_span(session, state)? else {
        return Ok(Usage::default());
    };
    let event = |phase, after, message: Option<String>| {
        host.event(
            &session.id,
            TurnEvent::Compaction {
                phase,
                trigger: CompactTrigger::Auto,
                tokens_before: Some(before),
                tokens_after: after,
                message,
            },
        )
    };
    // A summary asked ahead, behind an earlier answer, is installed without a wait while its
    // span is still in the view (it may end before today's span: less is collapsed).
    let (from, to, ahead) = match collapse_ready(session, state)? {
        Some(r) => (r.from_id, r.to_id, Some(r.summary)),
        // None ready: the collapse relieves cost, not a request that would not fit (the
        // threshold guards that), so the turn goes on while the summary is asked beside it,
        // and a later step installs it. Without background requests it is asked here.
        None if policy.session_memory => {
            spawn_collapse(session, state, from, to)?;
            return Ok(Usage::default());
        }
        None => (from, to, None),
    };
    event(CompactionPhase::Started, None, Some("collapse".into()));
    match collapse_with(session, state, &from, &to, ahead, cancel, true).await {
        Ok(out) => {
            state.collapse_failures = 0;
            let after = super::budget::context_tokens(session, state)?;
            event(
                CompactionPhase::Finished,
                Some(after),
                Some("collapse".into()),
            );
            Ok(out.usage)
        }
        Err(TurnError::Store(e)) => Err(TurnError::Store(e)),
        Err(e) if matches!(e, TurnError::Cancelled) || cancel.is_cancelled() => {
            // The step loop sees the cancellation next and ends the turn.
            event(CompactionPhase::Failed, None, Some("cancelled".into()));
            Ok(Usage::default())
        }
        Err(e) => {
            state.collapse_failures += 1;
            tracing::warn!("automatic collapse failed: {e}");
            event(
                CompactionPhase::Failed,
                None,
                Some(format!("collapse: {e}")),
            );
            Ok(Usage::default())
        }
    }
}

/// The newest collapse summary asked ahead, when nothing rewrote the view since and its span
/// is still a span of the view.
fn collapse_ready(
    session: &LiveSession,
    state: &mut SessionState,
) -> Result<Option<CollapseAheadRecord>, TurnError> {
    write_ahead(session, state);
    let Some(at) = state
        .records()
        .iter()
        .rposition(|r| matches!(r, Record::CollapseAhead(_)))
    else {
        return Ok(None);
    };
    let Record::CollapseAhead(r) = &state.records()[at] else {
        return Ok(None);
    };
    let r = r.clone();
    let rewritten = state.records()[at..]
        .iter()
        .any(|x| matches!(x, Record::Collapse(_) | Record::CompactBoundary(_)));
    if rewritten || r.summary.trim().is_empty() {
        return Ok(None);
    }
    let view = current_view(state, &session.setup.view_policy)?;
    Ok(collapse_span(view, &r.from_id, &r.to_id).ok().map(|_| r))
}

/// Writes a collapse summary asked ahead that arrived (its usage under `collapse`, then the
/// summary), so it survives the process (`garuda exec` waits for it) and the collapse finds it.
pub(crate) fn write_ahead(session: &LiveSession, state: &mut SessionState) {
    let Some(p) = session.background.collapse.take() else {
        return;
    };
    let now = now_ms();
    let usage =
        super::side::usage_record(UsagePurpose::Collapse, p.to.clone(), p.usage, p.chars, now);
    let ready = Record::CollapseAhead(CollapseAheadRecord {
        uuid: new_id(),
        time: now,
        from_id: p.from,
        to_id: p.to,
        summary: p.summary,
    });
    if let Err(e) = state.append(vec![usage, ready]) {
        tracing::warn!("cannot record a collapse summary asked ahead: {e}");
    }
}

/// Behind a turn's answer: once the next turn, growing as this one did (`turn_growth`, at
/// least a tenth of the start), would cross the automatic collapse's start (a span asked
/// earlier would be smaller than the collapse's), the span the collapse would take now is asked of the model as the same fork (its
/// prefix read from the cache the turn just wrote), so the collapse installs it with no wait.
pub(crate) fn collapse_ahead(
    session: &LiveSession,
    state: &mut SessionState,
    turn_growth: u64,
) -> Result<(), TurnError> {
    let policy = &session.setup.compact;
    // The memory's switch covers every request beside the turns.
    if !policy.session_memory || collapse_ready(session, state)?.is_some() {
        return Ok(());
    }
    let b = super::budget::budgets(session, state);
    let Some(start) = collapse_start(b.window, b.threshold, policy) else {
        return Ok(());
    };
    let tokens = super::budget::context_tokens(session, state)?;
    // The next turn crosses the start if it grows as this one did (or by a tenth of it).
    if tokens.saturating_add(turn_growth.max(start / 10)) < start || tokens > b.threshold {
        return Ok(());
    }
    match due_span(session, state)? {
        Some((from, to)) => spawn_collapse(session, state, from, to),
        None => Ok(()),
    }
}

/// The span the automatic collapse would take now: the older part of the view, when it
/// carries at least `collapse_min_share` of the window.
fn due_span(
    session: &LiveSession,
    state: &mut SessionState,
) -> Result<Option<(String, String)>, TurnError> {
    let policy = &session.setup.compact;
    let b = super::budget::budgets(session, state);
    let min_tokens = (b.window as f64 * policy.collapse_min_share) as u64;
    let min_chars = (min_tokens as f64 * state.tracker.estimator.chars_per_token()) as usize;
    let view = current_view(state, &session.setup.view_policy)?;
    Ok(auto_collapse_span(view, policy.keep_steps, min_chars))
}

/// Asks the model, beside the session, for the summary of the span `from..=to` (nothing when
/// one is in flight). An earlier one that brought nothing counts as a failed collapse, so a
/// model that never answers with a summary stops being asked after `max_failures`.
fn spawn_collapse(
    session: &LiveSession,
    state: &mut SessionState,
    from: String,
    to: String,
) -> Result<(), TurnError> {
    let policy = &session.setup.compact;
    let slot = &session.background.collapse;
    if slot.running() || state.collapse_failures >= policy.max_failures {
        return Ok(());
    }
    if slot.finished_empty() {
        state.collapse_failures += 1;
    }
    let view = current_view(state, &session.setup.view_policy)?.clone();
    let Ok(span) = collapse_span(&view, &from, &to) else {
        return Ok(());
    };
    let Some(request) = collapse_request(session, state, &view, &span_indices(&view, &span)) else {
        return Ok(());
    };
    super::side::spawn_text(
        session,
        slot,
        request,
        "a collapse asked ahead",
        move |summary, usage, chars| PendingCollapse {
            from,
            to,
            summary,
            usage,
            chars,
        },
    );
    Ok(())
}

/// Indices of the view's messages that hold a message of `span`, in order.
fn span_indices(view: &View, span: &[String]) -> Vec<usize> {
    let in_span: HashSet<&str> = span.iter().map(String::as_str).collect();
    (0..view.messages.len())
        .filter(|&i| {
            view.messages[i]
                .source_ids
                .iter()
                .any(|s| in_span.contains(s.as_str()))
        })
        .collect()
}

async fn collapse_with(
    session: &LiveSession,
    state: &mut SessionState,
    from: &str,
    to: &str,
    summary: Option<String>,
    cancel: &CancellationToken,
    auto: bool,
) -> Result<CollapseOutcome, TurnError> {
    let mut usage = Usage::default();
    let view = current_view(state, &session.setup.view_policy)?.clone();
    let span = collapse_span(&view, from, to).map_err(|e| TurnError::Invalid(e.to_string()))?;
    // The view's messages the span covers: what the summary is asked of, and whose tools'
    // files the collapse lists.
    let span_at = span_indices(&view, &span);
    let span_msgs: Vec<&Message> = span_at.iter().map(|&i| &view.messages[i].message).collect();
    let summary = match summary.filter(|s| !s.trim().is_empty()) {
        Some(s) => s,
        None => {
            let (text, used) =
                ask_collapse(session, state, &view, &span_at, &span_msgs, cancel).await?;
            usage = used;
            text
        }
    };
    if cancel.is_cancelled() {
        return Err(TurnError::Cancelled);
    }
    // A collapse, automatic or asked for, carries the span's user messages verbatim after
    // the summary, as every compaction does: the user's words never depend on a summary.
    let b = super::budget::budgets(session, state);
    let budget = (b.user_words as f64 * state.tracker.estimator.chars_per_token()) as usize;
    let mut summary = match span_user_words(state.records(), &span, budget) {
        Some(words) => format!("{summary}\n\n{words}"),
        None => summary,
    };
    // And the files its tools worked on, so which files were touched never depends on the
    // summary either.
    let files = crate::session::compact::files_touched(span_msgs.iter().copied());
    if !files.is_empty() {
        summary.push_str("\n\n");
        summary.push_str(&crate::session::compact::render_files_touched(&files));
    }
    let record = CollapseRecord {
        uuid: new_id(),
        time: now_ms(),
        from_id: from.to_string(),
        to_id: to.to_string(),
        span_ids: span.clone(),
        summary: summary.clone(),
        auto,
    };
    let collapse_id = record.uuid.clone();
    state.append(vec![Record::Collapse(record)])?;
    super::view::forget_reads_out_of_view(session, state)?;
    state.scope.view_changed();
    Ok(CollapseOutcome {
        collapse_id,
        span_ids: span,
        summary,
        usage,
    })
}

/// Output room of a collapse summary.
fn collapse_max_tokens(session: &LiveSession, state: &SessionState) -> u64 {
    let b = super::budget::budgets(session, state);
    summary_max_tokens(
        session.model().info.max_output as u64,
        b.summary,
        b.window / 2,
    )
}

/// The collapse fork of the span (`span_at`: its messages' indices in the view): the
/// session's system prompt and tools, the view through the span's end as the main request
/// sends it, the instruction after it. None when it would not fit the window with its output
/// room and a margin.
fn collapse_request(
    session: &LiveSession,
    state: &SessionState,
    view: &View,
    span_at: &[usize],
) -> Option<ModelRequest> {
    let fork = collapse_fork(&view.messages, *span_at.first()?, *span_at.last()?)?;
    let chars: usize = fork
        .messages
        .iter()
        .map(crate::session::view::message_chars)
        .sum();
    let b = super::budget::budgets(session, state);
    let max_tokens = collapse_max_tokens(session, state);
    let est = state.tracker.estimator;
    let need = est.estimate(super::budget::fixed_chars(session) + chars) + max_tokens;
    (need + b.window / 20 <= b.window).then(|| super::side::fork_request(session, fork, max_tokens))
}

/// Asks the model for a collapse summary of the span (`span_at`: its messages' indices in
/// the view, in order; `span_msgs`: those messages). The fork goes first: the session's
/// system prompt, tools and the view up to the span's end as the main request sends them, so
/// the provider reads them from the cache the main loop wrote. The plain request (the span
/// alone, no tools, system prompt cached) follows when the fork does not fit the window,
/// fails, gives no text or answers with a tool call (execution is denied: nothing runs).
async fn ask_collapse(
    session: &LiveSession,
    state: &mut SessionState,
    view: &View,
    span_at: &[usize],
    span_msgs: &[&Message],
    cancel: &CancellationToken,
) -> Result<(String, Usage), TurnError> {
    let mut usage = Usage::default();
    if let Some(req) = collapse_request(session, state, view, span_at) {
        match collapse_call(session, state, req, cancel).await {
            Ok(resp) => {
                usage.add(&resp.usage);
                let called = resp
                    .content
                    .iter()
                    .any(|b| matches!(b, Block::ToolUse { .. }));
                let text = strip_analysis(&super::side::response_text(&resp));
                if !called && !text.trim().is_empty() {
                    return Ok((text, usage));
                }
                tracing::info!("the collapse fork gave no summary; asking with the span alone");
            }
            Err(crate::provider::ProviderError::Cancelled { .. }) => {
                return Err(TurnError::Cancelled);
            }
            Err(e) => {
                tracing::info!("the collapse fork failed ({e}); asking with the span alone")
            }
        }
    }
    let msgs: Vec<Message> = span_msgs.iter().map(|m| (*m).clone()).collect();
    let mut msgs = rewrite_for_summary(&msgs);
    // Providers want the user first and roles alternating; a span usually starts with the
    // model's answer and may end with the user's message.
    if msgs.first().is_some_and(|m| m.role != Role::User) {
        msgs.insert(0, Message::user_text(CONTINUES_TEXT));
    }
    let instruction = collapse_instruction(None);
    match msgs.last_mut() {
        Some(m) if m.role == Role::User => m.content.push(Block::text(instruction)),
        _ => msgs.push(Message::user_text(instruction)),
    }
    let cache = CachePlan {
        system: true,
        messages: Vec::new(),
    };
    let req = ModelRequest {
        model: session.model().id.clone(),
        system: session.system(),
        tools: Vec::new(),
        messages: msgs,
        max_tokens: collapse_max_tokens(session, state) as u32,
        cache,
        thinking_budget: None,
        output_schema: None,
        no_tool_calls: false,
        tool_clearing: None,
    };
    let resp = collapse_call(session, state, req, cancel).await?;
    usage.add(&resp.usage);
    let text = strip_analysis(&super::side::response_text(&resp));
    if text.trim().is_empty() {
        return Err(TurnError::Invalid(
            "the model gave no summary for the span; pass one in `summary`".into(),
        ));
    }
    Ok((text, usage))
}

/// One collapse request: a side request recorded under `collapse`, its retries not shown
/// (the collapse reports its own progress).
async fn collapse_call(
    session: &LiveSession,
    state: &mut SessionState,
    req: ModelRequest,
    cancel: &CancellationToken,
) -> Result<crate::provider::ModelResponse, crate::provider::ProviderError> {
    super::side::side_call(
        session,
        state,
        &super::host::NullHost,
        req,
        UsagePurpose::Collapse,
        cancel,
    )
    .await
}
