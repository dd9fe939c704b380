//! Side requests: the calls Garuda makes beside the main loop (summaries, their shrink,
//! collapses, the compaction worker). Each forwards retries to the client and records its
//! usage under its purpose, so the session's cost is complete.

use tokio_util::sync::CancellationToken;

use super::background::{Slot, lock};
use super::events::TurnEvent;
use super::host::TurnHost;
use super::live::{LiveSession, SessionState};
use crate::message::{Block, Usage};
use crate::provider::{ModelRequest, ModelResponse, ProviderError, StreamEvent};
use crate::session::Record;
use crate::session::compact::{Fork, strip_analysis};
use crate::session::records::{UsagePurpose, UsageRecord, new_id, now_ms};
use crate::session::tokens;

/// One side request (a summary, its shrink, a collapse): runs it, forwards retry events to
/// the client, and records its usage in the transcript under `purpose`.
pub(crate) async fn side_call(
    session: &LiveSession,
    state: &mut SessionState,
    host: &dyn TurnHost,
    request: ModelRequest,
    purpose: UsagePurpose,
    cancel: &CancellationToken,
) -> Result<ModelResponse, ProviderError> {
    let chars = request_chars(&request);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<StreamEvent>();
    let call = session
        .model()
        .provider
        .complete(request, tx, cancel.clone());
    let forward = async {
        while let Some(ev) = rx.recv().await {
            if let StreamEvent::Retry {
                attempt,
                delay_ms,
                reason,
            } = ev
            {
                host.event(
                    &session.id,
                    TurnEvent::Retry {
                        attempt,
                        delay_ms,
                        reason,
                    },
                );
            }
        }
    };
    let (result, ()) = tokio::join!(call, forward);
    if let Ok(resp) = &result {
        let record = usage_record(
            purpose,
            state.last_message_id().unwrap_or_default(),
            resp.usage,
            chars,
            now_ms(),
        );
        if let Err(e) = state.append(vec![record]) {
            tracing::warn!("cannot record the usage of a side request: {e}");
        }
        state
            .tracker
            .estimator
            .observe(chars, resp.usage.context_tokens());
    }
    result
}

/// The usage record of one side request under `purpose`, after message `message_id`.
pub(crate) fn usage_record(
    purpose: UsagePurpose,
    message_id: String,
    usage: Usage,
    chars: usize,
    time: u64,
) -> Record {
    Record::Usage(UsageRecord {
        uuid: new_id(),
        time,
        message_id,
        usage,
        request_chars: Some(chars as u64),
        view_chars: None,
        purpose: Some(purpose),
        cost_usd: None,
        cache_miss: None,
    })
}

/// Characters a request carries, to calibrate the token estimate against real counts.
pub(crate) fn request_chars(req: &ModelRequest) -> usize {
    let messages: usize = req
        .messages
        .iter()
        .flat_map(|m| m.content.iter())
        .map(Block::char_len)
        .sum();
    req.system.chars().count() + tokens::tool_chars(&req.tools) + messages
}

/// The text blocks of a side request's answer, one per line.
pub(crate) fn response_text(resp: &ModelResponse) -> String {
    resp.content
        .iter()
        .filter_map(|b| match b {
            Block::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A fork of the session's main request: its system prompt and tools, `fork`'s messages and
/// cache markers, thinking off (the memory update and the collapse send it).
pub(crate) fn fork_request(session: &LiveSession, fork: Fork, max_tokens: u64) -> ModelRequest {
    ModelRequest {
        model: session.model().id.clone(),
        system: session.system(),
        tools: session.tool_specs(),
        messages: fork.messages,
        max_tokens: max_tokens as u32,
        cache: fork.cache,
        thinking_budget: None,
        output_schema: None,
        no_tool_calls: false,
        tool_clearing: None,
    }
}

/// Sends `request` beside the session (nothing holds it while the model answers). When the
/// answer is text only, not cut by the output limit, `make` turns it, its usage and the
/// request's size into what `slot` keeps for the next operation to write; anything else is
/// dropped (`what` names it in the log) and the next pause asks again.
pub(crate) fn spawn_text<T: Send + 'static>(
    session: &LiveSession,
    slot: &Slot<T>,
    request: ModelRequest,
    what: &'static str,
    make: impl FnOnce(String, Usage, usize) -> T + Send + 'static,
) {
    let provider = session.model().provider.clone();
    let pending = slot.pending.clone();
    let cancel = session.background.cancel.child_token();
    let task = tokio::spawn(async move {
        let chars = request_chars(&request);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<StreamEvent>();
        let call = provider.complete(request, tx, cancel);
        let drain = async { while rx.recv().await.is_some() {} };
        let (result, ()) = tokio::join!(call, drain);
        let resp = match result {
            Ok(r) => r,
            Err(e) => {
                tracing::info!("{what} failed: {e}");
                return;
            }
        };
        let called = resp
            .content
            .iter()
            .any(|b| matches!(b, Block::ToolUse { .. }));
        let text = strip_analysis(&response_text(&resp));
        let cut = resp.stop_reason == crate::message::StopReason::MaxTokens;
        if called || cut || text.trim().is_empty() {
            tracing::info!("{what} gave no usable text");
            return;
        }
        *lock(&pending) = Some(make(text, resp.usage, chars));
    });
    *lock(&slot.task) = Some(task);
}
