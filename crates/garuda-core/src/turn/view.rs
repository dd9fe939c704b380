//! The messages of the next model request: the session's records through the view pipeline.

use crate::message::CachePlan;
use crate::message::{Block, Message};
use crate::session::records::{MicrocompactRecord, new_id, now_ms};
use crate::session::view::{self, View, ViewPolicy};
use crate::session::{Record, StoreError};
use crate::tools::ViewAnchors;

use super::live::{LiveSession, SessionState, TurnError};

/// What the next step sends.
#[derive(Debug, Clone, PartialEq)]
pub struct StepView {
    /// The provider messages (user messages carry `[id:...]` tags for the snip tool).
    pub messages: Vec<Message>,
    /// Cache markers.
    pub cache: CachePlan,
    /// Characters of the view's messages (for the token estimate).
    pub view_chars: usize,
}

/// The view now; when the time rule of microcompact fires, its record is appended first so
/// that a resume replays the same view.
pub(crate) fn current_view<'a>(
    state: &'a mut SessionState,
    policy: &ViewPolicy,
) -> Result<&'a View, StoreError> {
    let now = now_ms();
    let due = state.view(policy, now).microcompact_due.clone();
    if !due.is_empty() {
        state.append(vec![Record::Microcompact(MicrocompactRecord {
            uuid: new_id(),
            time: now,
            cleared_tool_use_ids: due,
        })])?;
    }
    Ok(state.view(policy, now))
}

/// The messages and cache plan of the next step.
pub(crate) fn step_view(
    state: &mut SessionState,
    policy: &ViewPolicy,
) -> Result<StepView, StoreError> {
    let view = current_view(state, policy)?;
    let messages = view::render_id_tags(view);
    let cache = view.cache.clone();
    Ok(StepView {
        messages,
        cache,
        view_chars: state.view_cache.chars(),
    })
}

/// Where file content sits in a view: results shown whole, calls, and message ids.
pub fn view_anchors(view: &View) -> ViewAnchors {
    let mut a = ViewAnchors::default();
    for m in &view.messages {
        a.messages.extend(m.source_ids.iter().cloned());
        for b in &m.message.content {
            match b {
                Block::ToolResult { tool_use_id, .. } if !view.altered.contains(tool_use_id) => {
                    a.results.insert(tool_use_id.clone());
                }
                Block::ToolUse { id, .. } => {
                    a.calls.insert(id.clone());
                }
                _ => {}
            }
        }
    }
    a
}

/// The provider-bound messages and cache plan of a transcript, without a session (a full
/// pipeline run with the default policy; for previews and tests).
pub fn request_messages(records: &[Record]) -> (Vec<Message>, CachePlan) {
    let v = view::build_view(records, &ViewPolicy::default(), now_ms());
    (view::render_id_tags(&v), v.cache.clone())
}

/// Drops the read marks whose content left the view (after a trim, snip or collapse), so
/// the next read of those files returns content again.
pub(crate) fn forget_reads_out_of_view(
    session: &LiveSession,
    state: &mut SessionState,
) -> Result<(), TurnError> {
    let view = current_view(state, &session.setup.view_policy)?;
    let anchors = view_anchors(view);
    session
        .files
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .keep_reads_in(&anchors);
    Ok(())
}
