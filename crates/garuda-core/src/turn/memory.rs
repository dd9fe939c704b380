//! The session memory's IO: the background update after a turn (a fork of the request the
//! turn just sent, so the provider reads its prefix from cache), writing what it brought to
//! the transcript, and the idle compaction timed to the provider's cache. The pure parts
//! (when, what to ask, whether the cache expired) are in `session/compact/memory.rs`.
//!
//! Nothing here holds the session while a model answers: the update runs beside the session
//! and leaves its notes in a slot that the next operation writes down, so a turn never waits
//! for it and it never makes a turn busy.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::background::{PendingMemory, lock};
use super::budget::{budgets, context_tokens};
use super::compact::{CompactRequest, compact_section, compact_session};
use super::host::TurnHost;
use super::live::{LiveSession, SessionState, TurnError};
use super::side::{fork_request, spawn_text, usage_record};
use super::view::current_view;
use crate::message::Usage;
use crate::prompt::PartKind;
use crate::session::Record;
use crate::session::compact::{
    cache_idle_ms, fork_with, idle_applies, latest_memory, memory_due, memory_end,
    memory_instruction, summary_max_tokens,
};
use crate::session::records::{
    CompactTrigger, MemoryRecord, MemorySource, UsagePurpose, new_id, now_ms,
};

/// Writes a finished update to the transcript (its usage first, as every side request's).
pub(crate) fn write_pending(session: &LiveSession, state: &mut SessionState) {
    let Some(p) = session.background.memory.take() else {
        return;
    };
    let usage = usage_record(
        UsagePurpose::Memory,
        p.record.through_id.clone(),
        p.usage,
        p.chars,
        p.record.time,
    );
    // Notes already overtaken by a compaction still describe the conversation; the next
    // compaction only installs them while their last message is in the view.
    if let Err(e) = state.append(vec![usage, Record::Memory(p.record)]) {
        tracing::warn!("cannot record the session memory: {e}");
        return;
    }
    state
        .tracker
        .estimator
        .observe(p.chars, p.usage.context_tokens());
}

/// The user's notes replace the memory: they cover the conversation so far (an empty text
/// leaves no memory until the next update).
pub(crate) fn set_by_user(
    session: &LiveSession,
    state: &mut SessionState,
    text: String,
) -> Result<(), TurnError> {
    write_pending(session, state);
    let tokens = context_tokens(session, state)?;
    let Some(through_id) = state.last_message_id() else {
        return Err(TurnError::Invalid(
            "the session has no messages for a memory to cover".into(),
        ));
    };
    state.append(vec![Record::Memory(MemoryRecord {
        uuid: new_id(),
        time: now_ms(),
        text,
        through_id,
        tokens_at: tokens,
        source: MemorySource::User,
    })])?;
    Ok(())
}

/// After a turn ended: sends the memory update in the background when it is due, and sets
/// the idle timer. Agents' sub-sessions keep no memory (their caller's does).
pub(crate) fn after_turn(
    session: &Arc<LiveSession>,
    state: &mut SessionState,
    host: Arc<dyn TurnHost>,
) -> Result<(), TurnError> {
    if session.is_agent() {
        return Ok(());
    }
    let policy = &session.setup.compact;
    let tokens = context_tokens(session, state)?;
    let window = budgets(session, state).window;
    let last = latest_memory(state.records()).map(|m| m.through_id.clone());
    let grown = match &last {
        Some(through) => {
            let est = state.tracker.estimator;
            let view = current_view(state, &session.setup.view_policy)?;
            memory_end(&view.messages, through).map(|end| {
                let chars: usize = view.messages[end + 1..]
                    .iter()
                    .map(|m| crate::session::view::message_chars(&m.message))
                    .sum();
                est.estimate(chars)
            })
        }
        None => None,
    };
    if memory_due(last.is_some(), grown, tokens, window, policy) {
        start_update(session, state, tokens)?;
    }
    if idle_applies(tokens, window, policy) {
        set_idle_timer(session, host);
    }
    Ok(())
}

/// Sends the update unless one runs: the view as the turn's last request carried it, then
/// the instruction.
fn start_update(
    session: &Arc<LiveSession>,
    state: &mut SessionState,
    tokens: u64,
) -> Result<(), TurnError> {
    let slot = &session.background.memory;
    if slot.running() {
        return Ok(());
    }
    let Some(through) = state.last_message_id() else {
        return Ok(());
    };
    let b = budgets(session, state);
    let prompt = session.prompt();
    let section = compact_section(prompt.part(PartKind::Instructions));
    let user_notes = latest_memory(state.records())
        .filter(|m| m.source == MemorySource::User)
        .map(|m| m.text.clone());
    let instruction = memory_instruction(section.as_deref(), user_notes.as_deref(), b.summary);
    let max_output = session.model().info.max_output as u64;
    let max_tokens = summary_max_tokens(max_output, b.summary, b.window / 2);
    // The update must fit the window with its output and a margin, as every request does;
    // a context that no longer leaves that room is the compaction's to relieve.
    let est = state.tracker.estimator;
    let need = tokens + est.estimate(instruction.chars().count()) + max_tokens + b.window / 20;
    if need > b.window {
        return Ok(());
    }
    let view = current_view(state, &session.setup.view_policy)?;
    let fork = fork_with(&view.messages, instruction);
    let request = fork_request(session, fork, max_tokens);
    spawn_text(
        session,
        slot,
        request,
        "the session memory update",
        move |text, usage, chars| PendingMemory {
            record: MemoryRecord {
                uuid: new_id(),
                time: now_ms(),
                text,
                through_id: through,
                tokens_at: tokens,
                source: MemorySource::Model,
            },
            usage,
            chars,
        },
    );
    Ok(())
}

