//! Operations on a session's view besides compaction: snip (from the client or the model's
//! `snip` tool) and collapse.

use std::collections::HashSet;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::live::{LiveSession, SessionState, TurnError};
use super::view::current_view;
use crate::message::{Block, Message, ToolSpec};
use crate::provider::{CachePlan, ModelRequest};
use crate::session::Record;
use crate::session::compact::rewrite_for_summary;
use crate::session::records::{CollapseRecord, SnipRecord, UsagePurpose, new_id, now_ms};
use crate::session::view::{collapse_span, resolve_short_id};

/// The name of the model's snip tool.
pub const SNIP_TOOL: &str = "snip";

/// The spec of the model's snip tool.
pub fn snip_tool_spec() -> ToolSpec {
    ToolSpec {
        name: SNIP_TOOL.to_string(),
        description: "Remove earlier messages you no longer need from your context, to keep it \
                      small. Pass the ids shown as [id:...] tags at the end of user messages. \
                      Messages carrying tool calls or results that later messages still need are \
                      kept."
            .to_string(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "ids": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Tags of the messages to remove, e.g. [\"a1b2c3d4\"]"
                }
            },
            "required": ["ids"]
        }),
    }
}

/// What a snip did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SnipOutcome {
    /// Ids now out of the view.
    pub removed: Vec<String>,
    /// Ids kept to keep tool pairs whole.
    pub protected: Vec<String>,
}

/// Snips transcript message ids (each must be a message of the transcript).
pub fn snip_ids(
    session: &LiveSession,
    state: &mut SessionState,
    ids: Vec<String>,
) -> Result<SnipOutcome, TurnError> {
    let known: HashSet<&str> = state
        .records
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
    })])?;
    super::compact::forget_reads_out_of_view(session, state)?;
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
pub fn snip_tool(
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
    let mut text = format!("Removed {} message(s) from the context.", out.removed.len());
    if !out.protected.is_empty() {
        text.push_str(&format!(
            " Kept {} message(s) whose tool calls or results are still needed.",
            out.protected.len()
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
}

const COLLAPSE_INSTRUCTION: &str = "Summarize the conversation above in a few short paragraphs: \
    what was asked, what was done (files, commands and their results), decisions taken and \
    anything still open. Quote user directives verbatim. Do not call any tool; answer with the \
    summary text only.";

/// Collapses the span `from..=to` of the view into a summary (asked of the model when absent).
pub async fn collapse(
    session: &LiveSession,
    state: &mut SessionState,
    from: &str,
    to: &str,
    summary: Option<String>,
    cancel: &CancellationToken,
) -> Result<CollapseOutcome, TurnError> {
    let view = current_view(state, &session.setup.view_policy)?.clone();
    let span = collapse_span(&view, from, to).map_err(|e| TurnError::Invalid(e.to_string()))?;
    let summary = match summary.filter(|s| !s.trim().is_empty()) {
        Some(s) => s,
        None => {
            let in_span: HashSet<&str> = span.iter().map(String::as_str).collect();
            let msgs: Vec<Message> = view
                .messages
                .iter()
                .filter(|m| m.source_ids.iter().any(|s| in_span.contains(s.as_str())))
                .map(|m| m.message.clone())
                .collect();
            let mut msgs = rewrite_for_summary(&msgs);
            msgs.push(Message::user_text(COLLAPSE_INSTRUCTION));
            let request = ModelRequest {
                model: session.model().id.clone(),
                system: session.system(),
                tools: Vec::new(),
                messages: msgs,
                max_tokens: session.model().info.max_output,
                cache: CachePlan {
                    system: true,
                    messages: Vec::new(),
                },
                thinking_budget: None,
            };
            let resp = super::compact::side_call(
                session,
                state,
                &super::host::NullHost,
                request,
                UsagePurpose::Collapse,
                cancel,
            )
            .await?;
            let text: String = resp
                .content
                .iter()
                .filter_map(|b| match b {
                    Block::Text { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            let text = crate::session::compact::strip_analysis(&text);
            if text.trim().is_empty() {
                return Err(TurnError::Invalid(
                    "the model gave no summary for the span; pass one in `summary`".into(),
                ));
            }
            text
        }
    };
    if cancel.is_cancelled() {
        return Err(TurnError::Cancelled);
    }
    let record = CollapseRecord {
        uuid: new_id(),
        time: now_ms(),
        from_id: from.to_string(),
        to_id: to.to_string(),
        span_ids: span.clone(),
        summary: summary.clone(),
    };
    let collapse_id = record.uuid.clone();
    state.append(vec![Record::Collapse(record)])?;
    super::compact::forget_reads_out_of_view(session, state)?;
    state.scope.view_changed();
    Ok(CollapseOutcome {
        collapse_id,
        span_ids: span,
        summary,
    })
}
