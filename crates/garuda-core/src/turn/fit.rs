//! The last steps before a request is sent. When compaction could not bring the context
//! under the window (less the least answer room), the steps that still free room run in
//! order: the extractive handoff with one step kept and the user's earlier words cut to a
//! tenth of the window, then the view restarted from the current request. When even that
//! does not fit, the request is refused with the sizes and the way out: a session is never
//! stuck sending what the server will refuse. A failed turn's unanswered message leaves the
//! view, so failures do not pile up.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::budget::{context_tokens, fixed_chars, window};
use super::compact::{CompactRequest, compact_session};
use super::host::TurnHost;
use super::live::{LiveSession, SessionState, TurnError};
use super::view::current_view;
use crate::message::{Role, Usage};
use crate::session::Record;
use crate::session::compact::{Relief, current_request, output_floor};
use crate::session::records::{CompactTrigger, SnipRecord, new_id, now_ms};
use crate::session::view::message_chars;

/// True when the next request, as estimated, fits the window with the least answer room.
fn fits(session: &LiveSession, state: &mut SessionState) -> Result<bool, TurnError> {
    let w = window(session, state);
    Ok(context_tokens(session, state)? + output_floor(w) <= w)
}

/// Makes the next request fit, taking the steps in order; refuses it (`DoesNotFit`) when
/// none suffices. Returns what the steps' model calls used (none make any today).
pub(super) async fn make_room(
    session: &Arc<LiveSession>,
    state: &mut SessionState,
    host: &dyn TurnHost,
    cancel: &CancellationToken,
) -> Result<Usage, TurnError> {
    let mut usage = Usage::default();
    for relief in [Relief::Handoff, Relief::FreshStart] {
        if cancel.is_cancelled() || fits(session, state)? {
            return Ok(usage);
        }
        let req = CompactRequest {
            relief: Some(relief),
            ..CompactRequest::new(CompactTrigger::Auto)
        };
        let out = compact_session(session, state, host, cancel, req, &|_, _, _| {}).await?;
        usage.add(&out.usage);
    }
    if cancel.is_cancelled() || fits(session, state)? {
        return Ok(usage);
    }
    Err(does_not_fit(session, state)?)
}

/// The refusal with the sizes: the fixed part, the conversation before the current request,
/// the request (and what its turn added), the answer room and the window.
pub(super) fn does_not_fit(
    session: &LiveSession,
    state: &mut SessionState,
) -> Result<TurnError, TurnError> {
    let w = window(session, state);
    let total = context_tokens(session, state)?;
    let est = state.tracker.estimator;
    let fixed = est.estimate(fixed_chars(session)).min(total);
    let view = current_view(state, &session.setup.view_policy)?;
    let at = current_request(&view.messages).unwrap_or(view.messages.len());
    let chars = |ms: &[crate::session::view::ViewMessage]| -> usize {
        ms.iter().map(|m| message_chars(&m.message)).sum()
    };
    let before = est.estimate(chars(&view.messages[..at]));
    let message = total.saturating_sub(fixed + before);
    Ok(TurnError::DoesNotFit {
        fixed_tokens: fixed,
        history_tokens: before,
        message_tokens: message,
        output_tokens: output_floor(w),
        window_tokens: w,
    })
}

/// After a turn failed because its request did not fit: when the turn's user message got no
/// answer, it leaves the view (the transcript keeps it, marked by a snip record), so the
/// next turn does not carry it too.
pub(super) fn drop_unanswered(state: &mut SessionState, err: &TurnError) -> Result<(), TurnError> {
    if !err.is_context_full() {
        return Ok(());
    }
    // The turn's message, and any copy of it an installation made during the turn: only
    // while nothing answered it.
    let mut ids = Vec::new();
    for r in state.records().iter().rev() {
        let Some(m) = r.as_message() else { continue };
        // An answer, or a tool result: the turn got somewhere, and its steps stay.
        let answered = m.role == Role::Assistant
            || m.content
                .iter()
                .any(|b| matches!(b, crate::message::Block::ToolResult { .. }));
        if answered {
            break;
        }
        if !m.is_virtual && (m.meta.is_none() || m.copy_of.is_some()) {
            ids.push(m.uuid.clone());
        }
    }
    if ids.is_empty() {
        return Ok(());
    }
    ids.reverse();
    state.append(vec![Record::Snip(SnipRecord {
        uuid: new_id(),
        time: now_ms(),
        removed_ids: ids,
        failed_turn: true,
    })])?;
    Ok(())
}
