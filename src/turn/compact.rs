//! Compaction of a live session: `compactIfNeeded` at the top of every step, the manual
//! `/compact`, and the reactive one after a prompt-too-long. The decisions are the pure
//! functions of `session::compact`; this module does the IO (model call, file reads, the one
//! batch append) and reports progress.

use std::path::Path;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::events::TurnEvent;
use super::host::TurnHost;
use super::live::{LiveSession, SessionState, TurnError};
use super::view::{current_view, provider_cache};
use crate::message::{Block, Message};
use crate::provider::{ModelRequest, ProviderError, StreamEvent};
use crate::session::Record;
use crate::session::compact::{
    self, FileSnapshot, InstallInput, SummaryText, TodoEntry, extractive_handoff, split_index,
    stage1, stage1_enough, strip_analysis, summary_request, truncate_head_for_ptl,
};
use crate::session::records::{CompactTrigger, now_ms};
use crate::session::tokens;
use crate::session::view::{View, render_id_tags};
use crate::tools::{FileTracker, TodoStatus};

/// What a compaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactOutcome {
    /// True when something was installed.
    pub compacted: bool,
    /// Estimated context tokens before.
    pub tokens_before: u64,
    /// Estimated context tokens after (= before when nothing was installed).
    pub tokens_after: u64,
    /// `summary`, `handoff` or `trim` when installed.
    pub kind: Option<String>,
    /// Why nothing was installed, when nothing was.
    pub message: Option<String>,
    /// True when it was cancelled (the session is unchanged).
    pub cancelled: bool,
}

impl CompactOutcome {
    fn nothing(tokens: u64, message: impl Into<String>) -> Self {
        CompactOutcome {
            compacted: false,
            tokens_before: tokens,
            tokens_after: tokens,
            kind: None,
            message: Some(message.into()),
            cancelled: false,
        }
    }
}

/// Receives compaction progress besides the turn events (the `$/progress` of `session/compact`).
pub type ProgressFn<'a> = &'a (dyn Fn(&str, Option<u64>, Option<u64>) + Send + Sync);

/// Emits one compaction event: phase, tokens after, detail.
type EventFn<'a> = &'a dyn Fn(&str, Option<u64>, Option<String>);

fn trigger_name(t: CompactTrigger) -> &'static str {
    match t {
        CompactTrigger::Manual => "manual",
        CompactTrigger::Auto => "auto",
        CompactTrigger::Reactive => "reactive",
    }
}

/// Characters of the parts every request carries besides its messages.
pub fn fixed_chars(session: &LiveSession) -> usize {
    session.system().chars().count() + tokens::tool_chars(&session.tool_specs())
}

/// The context size now (the view's messages, system prompt and tools).
pub fn context_tokens(session: &LiveSession, state: &mut SessionState) -> Result<u64, TurnError> {
    current_view(state, &session.setup.view_policy)?;
    let chars = state.view_cache.chars();
    Ok(state.tracker.context_tokens(chars, fixed_chars(session)))
}

/// True when the context is over the compaction threshold.
pub fn over_threshold(session: &LiveSession, tokens: u64) -> bool {
    let info = &session.setup.model_info;
    compact::should_compact(
        tokens,
        info.context_window,
        info.max_output as u64,
        &session.setup.compact,
    )
}

/// Compacts when the context is over the threshold and auto-compaction is not paused.
pub async fn compact_if_needed(
    session: &Arc<LiveSession>,
    state: &mut SessionState,
    host: &dyn TurnHost,
    cancel: &CancellationToken,
) -> Result<Option<CompactOutcome>, TurnError> {
    let tokens = context_tokens(session, state)?;
    if !over_threshold(session, tokens) || state.failures.paused(&session.setup.compact) {
        return Ok(None);
    }
    compact_session(
        session,
        state,
        host,
        cancel,
        CompactTrigger::Auto,
        None,
        &|_, _, _| {},
    )
    .await
    .map(Some)
}

/// The "Compact Instructions" section of the instruction files, if any.
fn compact_section(system: &str) -> Option<String> {
    let mut out: Option<(usize, String)> = None;
    for line in system.lines() {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if let Some((level, text)) = out.as_mut() {
            if hashes > 0 && hashes <= *level {
                break;
            }
            text.push_str(line);
            text.push('\n');
        } else if hashes > 0
            && line[hashes..]
                .trim()
                .eq_ignore_ascii_case("compact instructions")
        {
            out = Some((hashes, String::new()));
        }
    }
    out.map(|(_, t)| t.trim().to_string())
        .filter(|t| !t.is_empty())
}

