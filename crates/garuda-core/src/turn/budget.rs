//! Context accounting of a live session: the window it plans with (the configured one or
//! the provider's smaller limit), the budgets at that window, the context size now, and what
//! a prompt-too-long answer teaches. Read by the step loop, compaction and the reliefs alike.

use super::live::{LiveSession, SessionState, TurnError};
use super::view::current_view;
use crate::provider::ProviderError;
use crate::session::Record;
use crate::session::compact::{self, Budgets};
use crate::session::records::{ContextLimitRecord, new_id, now_ms};
use crate::session::tokens::{self, planned_window};

/// Characters of the parts every request carries besides its messages.
pub fn fixed_chars(session: &LiveSession) -> usize {
    session.system().chars().count() + tokens::tool_chars(&session.tool_specs())
}

/// The window the session plans with: the configured one, or the smaller one the model's
/// server reported, or the provider's smaller limit learned from a refusal.
pub(crate) fn window(session: &LiveSession, state: &SessionState) -> u64 {
    planned_window(
        &session.model().info,
        session.server_window(),
        state.learned_limit,
    )
    .0
}

/// The budgets at the session's window.
pub(crate) fn budgets(session: &LiveSession, state: &SessionState) -> Budgets {
    compact::budgets(
        window(session, state),
        session.model().info.max_output as u64,
        &session.setup.compact,
    )
}

/// The context size now (the view's messages, system prompt and tools).
pub(crate) fn context_tokens(
    session: &LiveSession,
    state: &mut SessionState,
) -> Result<u64, TurnError> {
    current_view(state, &session.setup.view_policy)?;
    let chars = state.view_cache.chars();
    Ok(state.tracker.context_tokens(chars, fixed_chars(session)))
}

/// Learns from a prompt-too-long answer: the limit it names (or, when it names none, one
/// inferred from the refused request's estimated size) is recorded in the transcript when it
/// is below the session's window, and a main request's real size recalibrates the estimate.
/// Returns the refused request's size in tokens, as well as it is known.
pub(crate) fn learn_limit(
    session: &LiveSession,
    state: &mut SessionState,
    err: &ProviderError,
    request_chars: Option<usize>,
    view_chars: Option<usize>,
) -> Result<Option<u64>, TurnError> {
    let Some(lim) = err.context_limit() else {
        return Ok(None);
    };
    let estimated = request_chars.map(|c| state.tracker.estimator.estimate(c));
    if let (Some(n), Some(c), Some(v)) = (lim.request_tokens, request_chars, view_chars) {
        state.tracker.on_refused(c, n, v);
    }
    let current = window(session, state);
    let (limit, inferred) = match lim.limit_tokens {
        Some(l) => (Some(l), false),
        // Nothing named: the request was too long, so the limit is below its size.
        None => (estimated.map(|e| e.saturating_mul(95) / 100), true),
    };
    if let Some(limit) = limit.filter(|&l| l > 0 && l < current) {
        state.append(vec![Record::ContextLimit(ContextLimitRecord {
            uuid: new_id(),
            time: now_ms(),
            limit_tokens: limit,
            request_tokens: lim.request_tokens,
            inferred,
        })])?;
        state.learned_limit = Some(state.learned_limit.map_or(limit, |l| l.min(limit)));
    }
    Ok(lim.request_tokens.or(estimated))
}