/// Waits for the requests in flight beside the session (the memory's update, a collapse
/// asked ahead) and writes what they brought (`garuda exec` before it exits,
/// so the next process finds the notes; a shutting-down server).
pub async fn settle(session: &LiveSession) {
    session.background.memory.settle().await;
    session.background.collapse.settle().await;
    if lock(&session.background.memory.pending).is_none()
        && lock(&session.background.collapse.pending).is_none()
    {
        return;
    }
    if let Ok(mut state) = session.begin(&CancellationToken::new()).await {
        write_pending(session, &mut state);
        super::ops::write_ahead(session, &mut state);
    }
}

/// Before a turn: when the provider's cache expired while the session sat with a large
/// context, installs the memory as a compaction first, without a model call, so the request
/// that must write the prefix anew writes a small one. Nothing happens without a memory that
/// covers the conversation.
pub(crate) async fn compact_if_idle(
    session: &Arc<LiveSession>,
    state: &mut SessionState,
    host: &dyn TurnHost,
    cancel: &CancellationToken,
) -> Result<Usage, TurnError> {
    if session.is_agent() {
        return Ok(Usage::default());
    }
    write_pending(session, state);
    let policy = &session.setup.compact;
    let tokens = context_tokens(session, state)?;
    let window = budgets(session, state).window;
    if !crate::session::compact::idle_due(state.records(), tokens, window, policy, now_ms()) {
        return Ok(Usage::default());
    }
    let out = compact_session(session, state, host, cancel, idle_request(), &|_, _, _| {}).await?;
    Ok(out.usage)
}

/// An idle compaction: a summary relief that installs the memory or nothing.
fn idle_request() -> CompactRequest<'static> {
    CompactRequest {
        relief: Some(crate::session::compact::Relief::Summary),
        ..CompactRequest::new(CompactTrigger::Idle)
    }
}

/// Arms the idle timer: shortly before the provider's cache expires (at nine tenths of its
/// lifetime), a session nobody touched since is brought current and compacted from its
/// memory. A newer turn re-arms it; a busy session is left alone.
fn set_idle_timer(session: &Arc<LiveSession>, host: Arc<dyn TurnHost>) {
    let ttl_ms = session.setup.compact.cache_ttl_secs * 1_000;
    let wait = Duration::from_millis(ttl_ms * 9 / 10);
    let weak: Weak<LiveSession> = Arc::downgrade(session);
    let task = tokio::spawn(async move {
        tokio::time::sleep(wait).await;
        let Some(session) = weak.upgrade() else {
            return;
        };
        idle_compaction(&session, host.as_ref(), ttl_ms).await;
    });
    if let Some(old) = lock(&session.background.idle).replace(task.abort_handle()) {
        old.abort();
    }
}

/// The timer's work: the memory brought up to the last message while the cache still holds
/// the prefix (so the update reads it), then the compaction from it.
async fn idle_compaction(session: &Arc<LiveSession>, host: &dyn TurnHost, ttl_ms: u64) {
    let cancel = CancellationToken::new();
    {
        // The state alone, not the session's claim: a turn sent meanwhile waits these
        // milliseconds out instead of finding the session busy.
        let Some(mut state) = session.try_state() else {
            return;
        };
        write_pending(session, &mut state);
        // Someone used the session since the timer was set (their turn set its own timer),
        // or the context is no longer large.
        let idle = cache_idle_ms(state.records(), now_ms());
        let window = budgets(session, &state).window;
        let tokens = match context_tokens(session, &mut state) {
            Ok(t) => t,
            Err(_) => return,
        };
        if idle.is_none_or(|i| i >= ttl_ms) || !idle_applies(tokens, window, &session.setup.compact)
        {
            return;
        }
        let last = state.last_message_id();
        let covered = latest_memory(state.records()).map(|m| m.through_id.clone());
        if last.is_some() && covered != last && start_update(session, &mut state, tokens).is_err() {
            return;
        }
    }
    session.background.memory.settle().await;
    let Some(mut state) = session.try_state() else {
        return;
    };
    write_pending(session, &mut state);
    let req = idle_request();
    if let Err(e) = compact_session(session, &mut state, host, &cancel, req, &|_, _, _| {}).await {
        tracing::info!("the idle compaction failed: {e}");
    }
}