/// Files read or edited in the compacted part, most recent first, re-read through the root.
fn snapshots(
    session: &LiveSession,
    older: &[crate::session::view::ViewMessage],
) -> Vec<FileSnapshot> {
    let policy = &session.setup.compact;
    let root = &session.setup.workspace.root;
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    // Read a little over the per-file limit, so a larger file is seen as too large.
    let max_chars = (policy.restore_file_tokens as usize).saturating_mul(6) + 16;
    for m in older.iter().rev() {
        for b in m.message.content.iter().rev() {
            let Block::ToolUse { name, input, .. } = b else {
                continue;
            };
            if !matches!(name.as_str(), "read_file" | "edit_file" | "write_file") {
                continue;
            }
            let Some(p) = input.get("path").and_then(|v| v.as_str()) else {
                continue;
            };
            if !seen.insert(p.to_string()) {
                continue;
            }
            let rel = Path::new(p)
                .strip_prefix(root.path())
                .unwrap_or(Path::new(p))
                .to_path_buf();
            if let Ok(t) = root.read_text(&rel, max_chars) {
                out.push(FileSnapshot {
                    path: p.to_string(),
                    content: t.text,
                });
            }
        }
        if out.len() >= policy.restore_files * 2 {
            break;
        }
    }
    out
}

fn todo_entries(session: &LiveSession) -> Vec<TodoEntry> {
    session
        .todos
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .map(|t| TodoEntry {
            content: t.content.clone(),
            status: match t.status {
                TodoStatus::Pending => "pending",
                TodoStatus::InProgress => "in_progress",
                TodoStatus::Completed => "completed",
            }
            .to_string(),
        })
        .collect()
}

/// How the summary call ended.
enum SummaryCall {
    Text(String),
    Cancelled,
    Failed(String),
}

/// Asks the model for the summary: the request shares the session's prefix (system, tools,
/// messages) and appends the instruction; tool calls in the answer are never run. A
/// prompt-too-long answer drops the oldest rounds and retries.
async fn call_summary(
    session: &LiveSession,
    prefix: Vec<Message>,
    focus: Option<&str>,
    cancel: &CancellationToken,
) -> SummaryCall {
    let system = session.system();
    let section = compact_section(&system);
    let mut prefix = prefix;
    let mut attempts = 0;
    loop {
        let req = summary_request(&prefix, section.as_deref(), focus, true);
        let request = ModelRequest {
            model: session.setup.model_id.clone(),
            system: system.clone(),
            tools: session.tool_specs(),
            messages: req.messages,
            max_tokens: session.setup.model_info.max_output,
            cache: provider_cache(&req.cache),
            thinking_budget: None,
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<StreamEvent>();
        let call = session.setup.provider.complete(request, tx, cancel.clone());
        let drain = async { while rx.recv().await.is_some() {} };
        let (result, ()) = tokio::join!(call, drain);
        match result {
            Ok(resp) => {
                let text: String = resp
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        Block::Text { text } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                return SummaryCall::Text(strip_analysis(&text));
            }
            Err(ProviderError::Cancelled { .. }) => return SummaryCall::Cancelled,
            Err(e) if e.is_prompt_too_long() => {
                attempts += 1;
                if attempts > session.setup.compact.max_ptl_retries {
                    return SummaryCall::Failed(e.to_string());
                }
                match truncate_head_for_ptl(&prefix) {
                    Some(p) => prefix = p,
                    None => return SummaryCall::Failed(e.to_string()),
                }
            }
            Err(e) => return SummaryCall::Failed(e.to_string()),
        }
    }
}

/// Compacts the session now. `Auto` and `Reactive` try stage 1 alone first; `Manual` always
/// goes on to the summary. Nothing changes unless the installation is written whole.
pub async fn compact_session(
    session: &Arc<LiveSession>,
    state: &mut SessionState,
    host: &dyn TurnHost,
    cancel: &CancellationToken,
    trigger: CompactTrigger,
    focus: Option<&str>,
    progress: ProgressFn<'_>,
) -> Result<CompactOutcome, TurnError> {
    let policy = session.setup.compact.clone();
    let info = &session.setup.model_info;
    let window = info.context_window;
    let mut tokens_before = context_tokens(session, state)?;
    if trigger == CompactTrigger::Reactive {
        // The provider counted more than the window, whatever our estimate says.
        tokens_before = tokens_before.max(window);
    }
    let view: View = current_view(state, &session.setup.view_policy)?.clone();
    let tname = trigger_name(trigger).to_string();
    let event = |phase: &str, after: Option<u64>, detail: Option<String>| {
        progress(phase, Some(tokens_before), after);
        host.event(
            &session.id,
            TurnEvent::Compaction {
                phase: phase.to_string(),
                trigger: tname.clone(),
                tokens_before: Some(tokens_before),
                tokens_after: after,
                message: detail,
            },
        );
    };
    let Some(split) = split_index(&view.messages, policy.keep_steps) else {
        return Ok(CompactOutcome::nothing(
            tokens_before,
            format!(
                "nothing to compact: the session has at most {} assistant turns",
                policy.keep_steps
            ),
        ));
    };
    event("started", None, None);
    let now = now_ms();
    let s1 = stage1(&view.messages, split, &policy, now);
    if trigger != CompactTrigger::Manual
        && stage1_enough(
            tokens_before,
            s1.saved_chars,
            window,
            &state.tracker.estimator,
            &policy,
        )
        && let Some(record) = s1.record.clone()
    {
        if cancel.is_cancelled() {
            event("failed", None, Some("cancelled".into()));
            return Ok(cancelled(tokens_before));
        }
        state.append(vec![Record::Trim(record)])?;
        let after = context_tokens(session, state)?;
        state.failures.succeeded();
        event("stage1", Some(after), None);
        event("finished", Some(after), Some("trim".into()));
        return Ok(CompactOutcome {
            compacted: true,
            tokens_before,
            tokens_after: after,
            kind: Some("trim".into()),
            message: None,
            cancelled: false,
        });
    }
    event("summary", None, None);
    // The auto summary shares exactly the prefix the main request sent, so the provider reads
    // it from cache; the manual one sends the view with stage 1 applied to the older part.
    let prefix = if trigger == CompactTrigger::Manual {
        let mut v = view.clone();
        v.messages = s1.messages.clone();
        render_id_tags(&v)
    } else {
        render_id_tags(&view)
    };
    let summary = match call_summary(session, prefix, focus, cancel).await {
        SummaryCall::Cancelled => {
            event("failed", None, Some("cancelled".into()));
            return Ok(cancelled(tokens_before));
        }
        SummaryCall::Text(t) if !t.trim().is_empty() => SummaryText::Model(t),
        SummaryCall::Text(_) => SummaryText::Extractive(extractive_handoff(
            &view.messages[..split],
            &todo_entries(session),
        )),
        SummaryCall::Failed(e) if trigger == CompactTrigger::Auto => {
            return Ok(fail(state, &policy, tokens_before, &e, &event));
        }
        SummaryCall::Failed(_) => SummaryText::Extractive(extractive_handoff(
            &view.messages[..split],
            &todo_entries(session),
        )),
    };
    if cancel.is_cancelled() {
        event("failed", None, Some("cancelled".into()));
        return Ok(cancelled(tokens_before));
    }
    let files = snapshots(session, &view.messages[..split]);
    let todo = todo_entries(session);
    // The instructions come back as they are on disk now: rebuild the system prompt.
    let ws = &session.setup.workspace;
    ws.invalidate();
    let assembled = ws.assemble(&ws.default_options(Some(&session.header.model)));
    let new_fixed = assembled.system.chars().count() + tokens::tool_chars(&session.tool_specs());
    let transcript = state.file.path().display().to_string();
    let plan = compact::plan_installation(&InstallInput {
        view: &view,
        split,
        summary: summary.clone(),
        trigger,
        tokens_before,
        fixed_tokens: state.tracker.estimator.estimate(new_fixed),
        transcript_path: &transcript,
        files: &files,
        todo: &todo,
        instructions_note: None,
        estimator: &state.tracker.estimator,
        policy: &policy,
        now_ms: now,
    });
    let after = compact::planned_tokens_after(&plan).unwrap_or(tokens_before);
    if !compact::worth_installing(tokens_before, after) {
        return Ok(fail(
            state,
            &policy,
            tokens_before,
            "the compaction would not reduce the context",
            &event,
        ));
    }
    state.append_batch(plan)?;
    state.view_cache.clear();
    state.tracker.reset();
    state.failures.succeeded();
    state.prompt_sha = assembled.sha256.clone();
    session.set_system(assembled.system.clone());
    *session.files.lock().unwrap_or_else(|p| p.into_inner()) = FileTracker::new();
    let tokens_after = context_tokens(session, state)?;
    let kind = match summary {
        SummaryText::Model(_) => "summary",
        SummaryText::Extractive(_) => "handoff",
    };
    event("finished", Some(tokens_after), Some(kind.into()));
    Ok(CompactOutcome {
        compacted: true,
        tokens_before,
        tokens_after,
        kind: Some(kind.into()),
        message: None,
        cancelled: false,
    })
}

fn cancelled(tokens: u64) -> CompactOutcome {
    CompactOutcome {
        cancelled: true,
        ..CompactOutcome::nothing(tokens, "cancelled")
    }
}

/// Counts a failure (the session is unchanged) and pauses auto-compaction after too many.
fn fail(
    state: &mut SessionState,
    policy: &compact::CompactPolicy,
    tokens: u64,
    why: &str,
    event: EventFn<'_>,
) -> CompactOutcome {
    let paused = state.failures.failed(policy);
    event("failed", None, Some(why.to_string()));
    if paused {
        event(
            "paused",
            None,
            Some(format!(
                "auto-compaction paused after {} consecutive failures; run session/compact to retry",
                policy.max_failures
            )),
        );
    }
    CompactOutcome::nothing(tokens, why)
}

#[cfg(test)]
mod tests {
    use super::compact_section;

    #[test]
    fn compact_section_is_the_heading_body_up_to_a_sibling_heading() {
        let system = "# Project instructions\n## AGENTS.md\nBe brief.\n### Compact Instructions\nKeep names.\n#### Detail\nAnd paths.\n### Next\nNo.\n";
        assert_eq!(
            compact_section(system).as_deref(),
            Some("Keep names.\n#### Detail\nAnd paths.")
        );
        assert_eq!(compact_section("# A\ntext\n"), None);
        assert_eq!(compact_section("## Compact instructions\n\n## B\n"), None);
    }
}
